#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "test_support.h"

namespace ll3 {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

SamplingParams no_filters(float temperature = 1.0f) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 1234;
  return p;
}

// Straightforward reference of the chain: full sort, then each step as its definition reads.
std::vector<double> expected_probs(std::vector<float> logits, const SamplingParams& p,
                                   const std::vector<int32_t>& history) {
  const int n = int(logits.size());
  size_t window = p.repeat_last_n < 0 ? history.size()
                                      : std::min(history.size(), size_t(p.repeat_last_n));
  std::vector<int> count(static_cast<size_t>(n), 0);
  for (size_t i = history.size() - window; i < history.size(); ++i) count[size_t(history[i])]++;
  for (int t = 0; t < n; ++t) {
    if (count[size_t(t)] == 0) continue;
    float& l = logits[size_t(t)];
    l = l <= 0 ? l * p.repeat_penalty : l / p.repeat_penalty;
    l -= float(count[size_t(t)]) * p.frequency_penalty + p.presence_penalty;
  }
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)]; });
  size_t keep = size_t(n);
  if (p.top_k > 0) keep = std::min(keep, size_t(p.top_k));
  const double mx = logits[size_t(order[0])];
  if (p.top_p < 1.0f) {
    double z = 0;
    for (size_t i = 0; i < keep; ++i) z += std::exp(logits[size_t(order[i])] - mx);
    double cum = 0;
    for (size_t i = 0; i < keep; ++i) {
      cum += std::exp(logits[size_t(order[i])] - mx) / z;
      if (cum >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (p.min_p > 0.0f) {
    size_t k = 0;
    while (k < keep && std::exp(logits[size_t(order[k])] - mx) >= p.min_p) ++k;
    keep = std::max<size_t>(k, 1);
  }
  std::vector<double> prob(static_cast<size_t>(n), 0.0);
  double z = 0;
  for (size_t i = 0; i < keep; ++i) {
    int t = order[i];
    prob[size_t(t)] = std::exp((logits[size_t(t)] - mx) / p.temperature);
    z += prob[size_t(t)];
  }
  for (auto& x : prob) x /= z;
  return prob;
}

// Draw many times and compare frequencies with the expected distribution: tokens with zero
// probability must never appear; the rest within 5 standard errors.
void check_distribution(const std::vector<float>& logits, const SamplingParams& p,
                        const std::vector<int32_t>& history, int draws = 100000) {
  const std::vector<double> want = expected_probs(logits, p, history);
  Sampler s(p, int32_t(logits.size()));
  std::vector<int> hits(logits.size(), 0);
  for (int i = 0; i < draws; ++i) {
    int32_t t = s.sample(logits.data(), history);
    ASSERT_GE(t, 0);
    ASSERT_LT(size_t(t), logits.size());
    hits[size_t(t)]++;
  }
  for (size_t t = 0; t < logits.size(); ++t) {
    double got = double(hits[t]) / draws;
    if (want[t] == 0.0) {
      EXPECT_EQ(hits[t], 0) << "token " << t << " must be filtered out";
    } else {
      double se = std::sqrt(want[t] * (1 - want[t]) / draws);
      EXPECT_NEAR(got, want[t], 5 * se + 1e-4) << "token " << t;
    }
  }
}

TEST(Sampler, ArgmaxFindsFirstMaximum) {
  std::vector<float> v = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f};
  EXPECT_EQ(argmax(v.data(), 5), 1);
  std::vector<float> w = {std::nanf(""), -kInf, -2.0f, std::nanf("")};
  EXPECT_EQ(argmax(w.data(), 4), 2);
  auto r = test::random_normal(4097, 7, 2.0f);
  EXPECT_EQ(argmax(r.data(), 4097), int32_t(std::max_element(r.begin(), r.end()) - r.begin()));
}

TEST(Sampler, GreedyEqualsArgmax) {
  SamplingParams p;  // default filters on; temperature 0 makes them irrelevant
  p.temperature = 0.0f;
  Sampler s(p, 1000);
  for (uint32_t seed = 0; seed < 20; ++seed) {
    auto l = test::random_normal(1000, seed, 2.0f);
    EXPECT_EQ(s.sample(l.data(), {}), argmax(l.data(), 1000));
  }
}

TEST(Sampler, TopK1IsGreedy) {
  SamplingParams p = no_filters(1.5f);
  p.top_k = 1;
  Sampler s(p, 3000);
  for (uint32_t seed = 0; seed < 50; ++seed) {
    auto l = test::random_normal(3000, seed, 0.1f);  // nearly flat: anything but top-1 would wander
    EXPECT_EQ(s.sample(l.data(), {}), argmax(l.data(), 3000));
  }
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDiffers) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 0.99f;
  p.min_p = 0.0f;
  auto l = test::random_normal(5000, 3, 1.0f);
  auto run = [&](uint64_t seed) {
    p.seed = seed;
    Sampler s(p, 5000);
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) out.push_back(s.sample(l.data(), out));
    return out;
  };
  auto a = run(42), b = run(42), c = run(43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);

  // reset() restarts the same stream.
  p.seed = 42;
  Sampler s(p, 5000);
  std::vector<int32_t> first, second;
  for (int i = 0; i < 50; ++i) first.push_back(s.sample(l.data(), {}));
  s.reset(42);
  for (int i = 0; i < 50; ++i) second.push_back(s.sample(l.data(), {}));
  EXPECT_EQ(first, second);
}

TEST(Sampler, TemperatureOnlyMatchesSoftmax) {
  auto l = test::random_normal(8, 11, 1.0f);
  check_distribution(l, no_filters(0.7f), {});
  check_distribution(l, no_filters(1.8f), {});
}

TEST(Sampler, TopKKeepsKBest) {
  auto l = test::random_normal(8, 12, 1.0f);
  SamplingParams p = no_filters(1.0f);
  p.top_k = 3;
  check_distribution(l, p, {});
}

TEST(Sampler, TopPKeepsSmallestNucleus) {
  auto l = test::random_normal(8, 13, 1.0f);
  SamplingParams p = no_filters(1.3f);
  p.top_p = 0.7f;
  check_distribution(l, p, {});
}

TEST(Sampler, TopPIsAppliedBeforeTemperature) {
  // probs at T=1: 0.5, 0.3, 0.2 -> top_p 0.75 keeps two tokens. At T=3 the first two would
  // hold only ~0.73 of the mass, so a sampler that scaled first would keep all three.
  std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  SamplingParams p = no_filters(3.0f);
  p.top_p = 0.75f;
  auto want = expected_probs(l, p, {});
  EXPECT_EQ(want[2], 0.0);
  check_distribution(l, p, {}, 20000);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  auto l = test::random_normal(8, 14, 1.5f);
  SamplingParams p = no_filters(1.0f);
  p.min_p = 0.2f;
  auto want = expected_probs(l, p, {});
  EXPECT_GT(std::count(want.begin(), want.end(), 0.0), 0);  // the case really filters
  check_distribution(l, p, {});
}

TEST(Sampler, PenaltiesShiftTheDistribution) {
  std::vector<float> l = {1.5f, -0.5f, 0.8f, 0.2f, -1.0f, 1.1f, 0.0f, 0.4f};
  // Token 0 (positive logit) three times, token 1 (negative) once, token 6 outside the window.
  std::vector<int32_t> history = {6, 0, 1, 0, 0, 3};
  SamplingParams p = no_filters(1.0f);
  p.repeat_penalty = 1.5f;
  p.repeat_last_n = 5;
  check_distribution(l, p, history);
  p.repeat_penalty = 1.0f;
  p.frequency_penalty = 0.4f;
  p.presence_penalty = 0.3f;
  check_distribution(l, p, history);
}

TEST(Sampler, FullChainMatchesReference) {
  auto l = test::random_normal(16, 15, 1.2f);
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 10;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  p.repeat_penalty = 1.2f;
  p.repeat_last_n = -1;
  p.presence_penalty = 0.2f;
  p.frequency_penalty = 0.1f;
  p.seed = 99;
  check_distribution(l, p, {3, 3, 7, 12, 0, 3});
}

// Vocabularies big enough for the selection paths (top-p without top-k, min-p partitioning):
// at a huge temperature every kept token is about equally likely, so enough draws must hit
// exactly the reference's kept set, its weakest member included.
TEST(Sampler, LargeVocabularyKeepsExactlyTheReferenceSet) {
  const int n = 2000;  // > 256, so top-p's selection loop runs
  auto l = test::random_normal(n, 41, 1.2f);
  std::vector<int32_t> history = {5, 17, 17, 900, 1999};
  std::vector<SamplingParams> configs(5, no_filters(1e4f));
  configs[0].top_p = 0.5f;
  configs[1].top_p = 0.6f;  // top-p cuts inside the min-p set
  configs[1].min_p = 0.02f;
  configs[2].min_p = 0.03f;
  configs[3].top_k = 700;
  configs[3].top_p = 0.6f;
  configs[4].top_p = 0.6f;
  configs[4].repeat_penalty = 1.3f;
  configs[4].frequency_penalty = 0.5f;
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    const SamplingParams& p = configs[ci];
    auto want = expected_probs(l, p, history);
    size_t kept = size_t(std::count_if(want.begin(), want.end(), [](double x) { return x > 0; }));
    ASSERT_GT(kept, 100u) << "config " << ci << " too narrow to say much";
    ASSERT_LT(kept, 800u) << "config " << ci << " too wide to cover by sampling";
    Sampler s(p, n);
    std::vector<int> hits(size_t(n), 0);
    // ~20 expected hits per kept token: missing one has probability ~e^-20.
    for (int i = 0; i < int(kept) * 20; ++i) hits[size_t(s.sample(l.data(), history))]++;
    for (int t = 0; t < n; ++t) {
      ASSERT_EQ(hits[size_t(t)] > 0, want[size_t(t)] > 0)
          << "config " << ci << " token " << t << " logit " << l[size_t(t)];
    }
  }
}

TEST(Sampler, RepeatPenaltyWindowUnderGreedy) {
  std::vector<float> l = {2.0f, 1.9f, -3.0f};
  SamplingParams p = no_filters(0.0f);
  p.repeat_penalty = 1.1f;
  p.repeat_last_n = 2;
  Sampler s(p, 3);
  EXPECT_EQ(s.sample(l.data(), {0, 2, 2}), 0);  // token 0 is outside the window
  EXPECT_EQ(s.sample(l.data(), {2, 0}), 1);     // 2.0 / 1.1 < 1.9
  EXPECT_EQ(s.sample(l.data(), {99, -5, 0}), 1);  // out-of-range ids are ignored
  // Negative logits get more negative under a penalty (multiplied), never less.
  std::vector<float> neg = {-1.0f, -1.05f, -3.0f};
  EXPECT_EQ(s.sample(neg.data(), {0}), 1);
}

TEST(Sampler, MaskedLogitsNeverChosen) {
  const int n = 257;
  auto l = test::random_normal(n, 21, 2.0f);
  for (int i = 0; i < n; i += 2) l[size_t(i)] = -kInf;
  l[5] = std::nanf("");
  std::vector<SamplingParams> configs = {no_filters(1.0f), SamplingParams{}};
  configs.push_back(no_filters(1.0f));
  configs.back().top_p = 0.5f;
  configs.push_back(no_filters(1.0f));
  configs.back().min_p = 0.3f;
  configs.push_back(no_filters(1.0f));
  configs.back().repeat_penalty = 1.3f;
  configs.back().presence_penalty = 0.5f;
  for (auto p : configs) {
    p.seed = 5;
    Sampler s(p, n);
    std::vector<int32_t> hist = {0, 2, 4, 7};
    for (int i = 0; i < 2000; ++i) {
      int32_t t = s.sample(l.data(), hist);
      ASSERT_EQ(t % 2, 1) << "picked a -inf token " << t;
      ASSERT_NE(t, 5) << "picked a NaN token";
    }
  }
  // A single +inf logit always wins; an all -inf row gives token 0 rather than garbage.
  std::vector<float> inf_row = test::random_normal(100, 22, 2.0f);
  inf_row[37] = kInf;
  std::vector<float> dead(100, -kInf);
  for (auto p : configs) {
    Sampler s(p, 100);
    EXPECT_EQ(s.sample(inf_row.data(), {}), 37);
    EXPECT_EQ(s.sample(dead.data(), {1, 2}), 0);
  }
}

TEST(Sampler, FastOnLlama3Vocabulary) {
  const int n = 128256;
  auto l = test::random_normal(n, 31, 3.0f);
  std::vector<int32_t> history(64);
  for (size_t i = 0; i < history.size(); ++i) history[i] = int32_t(i * 997 % n);
  SamplingParams with_k;  // defaults: top-k 40, top-p, min-p
  with_k.seed = 1;
  with_k.repeat_penalty = 1.1f;
  SamplingParams no_k = with_k;  // top-p over the whole vocabulary, min-p off: the slow path
  no_k.top_k = 0;
  no_k.min_p = 0.0f;
  for (const auto& p : {with_k, no_k}) {
    Sampler s(p, n);
    auto t0 = std::chrono::steady_clock::now();
    const int iters = 20;
    for (int i = 0; i < iters; ++i) {
      int32_t t = s.sample(l.data(), history);
      ASSERT_GE(t, 0);
      ASSERT_LT(t, n);
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count() / iters;
    // Generous bound (debug builds, a loaded machine); a full sort per token would still pass
    // in release, so this guards against gross regressions only.
    EXPECT_LT(ms, 100.0) << "top_k=" << p.top_k;
  }
}

// validate(): the defaults pass; each bad value names its field in the caller's spelling.
TEST(Sampler, ValidateNamesTheBadField) {
  EXPECT_TRUE(validate(SamplingParams{}).ok());
  SamplingParams p;
  p.temperature = std::numeric_limits<float>::quiet_NaN();
  Status st = validate(p);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("temperature must be a finite number"), std::string::npos) << st.message();
  p = SamplingParams{};
  p.frequency_penalty = 2.5f;
  SamplingFieldNames names;
  names.frequency_penalty = "--frequency-penalty";
  st = validate(p, names);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--frequency-penalty must be in [-2, 2]"), std::string::npos) << st.message();
  p = SamplingParams{};
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.temperature = 0.0f;
  EXPECT_TRUE(validate(p).ok());
}

}  // namespace
}  // namespace ll3
