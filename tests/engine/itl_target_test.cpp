// An inter-token target only regroups prompt tokens into steps: streams and a long prompt
// submitted beside them give the same tokens with the tightest target (every prompt chunk cut to
// the minimum while the streams decode) as with none (whole --batch-tokens steps).
#include <gtest/gtest.h>

#include <future>
#include <vector>

#include "engine_fixtures.h"
#include "ll3/engine.h"

namespace ll3 {
namespace {

using test::greedy;
using test::random_prompt;

struct StreamsRun {
  std::vector<std::vector<int32_t>> tokens;
  EngineStats stats;
};

// Four streams decode; a 300-token prompt arrives once they have their first tokens.
StreamsRun streams_and_a_long_prompt(double itl_target_ms) {
  EngineOptions o;
  o.max_seqs = 8;
  o.batch_tokens = 64;
  o.itl_target_ms = itl_target_ms;
  Result<std::unique_ptr<Engine>> made = Engine::create(test::engine_model(), o);
  EXPECT_TRUE(made.ok()) << made.message();
  if (!made.ok()) return {};
  Engine& e = *made.value();
  std::vector<std::future<Result<Engine::Completion>>> f;
  std::promise<void> started;
  std::shared_future<void> first = started.get_future().share();
  for (int i = 0; i < 4; ++i) {
    Request r = greedy(random_prompt(8 + i, 40 + i), 24);
    if (i == 0) {
      auto once = std::make_shared<bool>(false);
      r.on_token = [&started, once](const TokenEvent&) {
        if (!*once) started.set_value();
        *once = true;
        return true;
      };
    }
    f.push_back(std::async(std::launch::async, [&e, r]() mutable { return e.generate(std::move(r)); }));
  }
  first.wait();
  f.push_back(std::async(std::launch::async, [&e] { return e.generate(greedy(random_prompt(300, 77), 4)); }));
  StreamsRun run;
  for (auto& x : f) {
    Result<Engine::Completion> c = x.get();
    EXPECT_TRUE(c.ok()) << c.message();
    run.tokens.push_back(c.ok() ? c->tokens : std::vector<int32_t>{});
  }
  e.wait_idle();
  run.stats = e.stats();
  return run;
}

TEST(EngineItlTarget, ATightTargetGivesTheSameTokensAsNone) {
  LL3_REQUIRE_ENGINE_MODEL();
  const StreamsRun none = streams_and_a_long_prompt(-1);
  const StreamsRun tight = streams_and_a_long_prompt(0.001);
  ASSERT_EQ(none.tokens.size(), tight.tokens.size());
  for (size_t i = 0; i < none.tokens.size(); ++i) {
    EXPECT_EQ(tight.tokens[i].size(), i < 4 ? 24u : 4u) << "request " << i;
    EXPECT_EQ(tight.tokens[i], none.tokens[i]) << "request " << i;
  }
  EXPECT_GT(tight.stats.itl_target_s, 0);
  EXPECT_EQ(none.stats.itl_target_s, 0);
  // The cost model has learned from the steps: a step costs something.
  EXPECT_GT(tight.stats.step_cost[0] + tight.stats.step_cost[1], 0);
}

}  // namespace
}  // namespace ll3
