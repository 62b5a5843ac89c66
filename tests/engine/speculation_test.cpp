// Speculative decoding: guesses verified in one step give the tokens decoding without them gives
// (greedy, bit for bit, at any concurrency), keep the sampled distribution, stop and cancel where
// plain decoding does, and give back the KV of rejected guesses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <map>
#include <thread>

#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/speculator.h"
#include "engine_fixtures.h"
#include "model/presets.h"
#include "tokenizer/vocab.h"

namespace ll3 {
namespace {

using test::greedy;
using test::random_prompt;

// ---- the guessing rules ----

TEST(NgramGuess, CopiesWhatFollowedTheLatestLongestMatch) {
  const std::vector<int32_t> t = {7, 1, 2, 3, 4, 5, 9, 2, 3, 8, 1, 2, 3};
  std::vector<int32_t> out(4);
  // "1 2 3" occurs at 1 (followed by 4 5 9 2); "2 3" alone also at 7, later, but shorter.
  ASSERT_EQ(ngram_guess(t, 2, 4, out), 4);
  EXPECT_EQ(out, (std::vector<int32_t>{4, 5, 9, 2}));
  // Only bigrams: the latest "2 3" is at 7, followed by 8 1 2 3 (the copy stops at the end).
  std::vector<int32_t> two(8);
  ASSERT_EQ(ngram_guess(t, 2, 2, two), 4);
  EXPECT_EQ(std::vector<int32_t>(two.begin(), two.begin() + 4), (std::vector<int32_t>{8, 1, 2, 3}));
  // No earlier occurrence of the suffix: no guess.
  const std::vector<int32_t> fresh = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(ngram_guess(fresh, 2, 4, out), 0);
  EXPECT_EQ(ngram_guess(std::vector<int32_t>{5}, 1, 4, out), 0);
}

TEST(DraftLength, FollowsAcceptanceAndLoad) {
  // A memory-bound step (a row costs 5% of it): good guesses are worth many, bad ones none.
  EXPECT_EQ(draft_length(0.95, 8, 1, 1.0, 0.05), 8);
  EXPECT_EQ(draft_length(0.05, 8, 1, 1.0, 0.05), 0);
  const int mid = draft_length(0.6, 8, 1, 1.0, 0.05);
  EXPECT_GT(mid, 0);
  EXPECT_LT(mid, 8);
  // 32 rows in a step that costs a row's share each: guessing cannot beat batching.
  EXPECT_EQ(draft_length(0.8, 8, 32, 32 * 0.05, 0.05), 0);
  EXPECT_EQ(draft_length(0.95, 0, 1, 1.0, 0.05), 0);
}

TEST(AcceptanceRate, SettlesOnWhatTheSequenceEarns) {
  AcceptanceRate r;
  EXPECT_DOUBLE_EQ(r.rate(0.6), 0.6);
  for (int i = 0; i < 30; ++i) r.add(0, 4);  // every first guess wrong
  EXPECT_LT(r.rate(0.6), 0.15);
  for (int i = 0; i < 200; ++i) r.idle();    // then a long pause: back to the prior
  EXPECT_NEAR(r.rate(0.6), 0.6, 0.01);
  for (int i = 0; i < 30; ++i) r.add(4, 4);  // every guess right
  EXPECT_GT(r.rate(0.6), 0.9);
}

// ---- the scheduler's side: guesses run with the last token and vanish when rejected ----

struct DraftFixture {
  // 16 blocks of 4 positions, an 8-token step, 4 guess rows.
  DraftFixture() : pool(16, 4, 11), kv(pool, true), sched(kv, options()) {}
  static SchedulerOptions options() {
    SchedulerOptions o;
    o.batch_tokens = 8;
    o.max_seqs = 4;
    o.draft_rows = 4;
    return o;
  }
  // Sequences with 6-token prompts, run until each decodes (its last, sampled token pending).
  void decoding(const std::vector<uint64_t>& ids) {
    for (uint64_t id : ids) {
      std::vector<int32_t> t(6);
      for (int i = 0; i < 6; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>(10 * id) + i;
      sched.add(id, t, 40, 0, false);
    }
    auto ready = [&] {
      return std::all_of(ids.begin(), ids.end(), [&](uint64_t id) { return sched.seq(id).tokens.size() > 6 && sched.seq(id).pending() == 1; });
    };
    while (!ready()) {
      const SchedulerOutput& out = sched.schedule();
      sched.computed(out);
      for (const ScheduledSeq& it : out.seqs) {
        if (it.logits) sched.append(it.id, 100);
      }
    }
  }
  BlockPool pool;
  KvManager kv;
  Scheduler sched;
};

TEST(SchedulerDrafts, RejectedGuessesLeaveNoTokensNoPositionsNoBlocks) {
  DraftFixture f;
  const uint64_t a = 1;
  f.decoding({a});
  const int32_t used_before = f.pool.used_blocks();  // 6 computed positions: 2 blocks
  const std::vector<int32_t> guesses = {1, 2, 3, 4};
  f.sched.draft(a, guesses);
  const SchedulerOutput& out = f.sched.schedule();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].n_tokens, 5);  // the last known token and four guesses
  EXPECT_EQ(out.seqs[0].n_draft, 4);
  EXPECT_EQ(std::vector<int32_t>(out.tokens.begin(), out.tokens.end()), (std::vector<int32_t>{100, 1, 2, 3, 4}));
  EXPECT_EQ(f.pool.used_blocks(), 3);  // positions 0..10
  f.sched.verified(a, 1);              // guess 1 right, guess 2 wrong
  f.sched.computed(out);
  EXPECT_EQ(f.sched.seq(a).n_computed, 8);  // 6 + the last token + one guess
  EXPECT_EQ(f.sched.seq(a).tokens.size(), 8u);
  EXPECT_EQ(f.kv.blocks(a).size(), 2u);  // the rejected rows' block is back in the pool
  EXPECT_EQ(f.pool.used_blocks(), used_before);
}

TEST(SchedulerDrafts, GuessesGiveWayToTheBudgetAndToOthers) {
  DraftFixture f;
  const uint64_t a = 1, b = 2;
  f.decoding({a, b});
  const size_t a_len = f.sched.seq(a).tokens.size(), b_len = f.sched.seq(b).tokens.size();
  // Five guesses each: the step has 4 guess rows, and 8 tokens.
  const std::vector<int32_t> g = {1, 2, 3, 4, 5};
  f.sched.draft(a, g);
  f.sched.draft(b, g);
  const SchedulerOutput& out = f.sched.schedule();
  ASSERT_EQ(out.seqs.size(), 2u);
  EXPECT_EQ(out.seqs[0].n_draft, 4);  // the guess rows run out...
  EXPECT_EQ(out.seqs[1].n_draft, 0);  // ...so b decodes plainly
  EXPECT_EQ(out.n_tokens, 6);
  EXPECT_EQ(f.sched.seq(b).tokens.size(), b_len) << "b's guesses were taken back";
  f.sched.verified(a, 4);
  f.sched.computed(out);
  EXPECT_EQ(f.sched.seq(a).n_computed, static_cast<int64_t>(a_len) + 4);
  // Guesses of a sequence that leaves are gone with it; the other one's run.
  f.sched.append(a, 9);
  f.sched.append(b, 9);
  f.sched.draft(b, g);
  f.sched.remove(a);
  const SchedulerOutput& next = f.sched.schedule();
  ASSERT_EQ(next.seqs.size(), 1u);
  EXPECT_EQ(next.seqs[0].n_draft, 4);
  f.sched.verified(b, 0);
  f.sched.computed(next);
  EXPECT_EQ(f.sched.seq(b).tokens.size(), b_len + 1);
  EXPECT_EQ(f.sched.seq(b).n_computed, static_cast<int64_t>(b_len) + 1);
  EXPECT_EQ(f.kv.blocks(b).size(), (b_len + 1 + 3) / 4);
}

// ---- verification keeps the distribution ----

// Chi-square statistic of observed counts against expected probabilities.
double chi_square(const std::vector<int64_t>& seen, const std::vector<double>& p, int64_t n) {
  double x = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) {
      EXPECT_EQ(seen[i], 0) << "token " << i << " has no probability";
      continue;
    }
    const double e = p[i] * static_cast<double>(n);
    x += (static_cast<double>(seen[i]) - e) * (static_cast<double>(seen[i]) - e) / e;
  }
  return x;
}

TEST(SamplerVerify, KeepsTheTargetDistributionForAnyGuess) {
  // Six live tokens (top-k 6 of 8), temperature 0.7: p_i proportional to exp(l_i / 0.7).
  const std::vector<float> logits = {2.0f, 1.5f, 0.2f, -0.3f, 1.0f, 0.9f, -5.0f, -6.0f};
  SamplingParams sp;
  sp.temperature = 0.7f;
  sp.top_k = 6;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  std::vector<double> p(8, 0.0);
  double z = 0;
  for (int i = 0; i < 6; ++i) z += std::exp(logits[i] / 0.7);
  for (int i = 0; i < 6; ++i) p[i] = std::exp(logits[i] / 0.7) / z;
  // The likeliest token, an unlikely one, and one outside the candidates (never accepted).
  for (int32_t guess : {0, 3, 7}) {
    SamplerState st(sp);
    st.reset(1234 + static_cast<uint64_t>(guess));
    Sampler s(8);
    const int64_t n = 40000;
    std::vector<int64_t> seen(8, 0);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      bool accepted = false;
      const int32_t t = s.verify(st, logits.data(), {}, guess, &accepted);
      ++seen[static_cast<size_t>(t)];
      kept += accepted;
      EXPECT_EQ(accepted, t == guess);
    }
    // df = 5: P(chi2 > 25.7) = 1e-4, the stated false-failure rate of each check (and the seeds
    // are fixed, so a pass is a pass every run).
    EXPECT_LT(chi_square(seen, p, n), 25.7) << "guess " << guess;
    EXPECT_NEAR(static_cast<double>(kept) / n, p[static_cast<size_t>(guess)], 0.01) << "guess " << guess;
  }
}

TEST(SamplerVerify, GreedyKeepsOnlyTheArgmax) {
  const std::vector<float> logits = {0.1f, 3.0f, 2.9f, -1.0f};
  SamplingParams sp;
  sp.temperature = 0;
  SamplerState st(sp);
  Sampler s(4);
  bool accepted = true;
  EXPECT_EQ(s.verify(st, logits.data(), {}, 2, &accepted), 1);
  EXPECT_FALSE(accepted);
  EXPECT_EQ(s.verify(st, logits.data(), {}, 1, &accepted), 1);
  EXPECT_TRUE(accepted);
  // The penalties see the history up to the guess: with 1 in it, 2 wins.
  sp.repeat_penalty = 2.0f;
  SamplerState pen(sp);
  const std::vector<int32_t> hist = {1};
  EXPECT_EQ(s.verify(pen, logits.data(), hist, 2, &accepted), 2);
  EXPECT_TRUE(accepted);
}

// ---- the engine ----

std::shared_ptr<const Model> load(const std::string& path) {
  Result<std::shared_ptr<const Model>> m = Model::load(path);
  EXPECT_TRUE(m.ok()) << path << ": " << m.message();
  return m.ok() ? m.value() : nullptr;
}

// A freshly made model (the "small" preset, seed 11), written once per test binary.
std::shared_ptr<const Model> fresh_model() {
  static std::shared_ptr<const Model> m = [] () -> std::shared_ptr<const Model> {
    auto vocab = load_vocab_from_hf(test::shared_dir() + "/tokenizers/llama3");
    if (!vocab.ok()) return nullptr;
    MakeModelOptions mo;
    mo.seed = 11;
    const std::string path = test::temp_dir() + "/spec-fresh.gguf";
    if (!write_preset_model(*find_preset("small"), *vocab, mo, path).ok()) return nullptr;
    return load(path);
  }();
  return m;
}

// With speculation, every decoding sequence guesses 3 to 8 tokens a step: on these small models
// the cost rule alone would guess little (their 128k-vocabulary output makes a row dear).
std::unique_ptr<Engine> engine(std::shared_ptr<const Model> m, SpecMode spec, std::shared_ptr<const Model> draft = nullptr,
                               double batch_wait_ms = 5) {
  EngineOptions o;
  o.spec_min_guesses = 3;
  o.threads = 2;
  o.ctx = 4096;
  o.batch_wait_ms = batch_wait_ms;
  o.spec = spec;
  o.draft_model = std::move(draft);
  Result<std::unique_ptr<Engine>> e = Engine::create(std::move(m), o);
  EXPECT_TRUE(e.ok()) << e.message();
  return e.ok() ? std::move(e.value()) : nullptr;
}

// Prompts that repeat themselves (so that lookup finds matches) and plain random ones.
std::vector<std::vector<int32_t>> prompts(int n) {
  std::vector<std::vector<int32_t>> p;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> t = random_prompt(12 + i % 5, 100 + static_cast<uint32_t>(i));
    if (i % 2 == 0) {
      const std::vector<int32_t> once(t.begin() + 1, t.end());
      for (int r = 0; r < 3; ++r) t.insert(t.end(), once.begin(), once.end());
    }
    p.push_back(std::move(t));
  }
  return p;
}

// Every prompt's tokens, run together (all submitted at once) or one after another.
std::vector<std::vector<int32_t>> run_all(Engine& e, const std::vector<std::vector<int32_t>>& ps, int64_t n, bool together) {
  std::vector<std::vector<int32_t>> out(ps.size());
  std::vector<std::promise<void>> done(ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    Request r = greedy(ps[i], n);
    r.on_token = [&out, i](const TokenEvent& ev) {
      out[i].push_back(ev.token);
      return true;
    };
    r.on_finish = [&done, i](const FinishInfo& f) {
      EXPECT_NE(f.reason, FinishReason::kError) << f.error;
      done[i].set_value();
    };
    EXPECT_TRUE(e.submit(std::move(r)).ok());
    if (!together) done[i].get_future().wait();
  }
  if (together) {
    for (auto& d : done) d.get_future().wait();
  }
  e.wait_idle();
  for (const auto& o : out) EXPECT_EQ(static_cast<int64_t>(o.size()), n) << "greedy past end-of-generation: every token comes";
  return out;
}

struct Case {
  const char* name;
  std::shared_ptr<const Model> model, draft;
  SpecMode spec;
};

TEST(Speculation, GreedyIsTheSameTokensAloneAndWithSixteenOthers) {
  LL3_REQUIRE_ENGINE_MODEL();
  const std::string dir = test::shared_dir() + "/models/";
  std::shared_ptr<const Model> q4 = test::engine_model(), f32 = load(dir + "tiny-llama3-f32.gguf"),
                               trained = load(dir + "trained-llama3-4l-f16.gguf"), fresh = fresh_model();
  ASSERT_TRUE(f32 && trained && fresh);
  const std::vector<Case> cases = {
      {"q4_k_m ngram", q4, nullptr, SpecMode::kNgram},
      {"f32 ngram", f32, nullptr, SpecMode::kNgram},
      {"trained ngram", trained, nullptr, SpecMode::kNgram},
      {"fresh ngram", fresh, nullptr, SpecMode::kNgram},
      {"q4_k_m drafted by itself", q4, q4, SpecMode::kDraft},      // every guess right
      {"q4_k_m drafted by the f32 model", q4, f32, SpecMode::kDraft},  // nearly every guess wrong
      {"fresh drafted by q4_k_m", fresh, q4, SpecMode::kDraft},
  };
  const std::vector<std::vector<int32_t>> ps = prompts(16);
  std::map<const Model*, std::vector<std::vector<int32_t>>> plain_tokens;  // each model's, run once
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<std::vector<int32_t>>& want = plain_tokens[c.model.get()];
    if (want.empty()) {
      std::unique_ptr<Engine> plain = engine(c.model, SpecMode::kOff);
      ASSERT_TRUE(plain);
      want = run_all(*plain, ps, 40, false);
      ASSERT_EQ(want.size(), ps.size());
    }
    std::unique_ptr<Engine> spec = engine(c.model, c.spec, c.draft);
    ASSERT_TRUE(spec);
    EXPECT_EQ(run_all(*spec, std::vector<std::vector<int32_t>>(ps.begin(), ps.begin() + 4), 40, false),
              std::vector<std::vector<int32_t>>(want.begin(), want.begin() + 4))
        << "alone";
    EXPECT_EQ(run_all(*spec, ps, 40, true), want) << "16 at once";
    const EngineStats st = spec->stats();
    EXPECT_GT(st.spec_guessed, 0) << "nothing was guessed: the test would prove nothing";
    if (c.model == c.draft) {
      EXPECT_EQ(st.spec_accepted, st.spec_guessed);
    } else {
      EXPECT_LT(st.spec_accepted, st.spec_guessed);
    }
  }
}

TEST(Speculation, RejectedGuessesGiveTheirKvBack) {
  LL3_REQUIRE_ENGINE_MODEL();
  std::shared_ptr<const Model> q4 = test::engine_model();
  std::shared_ptr<const Model> f32 = load(test::shared_dir() + "/models/tiny-llama3-f32.gguf");
  ASSERT_TRUE(f32);
  std::unique_ptr<Engine> plain = engine(q4, SpecMode::kOff), spec = engine(q4, SpecMode::kDraft, f32);
  ASSERT_TRUE(plain && spec);
  const std::vector<std::vector<int32_t>> ps = prompts(8);
  EXPECT_EQ(run_all(*spec, ps, 48, false), run_all(*plain, ps, 48, false));
  EXPECT_EQ(run_all(*spec, ps, 48, true), run_all(*plain, ps, 48, true));
  const EngineStats a = plain->stats(), b = spec->stats();
  EXPECT_GT(b.spec_guessed, b.spec_accepted) << "no guess was rejected";
  // The same blocks in use and cached: nothing of a rejected guess stayed behind, named or not.
  EXPECT_EQ(b.kv_blocks_used, a.kv_blocks_used);
  EXPECT_EQ(b.kv_blocks_cached, a.kv_blocks_cached);
  EXPECT_EQ(b.kv_blocks_used, 0);
}

// Runs one request and returns its completion.
Engine::Completion complete(Engine& e, Request r) {
  Result<Engine::Completion> c = e.generate(std::move(r));
  EXPECT_TRUE(c.ok()) << c.message();
  return c.ok() ? std::move(c.value()) : Engine::Completion{};
}

TEST(Speculation, StopsAndCancelsInsideAnAcceptedRun) {
  LL3_REQUIRE_ENGINE_MODEL();
  std::shared_ptr<const Model> q4 = test::engine_model();
  // Drafted by itself, every guess is right: a step accepts up to 8 tokens at once.
  std::unique_ptr<Engine> plain = engine(q4, SpecMode::kOff), spec = engine(q4, SpecMode::kDraft, q4);
  ASSERT_TRUE(plain && spec);
  const std::vector<int32_t> prompt = random_prompt(20, 7);
  const Engine::Completion full = complete(*plain, greedy(prompt, 40));
  ASSERT_EQ(full.tokens.size(), 40u);
  // A stop string from the middle of the text: both stop at the same place.
  std::string pieces;
  for (size_t i = 13; i < 15; ++i) pieces += full.events[i].text;
  ASSERT_FALSE(pieces.empty());
  Request stop = greedy(prompt, 40);
  stop.stop = {pieces};
  Request stop2 = stop;
  const Engine::Completion a = complete(*plain, std::move(stop)), b = complete(*spec, std::move(stop2));
  EXPECT_EQ(b.text, a.text);
  EXPECT_EQ(b.tokens, a.tokens);
  EXPECT_EQ(b.finish.reason, FinishReason::kStop);
  EXPECT_EQ(b.finish.stop_string, pieces);
  // A client that stops reading after 11 tokens gets 11, the same ones.
  for (Engine* e : {plain.get(), spec.get()}) {
    Request r = greedy(prompt, 40);
    r.on_token = [](const TokenEvent& ev) { return ev.index < 10; };
    const Engine::Completion c = complete(*e, std::move(r));
    EXPECT_EQ(c.finish.reason, FinishReason::kCancelled);
    EXPECT_EQ(c.tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + 11));
  }
  // max_tokens inside a run, and a request that opts out.
  Request shorter = greedy(prompt, 5);
  EXPECT_EQ(complete(*spec, std::move(shorter)).tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + 5));
  spec->wait_idle();
  const int64_t guessed = spec->stats().spec_guessed;
  Request out = greedy(prompt, 40);
  out.speculative = false;
  EXPECT_EQ(complete(*spec, std::move(out)).tokens, full.tokens);
  spec->wait_idle();
  EXPECT_EQ(spec->stats().spec_guessed, guessed) << "an opted-out request guessed";
  EXPECT_EQ(spec->stats().kv_blocks_used, 0);
}

TEST(Speculation, LogprobsAreTheOnesWithoutIt) {
  LL3_REQUIRE_ENGINE_MODEL();
  std::shared_ptr<const Model> q4 = test::engine_model();
  std::unique_ptr<Engine> plain = engine(q4, SpecMode::kOff), spec = engine(q4, SpecMode::kDraft, q4);
  ASSERT_TRUE(plain && spec);
  Request r = greedy(random_prompt(16, 5), 24);
  r.logprobs = true;
  r.top_logprobs = 3;
  const Engine::Completion a = complete(*plain, r), b = complete(*spec, r);
  ASSERT_EQ(a.events.size(), 24u);
  ASSERT_EQ(a.events.size(), b.events.size());
  for (size_t i = 0; i < a.events.size(); ++i) {
    EXPECT_EQ(a.events[i].logprob, b.events[i].logprob) << i;
    ASSERT_EQ(a.events[i].top_logprobs.size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(a.events[i].top_logprobs[k].token, b.events[i].top_logprobs[k].token);
      EXPECT_EQ(a.events[i].top_logprobs[k].logprob, b.events[i].top_logprobs[k].logprob);
    }
  }
}

// The second and third tokens of many seeded runs, with and without speculation, have the same
// distribution (a two-sample chi-square test).
TEST(Speculation, SampledTokensFollowTheModelsDistribution) {
  LL3_REQUIRE_SHARED();
  std::shared_ptr<const Model> f32 = load(test::shared_dir() + "/models/tiny-llama3-f32.gguf");
  ASSERT_TRUE(f32);
  // Drafted by itself: guesses are the argmax, accepted with their probability.
  std::unique_ptr<Engine> plain = engine(f32, SpecMode::kOff, nullptr, 0), spec = engine(f32, SpecMode::kDraft, f32, 0);
  ASSERT_TRUE(plain && spec);
  const std::vector<int32_t> prompt = random_prompt(10, 3);
  const int n = 1000;
  auto sample = [&](Engine& e, uint64_t seed0) {
    std::vector<std::map<int32_t, int64_t>> counts(3);
    std::vector<std::future<Result<Engine::Completion>>> fs;
    for (int i = 0; i < n; ++i) {
      Request r;
      r.tokens = prompt;
      r.max_tokens = 3;
      r.ignore_eos = true;
      r.sampling.temperature = 1.0f;
      r.sampling.top_k = 4;
      r.sampling.top_p = 1.0f;
      r.sampling.min_p = 0.0f;
      r.sampling.seed = seed0 + static_cast<uint64_t>(i);
      Result<Engine::Completion> c = e.generate(std::move(r));
      EXPECT_TRUE(c.ok());
      if (!c.ok()) continue;
      EXPECT_EQ(c->tokens.size(), 3u);
      if (c->tokens.size() != 3) continue;
      for (size_t k = 0; k < 3; ++k) ++counts[k][c->tokens[k]];
    }
    return counts;
  };
  const auto a = sample(*plain, 1), b = sample(*spec, 100001);
  spec->wait_idle();
  EXPECT_GT(spec->stats().spec_accepted, 0);
  EXPECT_GT(spec->stats().spec_guessed, spec->stats().spec_accepted) << "no guess was rejected";
  for (size_t k = 1; k < 3; ++k) {
    std::map<int32_t, std::pair<int64_t, int64_t>> both;
    for (auto [t, c] : a[k]) both[t].first = c;
    for (auto [t, c] : b[k]) both[t].second = c;
    // Tokens seen fewer than 10 times in all go into one cell.
    std::vector<std::pair<double, double>> cells(1);
    for (auto [t, ab] : both) {
      if (ab.first + ab.second < 10) {
        cells[0].first += ab.first;
        cells[0].second += ab.second;
      } else {
        cells.push_back({static_cast<double>(ab.first), static_cast<double>(ab.second)});
      }
    }
    double x = 0;
    int df = -1;
    for (auto [o1, o2] : cells) {
      if (o1 + o2 == 0) continue;
      const double e = (o1 + o2) / 2;  // equal sample sizes
      x += (o1 - e) * (o1 - e) / e + (o2 - e) * (o2 - e) / e;
      ++df;
    }
    ASSERT_GT(df, 0);
    // P(chi2_df > df + 5 sqrt(2 df) + 10) is below 1e-4 for every df up to hundreds: the stated
    // false-failure rate; the seeds are fixed, so the outcome is the same every run.
    EXPECT_LT(x, df + 5 * std::sqrt(2.0 * df) + 10) << "token " << k << ", " << df << " degrees of freedom";
  }
}

}  // namespace
}  // namespace ll3
