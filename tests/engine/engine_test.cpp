// The serving engine on a real model file: many requests at once give exactly what each gives
// alone (every KV type, with preemption, with the prefix cache), cancellation at any stage
// frees every block, sessions survive a new engine and a reloaded model, bad session files are
// rejected and recomputed, and the queue and context limits answer at submit.
#include "ll3/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <random>

#include "backend/backend.h"
#include "engine/model_impl.h"
#include "eval/sequence_evaluator.h"
#include "engine_fixtures.h"
#include "test_support.h"

namespace ll3 {
namespace {

using test::greedy;
using test::random_prompt;
std::string model_path() { return test::engine_model_path(); }
std::shared_ptr<const Model> shared_model() { return test::engine_model(); }
#define REQUIRE_MODEL() LL3_REQUIRE_ENGINE_MODEL()

std::unique_ptr<Engine> make(const EngineOptions& o) {
  Result<std::unique_ptr<Engine>> e = Engine::create(shared_model(), o);
  EXPECT_TRUE(e.ok()) << e.message();
  return e.ok() ? std::move(e.value()) : nullptr;
}

// Submits every request at once and waits for all of them.
// Submitted from one thread in one loop, so that they are all queued within a step or two
// even on a loaded machine (one thread each let a late one start after the others had
// finished, and the pool-pressure test then saw no preemption).
std::vector<Engine::Completion> run_all(Engine& e, std::vector<Request> reqs) {
  std::vector<Engine::Completion> out(reqs.size());
  std::vector<std::promise<void>> done(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    Request& r = reqs[i];
    r.on_token = [&out, i](const TokenEvent& ev) {
      out[i].tokens.push_back(ev.token);
      out[i].events.push_back(ev);
      return true;
    };
    r.on_finish = [&out, &done, i](const FinishInfo& f) {
      out[i].finish = f;
      done[i].set_value();
    };
    Result<RequestId> id = e.submit(std::move(r));
    EXPECT_TRUE(id.ok()) << id.message();
    if (!id.ok()) done[i].set_value();
  }
  for (auto& d : done) d.get_future().wait();
  return out;
}

// 16 requests: prompts of 5..80 tokens, half greedy, half sampled with a seed.
std::vector<Request> sixteen_requests(int64_t max_tokens) {
  std::vector<Request> reqs;
  for (int i = 0; i < 16; ++i) {
    Request r = greedy(random_prompt(5 + i * 5, 100 + i), max_tokens);
    if (i % 2 == 1) {
      r.sampling.temperature = 0.9f;
      r.sampling.seed = 1000 + i;
    }
    reqs.push_back(std::move(r));
  }
  return reqs;
}

std::vector<std::vector<int32_t>> solo_results(const std::vector<Request>& reqs, KvType kv) {
  EngineOptions o;
  o.kv_type = kv;
  o.max_seqs = 1;
  o.prefix_cache = false;
  std::unique_ptr<Engine> e = make(o);
  std::vector<std::vector<int32_t>> out;
  for (const Request& r : reqs) {
    Result<Engine::Completion> c = e->generate(r);
    EXPECT_TRUE(c.ok()) << c.message();
    // Every request here is greedy() (past end-of-generation tokens): all its tokens come, so
    // the batched runs are compared with something.
    if (c.ok()) EXPECT_EQ(static_cast<int64_t>(c->tokens.size()), r.max_tokens);
    out.push_back(c.ok() ? c->tokens : std::vector<int32_t>{});
  }
  return out;
}

class EngineKvTypes : public ::testing::TestWithParam<KvType> {};

TEST_P(EngineKvTypes, SixteenConcurrentRequestsGiveTheirSoloResults) {
  REQUIRE_MODEL();
  const std::vector<Request> reqs = sixteen_requests(12);
  const auto solo = solo_results(reqs, GetParam());
  EngineOptions o;
  o.kv_type = GetParam();
  o.max_seqs = 16;
  o.batch_tokens = 64;  // prompts are chunked and batched with decodes
  std::unique_ptr<Engine> e = make(o);
  std::vector<Engine::Completion> got = run_all(*e, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, solo[i]) << "request " << i;
    EXPECT_EQ(got[i].finish.reason, FinishReason::kLength);
    EXPECT_EQ(got[i].finish.completion_tokens, 12);
  }
  e->wait_idle();
  EngineStats st = e->stats();
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.requests_finished, 16);
  EXPECT_EQ(st.generated_tokens, 16 * 12);
  EXPECT_LT(st.steps, 16 * 12);  // batched: fewer steps than tokens
}

INSTANTIATE_TEST_SUITE_P(Kv, EngineKvTypes,
                         ::testing::Values(KvType::kF16, KvType::kF32, KvType::kQ8_0, KvType::kQ4_0),
                         [](const auto& info) {
                           switch (info.param) {
                             case KvType::kF32: return "F32";
                             case KvType::kQ8_0: return "Q8_0";
                             case KvType::kQ4_0: return "Q4_0";
                             default: return "F16";
                           }
                         });

TEST(Engine, APoolTooSmallForAllPreemptsAndStillGivesTheSoloResults) {
  REQUIRE_MODEL();
  std::vector<Request> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(greedy(random_prompt(20 + 3 * i, 300 + i), 40));
  const auto solo = solo_results(reqs, KvType::kF16);
  EngineOptions o;
  o.ctx = 160;  // 10 blocks of 16; each request needs 4
  o.max_seqs = 6;
  std::unique_ptr<Engine> e = make(o);
  std::vector<Engine::Completion> got = run_all(*e, reqs);
  int64_t preempted = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, solo[i]) << "request " << i;
    preempted += got[i].finish.preemptions;
  }
  e->wait_idle();
  EXPECT_GT(e->stats().preemptions, 0);
  EXPECT_EQ(e->stats().preemptions, preempted);
  EXPECT_EQ(e->stats().kv_blocks_used, 0);
}

TEST(Engine, ACachedPrefixIsReusedAndGivesTheSameTokens) {
  REQUIRE_MODEL();
  const std::vector<int32_t> p = random_prompt(70, 9);
  std::vector<int32_t> p2 = p;
  for (int32_t t : random_prompt(9, 10)) p2.push_back(t);
  const auto solo = solo_results({greedy(p2, 10)}, KvType::kF16);
  std::unique_ptr<Engine> e = make(EngineOptions{});
  Result<Engine::Completion> a = e->generate(greedy(p, 5));
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->finish.cached_tokens, 0);
  Result<Engine::Completion> b = e->generate(greedy(p2, 10));
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(b->finish.cached_tokens, 70);  // 4 full blocks and 6 positions copied from the 5th
  EXPECT_EQ(b->tokens, solo[0]);
  // Resending a conversation: prompt + reply + more costs only the new tokens.
  std::vector<int32_t> p3 = p2;
  p3.insert(p3.end(), b->tokens.begin(), b->tokens.end());
  p3.push_back(128009);
  Result<Engine::Completion> c = e->generate(greedy(p3, 3));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->finish.cached_tokens, static_cast<int64_t>(p2.size() + b->tokens.size() - 1));
  e->wait_idle();
  EngineStats st = e->stats();
  EXPECT_EQ(st.prompt_tokens_cached, 70 + c->finish.cached_tokens);
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_GT(st.kv_blocks_cached, 0);
}

TEST(Engine, CancellingQueuedPrefillingOrDecodingRequestsFreesEveryBlock) {
  REQUIRE_MODEL();
  EngineOptions o;
  o.max_seqs = 2;
  o.batch_tokens = 32;
  o.prefix_cache = false;
  std::unique_ptr<Engine> e = make(o);
  std::promise<FinishInfo> long_done, queued_done, short_done;
  RequestId long_id = 0, queued_id = 0;
  // A blocker holds the engine in its first callback while the three others are queued, so
  // that they start together: the short one first (priority), the long one beside it, and the
  // third waits (max_seqs 2). The short one cancels the queued one at its second token and the
  // long one (still prefilling 600 tokens in chunks of at most 31) at its third; it stops itself
  // at its fifth by returning false.
  std::promise<void> blocked, release;
  Request blocker = greedy(random_prompt(4, 9), 5);
  blocker.on_token = [&](const TokenEvent&) {
    blocked.set_value();
    release.get_future().wait();
    return false;
  };
  ASSERT_TRUE(e->submit(std::move(blocker)).ok());
  blocked.get_future().wait();
  Request lng = greedy(random_prompt(600, 1), 5);
  lng.on_finish = [&](const FinishInfo& f) { long_done.set_value(f); };
  Request queued = greedy(random_prompt(30, 2), 5);
  queued.on_finish = [&](const FinishInfo& f) { queued_done.set_value(f); };
  Request shrt = greedy(random_prompt(8, 3), 50);
  shrt.priority = 1;
  shrt.on_token = [&](const TokenEvent& ev) {
    if (ev.index == 1) EXPECT_TRUE(e->cancel(queued_id));
    if (ev.index == 2) EXPECT_TRUE(e->cancel(long_id));
    return ev.index < 4;
  };
  shrt.on_finish = [&](const FinishInfo& f) { short_done.set_value(f); };
  long_id = e->submit(std::move(lng)).value();
  queued_id = e->submit(std::move(queued)).value();
  ASSERT_TRUE(e->submit(std::move(shrt)).ok());
  release.set_value();
  FinishInfo sf = short_done.get_future().get();
  EXPECT_EQ(sf.reason, FinishReason::kCancelled);
  EXPECT_EQ(sf.completion_tokens, 5);
  FinishInfo lf = long_done.get_future().get();
  EXPECT_EQ(lf.reason, FinishReason::kCancelled);
  EXPECT_EQ(lf.completion_tokens, 0);
  FinishInfo qf = queued_done.get_future().get();
  EXPECT_EQ(qf.reason, FinishReason::kCancelled);
  EXPECT_EQ(qf.completion_tokens, 0);
  EXPECT_EQ(qf.queued_seconds, qf.total_seconds);  // never scheduled
  e->wait_idle();
  EXPECT_FALSE(e->cancel(long_id));  // finished
  EngineStats st = e->stats();
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.kv_blocks_cached, 0);
  EXPECT_EQ(st.requests_running, 0);
  EXPECT_EQ(st.requests_waiting, 0);
}

// --gpu-layers: a GPU asked for (all layers or a split) but not usable is an error, and "all
// when usable" runs on the CPU where there is none.
TEST(Engine, GpuLayersAreCheckedAndFallBackOnlyWhenNotAskedFor) {
  REQUIRE_MODEL();
  EngineOptions o;
  o.threads = 2;
  o.ctx = 256;
  o.gpu_layers = -2;
  EXPECT_FALSE(Engine::create(shared_model(), o).ok());
  o.gpu_layers = -1;
  o.gpu_memory = -1;
  EXPECT_FALSE(Engine::create(shared_model(), o).ok());
  o.gpu_memory = 0;
  std::string why;
  if (!cuda_devices(&why).empty()) GTEST_SKIP() << "a CUDA device is present: the GPU-less fallback is not run here";
  ASSERT_NE(make(o), nullptr) << "all layers when usable: the CPU without a device";
  for (int layers : {1, 99}) {  // a split (1 of 2) and all
    o.gpu_layers = layers;
    Result<std::unique_ptr<Engine>> gpu = Engine::create(shared_model(), o);
    ASSERT_FALSE(gpu.ok()) << "a GPU asked for, none usable";
    EXPECT_NE(gpu.message().find("--gpu-layers"), std::string::npos) << gpu.message();
  }
}

// Without max_tokens a generation runs to the end of the context: prompt and generated tokens
// together are exactly what a sequence holds, as they are with the largest max_tokens allowed.
TEST(Engine, WithoutMaxTokensTheGenerationEndsWithTheContext) {
  REQUIRE_MODEL();
  EngineOptions o;
  o.ctx = 256;
  std::unique_ptr<Engine> e = make(o);
  const int64_t hold = e->stats().max_seq_tokens;
  ASSERT_EQ(hold, 256);
  Request open_ended = greedy(random_prompt(200, 4), -1);
  open_ended.ignore_eos = true;
  Result<Engine::Completion> c = e->generate(open_ended);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->finish.reason, FinishReason::kLength);
  EXPECT_EQ(200 + static_cast<int64_t>(c->tokens.size()), hold);
  Request largest = greedy(random_prompt(200, 4), hold - 200);
  largest.ignore_eos = true;
  Result<Engine::Completion> d = e->generate(largest);
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_EQ(d->tokens, c->tokens);
}

TEST(Engine, RejectsAtSubmitWhatCanNeverRunOrDoesNotFitTheQueue) {
  REQUIRE_MODEL();
  EngineOptions o;
  o.ctx = 256;
  o.max_seqs = 1;
  o.max_queue = 2;
  std::unique_ptr<Engine> e = make(o);
  Result<RequestId> r = e->submit(greedy(random_prompt(200, 4), 100));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTooLong);
  EXPECT_NE(r.message().find("200"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("256"), std::string::npos) << r.message();
  EXPECT_EQ(r.status().field(), "max_tokens");  // 200 + 100 over 256: the prompt alone fits
  EXPECT_EQ(e->submit(greedy(random_prompt(300, 4), 1)).status().field(), "prompt");
  // Each invalid field is named as Request names it, so a frontend can point at it.
  auto rejected_field = [&](Request q) {
    Status st = e->submit(std::move(q)).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalid) << st.message();
    return st.field();
  };
  Request bad = greedy(random_prompt(10, 4), 5);
  bad.sampling.temperature = std::nanf("");
  EXPECT_EQ(rejected_field(bad), "temperature");
  EXPECT_EQ(rejected_field(greedy({5, 999999}, 5)), "prompt");
  EXPECT_EQ(rejected_field(greedy({}, 5)), "prompt");
  Request many_top = greedy(random_prompt(10, 4), 5);
  many_top.top_logprobs = kMaxTopLogprobs + 1;
  EXPECT_EQ(rejected_field(many_top), "top_logprobs");
  Request long_id = greedy(random_prompt(10, 4), 5);
  long_id.session_id.assign(kMaxSessionIdBytes + 1, 'x');
  EXPECT_EQ(rejected_field(long_id), "session_id");
  long_id.session_id.pop_back();  // at the limit: accepted
  EXPECT_TRUE(e->submit(long_id).ok());
  e->wait_idle();

  // One request runs (blocked in its callback), two wait, the next is turned away.
  std::promise<void> started, release;
  std::shared_future<void> go = release.get_future().share();
  Request first = greedy(random_prompt(10, 5), 3);
  std::atomic<bool> once{false};
  first.on_token = [&](const TokenEvent&) {
    if (!once.exchange(true)) {
      started.set_value();
      go.wait();
    }
    return true;
  };
  ASSERT_TRUE(e->submit(std::move(first)).ok());
  started.get_future().wait();
  ASSERT_TRUE(e->submit(greedy(random_prompt(10, 6), 2)).ok());
  ASSERT_TRUE(e->submit(greedy(random_prompt(10, 7), 2)).ok());
  Result<RequestId> full = e->submit(greedy(random_prompt(10, 8), 2));
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(full.message().find("queue is full"), std::string::npos);
  release.set_value();
  e->wait_idle();
  EXPECT_EQ(e->stats().requests_finished, 4);
  EXPECT_EQ(e->stats().requests_rejected, 1);
}

TEST(Engine, StopStringsAndLogprobs) {
  REQUIRE_MODEL();
  std::unique_ptr<Engine> e = make(EngineOptions{});
  Request r = greedy(random_prompt(12, 21), 16);
  r.top_logprobs = 3;
  r.logprobs = true;
  Result<Engine::Completion> full = e->generate(r);
  ASSERT_TRUE(full.ok());
  ASSERT_EQ(full->events.size(), 16u);
  for (const TokenEvent& ev : full->events) {
    ASSERT_EQ(ev.top_logprobs.size(), 3u);
    EXPECT_EQ(ev.top_logprobs[0].token, ev.token);  // greedy: the best token
    EXPECT_FLOAT_EQ(ev.top_logprobs[0].logprob, ev.logprob);
    EXPECT_LE(ev.logprob, 0.0f);
    EXPECT_GE(ev.top_logprobs[0].logprob, ev.top_logprobs[1].logprob);
    EXPECT_GE(ev.top_logprobs[1].logprob, ev.top_logprobs[2].logprob);
  }
  // A stop string cut from the middle of the text ends generation there, unprinted.
  ASSERT_GT(full->text.size(), 12u);
  const std::string stop = full->text.substr(full->text.size() / 2, 3);
  r.stop = {stop};
  Result<Engine::Completion> cut = e->generate(r);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->finish.reason, FinishReason::kStop);
  EXPECT_EQ(cut->finish.stop_string, stop);
  EXPECT_EQ(cut->text, full->text.substr(0, full->text.find(stop)));
}

// --- prompt log-probabilities ------------------------------------------------------------

// log-softmax(row)[t], in double.
double log_softmax(const float* row, int64_t V, int32_t t) {
  double mx = row[0];
  for (int64_t v = 1; v < V; ++v) mx = std::max<double>(mx, row[v]);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
  return row[t] - mx - std::log(sum);
}

// What a single sequence's full-prompt logits say: entry i scores prompt token i + 1.
std::vector<double> reference_prompt_logprobs(const std::vector<int32_t>& prompt) {
  EvaluatorOptions so;
  so.threads = 2;
  auto s = SequenceEvaluator::create(*model_impl(*shared_model()).llama, so);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE((*s)->eval(prompt, true).ok());
  const int64_t V = (*s)->n_vocab();
  std::vector<double> out;
  for (size_t i = 0; i + 1 < prompt.size(); ++i) out.push_back(log_softmax(&(*s)->logits()[i * V], V, prompt[i + 1]));
  return out;
}

struct Scored {
  std::vector<PromptTokenLogprob> prompt;
  int calls = 0;
  bool before_first_token = true;
};

// A request that scores its prompt into *out.
Request scoring(std::vector<int32_t> prompt, int64_t max_tokens, int top, std::shared_ptr<Scored> out) {
  Request r = greedy(std::move(prompt), max_tokens);
  r.prompt_logprobs = top;
  r.on_prompt = [out](const std::vector<PromptTokenLogprob>& lps) {
    out->prompt = lps;
    ++out->calls;
  };
  r.on_token = [out](const TokenEvent&) {
    if (out->calls == 0) out->before_first_token = false;
    return true;
  };
  return r;
}

TEST(Engine, PromptLogprobsScoreEveryPromptTokenInChunksBesideOtherRequests) {
  REQUIRE_MODEL();
  EngineOptions o;
  o.batch_tokens = 64;  // a 150-token prompt takes several steps, each within the extra rows
  std::unique_ptr<Engine> e = make(o);
  const std::vector<int32_t> prompt = random_prompt(150, 77);
  const std::vector<double> want = reference_prompt_logprobs(prompt);
  // Decoding requests run beside it and still give their solo tokens.
  std::vector<Request> others = sixteen_requests(12);
  others.resize(4);
  const std::vector<std::vector<int32_t>> solo = solo_results(others, KvType::kF16);
  auto scored = std::make_shared<Scored>();
  std::vector<Request> reqs = others;
  reqs.push_back(scoring(prompt, 4, 3, scored));
  std::vector<Engine::Completion> got = run_all(*e, reqs);
  for (size_t i = 0; i < others.size(); ++i) EXPECT_EQ(got[i].tokens, solo[i]) << i;
  ASSERT_EQ(scored->calls, 1);
  EXPECT_TRUE(scored->before_first_token);
  ASSERT_EQ(scored->prompt.size(), prompt.size() - 1);
  for (size_t i = 0; i < want.size(); ++i) {
    const PromptTokenLogprob& lp = scored->prompt[i];
    EXPECT_EQ(lp.token, prompt[i + 1]);
    EXPECT_NEAR(lp.logprob, want[i], 1e-3) << "prompt token " << i + 1;
    ASSERT_EQ(lp.top_logprobs.size(), 3u);
    EXPECT_GE(lp.top_logprobs[0].logprob, lp.top_logprobs[1].logprob);
    EXPECT_GE(lp.top_logprobs[0].logprob, lp.logprob - 1e-6f);
  }
  EXPECT_EQ(got.back().tokens.size(), 4u);
}

TEST(Engine, PromptLogprobsComputeTheWholePromptAndAnswerMaxTokensZero) {
  REQUIRE_MODEL();
  std::unique_ptr<Engine> e = make(EngineOptions{});
  const std::vector<int32_t> prompt = random_prompt(40, 78);
  ASSERT_TRUE(e->generate(greedy(prompt, 2)).ok());  // now cached
  auto scored = std::make_shared<Scored>();
  Result<Engine::Completion> c = e->generate(scoring(prompt, 0, 0, scored));
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->finish.reason, FinishReason::kLength);
  EXPECT_EQ(c->finish.completion_tokens, 0);
  EXPECT_EQ(c->finish.cached_tokens, 0) << "scored prompts skip the prefix cache";
  ASSERT_EQ(scored->calls, 1);
  const std::vector<double> want = reference_prompt_logprobs(prompt);
  ASSERT_EQ(scored->prompt.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(scored->prompt[i].logprob, want[i], 1e-3) << i;
    EXPECT_TRUE(scored->prompt[i].top_logprobs.empty());
  }
  // Limits at submit.
  Request bad = greedy(prompt, 1);
  bad.prompt_logprobs = 21;
  EXPECT_EQ(e->submit(bad).status().code(), StatusCode::kInvalid);
  bad.prompt_logprobs = 1;
  bad.session_id = "s";
  Result<RequestId> with_session = e->submit(bad);
  EXPECT_EQ(with_session.status().code(), StatusCode::kInvalid);
  EXPECT_NE(with_session.message().find("session"), std::string::npos) << with_session.message();
}

// --- sessions ----------------------------------------------------------------------------

struct SessionRun {
  std::vector<int32_t> turn2_tokens;
  FinishInfo turn2;
  EngineStats stats;
};

TEST(Engine, ASessionContinuesAfterARestartWithoutRecomputingItsPrompt) {
  REQUIRE_MODEL();
  const std::string dir = test::temp_dir() + "/sessions";
  const std::vector<int32_t> p1 = random_prompt(50, 31);
  std::vector<int32_t> turn1_out;
  {
    EngineOptions o;
    o.session_dir = dir;
    std::unique_ptr<Engine> e = make(o);
    Request r = greedy(p1, 20);
    r.session_id = "conversation 1/../x";  // any text: the file name is a hash of it
    Result<Engine::Completion> c = e->generate(r);
    ASSERT_TRUE(c.ok());
    turn1_out = c->tokens;
  }  // shutdown saves the session
  ASSERT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator{}), 1);
  std::vector<int32_t> p2 = p1;
  p2.insert(p2.end(), turn1_out.begin(), turn1_out.end());
  for (int32_t t : random_prompt(7, 32)) p2.push_back(t);
  const auto expect = solo_results({greedy(p2, 15)}, KvType::kF16);

  // A new engine on a model loaded again: nothing shared with the first but the directory.
  Result<std::shared_ptr<const Model>> m2 = Model::load(model_path());
  ASSERT_TRUE(m2.ok());
  EngineOptions o;
  o.session_dir = dir;
  Result<std::unique_ptr<Engine>> e2 = Engine::create(m2.value(), o);
  ASSERT_TRUE(e2.ok());
  Request r2 = greedy(p2, 15);
  r2.session_id = "conversation 1/../x";
  Result<Engine::Completion> c2 = (*e2)->generate(r2);
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(c2->tokens, expect[0]);
  EXPECT_EQ(c2->finish.cached_tokens, static_cast<int64_t>(p1.size() + turn1_out.size() - 1));
  EXPECT_EQ(c2->finish.session_warning, "");
  (*e2)->wait_idle();
  EngineStats st = (*e2)->stats();
  EXPECT_EQ(st.sessions_restored, 1);
  // Only the new tokens and the last reply token were computed.
  EXPECT_EQ(st.prompt_tokens_computed, 7 + 1);
}

// Saves a session of `model` in dir and returns its file.
std::string save_one(const std::string& dir, const std::vector<int32_t>& prompt, const std::string& id) {
  EngineOptions o;
  o.session_dir = dir;
  std::unique_ptr<Engine> e = make(o);
  Request r = greedy(prompt, 4);
  r.session_id = id;
  EXPECT_TRUE(e->generate(r).ok());
  EXPECT_TRUE(e->save_sessions().ok());
  for (auto& f : std::filesystem::directory_iterator(dir)) return f.path().string();
  return "";
}

TEST(Engine, CorruptTruncatedOrForeignSessionFilesAreRejectedAndRecomputed) {
  REQUIRE_MODEL();
  const std::vector<int32_t> p = random_prompt(40, 41);
  std::vector<int32_t> p2 = p;
  for (int32_t t : random_prompt(5, 42)) p2.push_back(t);
  const auto expect = solo_results({greedy(p2, 6)}, KvType::kF16);
  const std::string good_dir = test::temp_dir() + "/good";
  const std::string good = save_one(good_dir, p, "s");
  ASSERT_FALSE(good.empty());
  const std::string bytes = test::read_file(good);

  struct Case {
    const char* name;
    std::string data;
    const char* why;
  };
  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x10;
  std::string foreign_kv;  // the same session saved with an F32 cache
  {
    const std::string d = test::temp_dir() + "/f32";
    EngineOptions o;
    o.session_dir = d;
    o.kv_type = KvType::kF32;
    std::unique_ptr<Engine> e = make(o);
    Request r = greedy(p, 4);
    r.session_id = "s";
    ASSERT_TRUE(e->generate(r).ok());
    ASSERT_TRUE(e->save_sessions().ok());
    for (auto& f : std::filesystem::directory_iterator(d)) foreign_kv = test::read_file(f.path().string());
  }
  std::string foreign_model;  // a session of another model (the tiny F32 file)
  {
    const std::string d = test::temp_dir() + "/tiny";
    EngineOptions o;
    o.session_dir = d;
    Result<std::unique_ptr<Engine>> e = Engine::create(test::shared_dir() + "/models/tiny-llama3-f32.gguf", o);
    ASSERT_TRUE(e.ok()) << e.message();
    Request r = greedy(p, 4);
    r.session_id = "s";
    ASSERT_TRUE((*e)->generate(r).ok());
    ASSERT_TRUE((*e)->save_sessions().ok());
    for (auto& f : std::filesystem::directory_iterator(d)) foreign_model = test::read_file(f.path().string());
  }
  const std::vector<Case> cases = {
      {"foreign model", foreign_model, "another model"},
      {"truncated", bytes.substr(0, bytes.size() - 100), "checksum"},
      {"flipped", flipped, "checksum"},
      {"empty", "", "rejected"},
      {"foreign kv type", foreign_kv, "KV type"},
  };
  for (const Case& c : cases) {
    const std::string dir = test::temp_dir() + "/case-" + std::to_string(&c - cases.data());
    std::filesystem::create_directories(dir);
    test::write_file(dir + "/" + std::filesystem::path(good).filename().string(), c.data);
    EngineOptions o;
    o.session_dir = dir;
    // The engine's own log callback gets the warning (and stderr nothing).
    std::vector<std::pair<LogLevel, std::string>> logged;
    std::mutex log_mu;
    o.log = [&](LogLevel level, const std::string& msg) {
      std::lock_guard<std::mutex> lk(log_mu);
      logged.push_back({level, msg});
    };
    std::unique_ptr<Engine> e = make(o);
    Request r = greedy(p2, 6);
    r.session_id = "s";
    testing::internal::CaptureStderr();
    Result<Engine::Completion> got = e->generate(r);
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << c.name;
    ASSERT_TRUE(got.ok()) << c.name;
    {
      std::lock_guard<std::mutex> lk(log_mu);
      ASSERT_EQ(logged.size(), 1u) << c.name;
      EXPECT_EQ(logged[0].first, LogLevel::kWarning);
      EXPECT_EQ(logged[0].second, got->finish.session_warning) << c.name;
    }
    EXPECT_EQ(got->tokens, expect[0]) << c.name;
    EXPECT_EQ(got->finish.cached_tokens, 0) << c.name;
    EXPECT_NE(got->finish.session_warning.find(c.why), std::string::npos) << c.name << ": " << got->finish.session_warning;
    e->wait_idle();
    EXPECT_EQ(e->stats().session_files_rejected, 1) << c.name;
    EXPECT_EQ(e->stats().sessions_restored, 0) << c.name;
  }
}

}  // namespace
}  // namespace ll3
