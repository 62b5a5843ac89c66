// Latency-bounded steps: the step cost model's fit, and the scheduler's prompt chunks under an
// injected (fixed) cost model: exact chunk sizes and predicted step times, every step within the
// target while streams decode, whole steps when nothing else runs, priority before arrival.
#include "engine/step_cost.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "engine/scheduler.h"

namespace ll3 {
namespace {

// 10 ms a step, 2 ms a decode row, 1 ms a prompt token, 10 us a query-position pair.
constexpr StepCostModel::Coefficients kCost = {0.010, 0.002, 0.001, 0.00001};

struct Fixture {
  // A pool of 256 blocks of 4 positions, 64 tokens a step.
  Fixture(double target_s, const StepCostModel::Coefficients& c = kCost)
      : pool(256, 4, 11), kv(pool, true), cost(c), sched(kv, options(target_s)) {}
  SchedulerOptions options(double target_s) {
    SchedulerOptions o;
    o.batch_tokens = 64;
    o.max_seqs = 8;
    o.cost = &cost;
    o.itl_target_s = target_s;
    o.min_prompt_chunk = 4;
    return o;
  }
  uint64_t add(int n_prompt, int priority = 0) {
    std::vector<int32_t> tokens(static_cast<size_t>(n_prompt));
    std::iota(tokens.begin(), tokens.end(), 1000 * static_cast<int>(next_id + 1));
    const uint64_t id = ++next_id;
    sched.add(id, std::move(tokens), n_prompt + 64, priority, false);
    return id;
  }
  // Runs a step as the engine would; `predicted` gets the model's time for it.
  const SchedulerOutput& step(double* predicted = nullptr) {
    const SchedulerOutput& out = sched.schedule();
    if (predicted) *predicted = cost.predict(out.shape);
    sched.computed(out);
    for (const ScheduledSeq& it : out.seqs) {
      if (it.logits) sched.append(it.id, 7);
    }
    return out;
  }
  // Two streams of 3-token prompts, decoding after two steps.
  void start_streams() {
    add(3);
    add(3);
    step();
    step();
  }
  BlockPool pool;
  KvManager kv;
  StepCostModel cost;
  Scheduler sched;
  uint64_t next_id = 0;
};

using Items = std::vector<std::pair<uint64_t, int64_t>>;
Items items(const SchedulerOutput& out) {
  Items v;
  for (const ScheduledSeq& it : out.seqs) v.push_back({it.id, it.n_tokens});
  return v;
}

TEST(StepShape, CountsRowsTokensAndAttentionPairs) {
  StepShape s;
  s.add(4, 1, true);    // a decode row after 4 positions attends to 5
  s.add(10, 3, false);  // 3 prompt tokens after 10: 11 + 12 + 13
  EXPECT_EQ(s.decode_rows, 1);
  EXPECT_EQ(s.prompt_tokens, 3);
  EXPECT_EQ(s.attention, 5 + 36);
}

TEST(LatencyBoundedSteps, ChunksAreTheLargestThatFitTheTarget) {
  Fixture f(0.040);
  f.start_streams();
  const uint64_t p = f.add(100);
  double t = 0;
  // Decode rows after 4 positions: 10 + 2 x 2 + 2 x 5 x 0.01 = 14.1 ms. The prompt from 0: n
  // tokens cost n + 0.01 n (n + 1) / 2 ms, 25.76 ms at 23, 27 ms at 24: 23 fit the 25.9 left.
  EXPECT_EQ(items(f.step(&t)), (Items{{1, 1}, {2, 1}, {p, 23}}));
  EXPECT_NEAR(t, 0.0141 + 0.02576, 1e-12);
  EXPECT_EQ(f.sched.itl_target(), 0.040);
  // After 5 positions the rows cost 14.12 ms; from 23, 19 tokens cost 19 + 0.01 (19 x 23 + 190)
  // = 25.27 ms and 20 would cost 26.7: 19.
  EXPECT_EQ(items(f.step(&t)), (Items{{1, 1}, {2, 1}, {p, 19}}));
  EXPECT_NEAR(t, 0.01412 + 0.02527, 1e-12);
}

TEST(LatencyBoundedSteps, ALongPromptAmongStreamsStaysWithinTheTargetAndCompletes) {
  Fixture f(0.040);
  f.start_streams();
  const uint64_t p = f.add(300);
  int steps = 0;
  bool done = false;
  while (!done) {
    ASSERT_LT(++steps, 200);
    double t = 0;
    const SchedulerOutput& out = f.step(&t);
    EXPECT_LE(t, 0.040) << "step " << steps;
    ASSERT_EQ(out.shape.decode_rows, 2) << "the streams run in every step";
    for (const ScheduledSeq& it : out.seqs) done = done || (it.id == p && it.logits);
  }
  EXPECT_EQ(f.sched.seq(p).n_computed, 300);
  EXPECT_GT(steps, 300 / 64 + 1);  // smaller chunks than the token budget's
}

TEST(LatencyBoundedSteps, APromptAloneGetsWholeSteps) {
  Fixture f(0.001);  // a target no prompt token fits
  const uint64_t p = f.add(100);
  EXPECT_EQ(items(f.step()), (Items{{p, 64}}));
  EXPECT_EQ(items(f.step()), (Items{{p, 36}}));
}

TEST(LatencyBoundedSteps, APromptNeverStarvesBehindStreamsOverTheTarget) {
  Fixture f(0.005);  // below the decode rows' own 14 ms
  f.start_streams();
  const uint64_t p = f.add(10);
  const uint64_t q = f.add(10);
  // Only the first prompt gets the minimum chunk (one block); the second waits its turn.
  EXPECT_EQ(items(f.step()), (Items{{1, 1}, {2, 1}, {p, 4}}));
  EXPECT_EQ(items(f.step()), (Items{{1, 1}, {2, 1}, {p, 4}}));
  EXPECT_EQ(items(f.step()), (Items{{1, 1}, {2, 1}, {p, 2}}));
  EXPECT_EQ(items(f.step()), (Items{{1, 1}, {2, 1}, {p, 1}, {q, 4}}));
}

TEST(LatencyBoundedSteps, AHigherPriorityPromptGetsItsChunkFirst) {
  Fixture f(0.040);
  f.start_streams();
  const uint64_t low = f.add(100);
  EXPECT_EQ(items(f.step()), (Items{{1, 1}, {2, 1}, {low, 23}}));
  const uint64_t high = f.add(30, /*priority=*/5);
  // The newcomer takes the 23 tokens that fit; the running low-priority prefill gets nothing
  // (0.12 ms are left, a prompt token costs 1).
  double t = 0;
  EXPECT_EQ(items(f.step(&t)), (Items{{1, 1}, {2, 1}, {high, 23}}));
  EXPECT_NEAR(t, 0.01412 + 0.02576, 1e-12);
  // Its last 7 tokens, then the low one in what is left.
  const SchedulerOutput& out = f.step(&t);
  ASSERT_EQ(out.seqs.size(), 4u);
  EXPECT_EQ(out.seqs[2].id, high);
  EXPECT_EQ(out.seqs[2].n_tokens, 7);
  EXPECT_EQ(out.seqs[3].id, low);
  EXPECT_GT(out.seqs[3].n_tokens, 0);
  EXPECT_LE(t, 0.040);
}

TEST(LatencyBoundedSteps, TheDefaultTargetIsAMultipleOfTheDecodeRowsAlone) {
  Fixture f(0);
  f.start_streams();
  f.add(100);
  const SchedulerOutput& out = f.step();
  EXPECT_NEAR(f.sched.itl_target(), kDefaultItlFactor * 0.0141, 1e-12);
  EXPECT_LE(f.cost.predict(out.shape), f.sched.itl_target());
}

TEST(LatencyBoundedSteps, ANegativeTargetMeansWholeSteps) {
  Fixture f(-1);
  f.start_streams();
  const uint64_t p = f.add(100);
  EXPECT_EQ(items(f.step()), (Items{{1, 1}, {2, 1}, {p, 62}}));
}

// Synthetic steps of the kinds a server runs: decode rows alone, and decode rows with a chunk
// of a prompt at some depth.
StepShape random_step(std::mt19937& rng, bool prompt) {
  StepShape s;
  const int rows = 1 + static_cast<int>(rng() % 32);
  for (int i = 0; i < rows; ++i) s.add(static_cast<int64_t>(rng() % 2000), 1, true);
  if (prompt) s.add(static_cast<int64_t>(rng() % 4000), 1 + static_cast<int64_t>(rng() % 256), false);
  return s;
}

// Of the order of the 1B model on two cores: 30 ms a step, 1.5 ms a decode row, 4 ms a prompt
// token, 0.2 us a query-position pair.
constexpr StepCostModel::Coefficients kTruth = {0.030, 0.0015, 0.004, 2e-7};

double truth(const StepShape& s) {
  return kTruth[0] + kTruth[1] * static_cast<double>(s.decode_rows) + kTruth[2] * static_cast<double>(s.prompt_tokens) +
         kTruth[3] * static_cast<double>(s.attention);
}

TEST(StepCostModel, RecoversKnownCoefficientsFromObservations) {
  StepCostModel m({0.1, 0.01, 0.02, 1e-6});  // a prior several times off
  std::mt19937 rng(3);
  for (int i = 0; i < 400; ++i) {
    const StepShape s = random_step(rng, i % 3 == 0);
    m.observe(s, truth(s));
  }
  // Attention is a small share of any step's time, so its coefficient is the least determined.
  const double tolerance[] = {0.03, 0.03, 0.03, 0.2};
  for (int k = 0; k < StepCostModel::kTerms; ++k) EXPECT_NEAR(m.coefficients()[k], kTruth[k], tolerance[k] * kTruth[k]) << k;
  // What the scheduler uses, the predictions, are within 2% over the kinds of steps.
  for (int i = 0; i < 100; ++i) {
    const StepShape s = random_step(rng, i % 2 == 0);
    EXPECT_NEAR(m.predict(s), truth(s), 0.02 * truth(s)) << i;
  }
}

TEST(StepCostModel, StaysNonNegativeAndRobustToNoiseAndOutliers) {
  StepCostModel m(StepCostModel::Coefficients{0.02, 0.001, 0.001, 0.0});
  std::mt19937 rng(5);
  std::normal_distribution<double> noise(1.0, 0.05);
  const StepCostModel::Coefficients no_attention = {0.010, 0.002, 0.001, 0.0};
  for (int i = 0; i < 400; ++i) {
    const StepShape s = random_step(rng, i % 2 == 0);
    double y = no_attention[0] + no_attention[1] * s.decode_rows + no_attention[2] * s.prompt_tokens;
    if (i == 300) y *= 20;  // one step hit by a page-fault storm
    m.observe(s, y * noise(rng));
  }
  for (int k = 0; k < StepCostModel::kTerms; ++k) EXPECT_GE(m.coefficients()[k], 0.0) << k;
  StepShape typical;
  typical.add(500, 1, true);
  typical.add(1000, 128, false);
  const double want = no_attention[0] + no_attention[1] + no_attention[2] * 128;
  EXPECT_NEAR(m.predict(typical), want, 0.1 * want);
}

TEST(StepCostModel, LongDecodingDoesNotForgetWhatPromptsCost) {
  StepCostModel m({0.1, 0.01, 0.02, 1e-6});
  std::mt19937 rng(9);
  for (int i = 0; i < 200; ++i) {
    const StepShape s = random_step(rng, i % 2 == 0);
    m.observe(s, truth(s));
  }
  for (int i = 0; i < 5000; ++i) {
    const StepShape s = random_step(rng, false);
    m.observe(s, truth(s));
  }
  EXPECT_NEAR(m.coefficients()[2], kTruth[2], 0.03 * kTruth[2]);
}

// Mixed steps 30% dearer than the sum of their parts (a cost the linear model has no term for:
// small prompt chunks beside decode rows): the corrected prediction follows each kind of step.
TEST(StepCostModel, TheCorrectedPredictionFollowsEachKindOfStep) {
  StepCostModel m({0.01, 0.003, 0.002, 0.0});
  std::mt19937 rng(5);
  auto decode = [&] {
    StepShape s;
    s.decode_rows = 1 + static_cast<int64_t>(rng() % 16);
    return s;
  };
  auto mixed = [&] {
    StepShape s = decode();
    s.prompt_tokens = 1 + static_cast<int64_t>(rng() % 32);
    return s;
  };
  auto truth = [](const StepShape& s) {
    const double t = 0.01 + 0.003 * static_cast<double>(s.decode_rows) + 0.002 * static_cast<double>(s.prompt_tokens);
    return s.prompt_tokens > 0 ? 1.3 * t : t;
  };
  for (int i = 0; i < 400; ++i) {
    const StepShape s = i % 2 ? decode() : mixed();
    m.observe(s, truth(s));
  }
  double plain = 0, corrected = 0;
  for (int i = 0; i < 200; ++i) {
    const StepShape s = i % 2 ? decode() : mixed();
    plain += std::abs(m.predict(s) / truth(s) - 1) / 200;
    corrected += std::abs(m.predict_corrected(s) / truth(s) - 1) / 200;
  }
  EXPECT_LT(corrected, 0.05);
  EXPECT_LT(corrected, plain);
}

TEST(StepCostModel, ThePriorHoldsBeforeAnyStep) {
  const StepCostModel::Coefficients prior = {0.03, 0.004, 0.002, 1e-6};
  StepCostModel m(prior);
  EXPECT_EQ(m.coefficients(), prior);
  StepShape s;
  s.add(0, 10, false);
  EXPECT_NEAR(m.predict(s), 0.03 + 0.02 + 55e-6, 1e-15);
}

}  // namespace
}  // namespace ll3
