// The official OpenAI Node client (tests/server/js, installed by scripts/setup.sh with npm ci)
// against the main test server: tests/server/js/openai_client_test.mjs, with the engine's greedy
// output for a random prompt as its exact expectation.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "ll3/engine.h"
#include "server_harness.h"
#include "test_support.h"

namespace ll3::test {
namespace {

TEST(ServerOpenAiNode, OfficialClient) {
  LL3_REQUIRE_SHARED();
  ASSERT_NE(main_server(), nullptr);
  const std::string js = source_dir() + "/tests/server/js";
  if (run_command("command -v node").exit_code != 0 || !std::filesystem::exists(js + "/node_modules/openai/package.json")) {
    if (in_ci()) FAIL() << "node or the openai package is missing (scripts/setup.sh runs npm ci in tests/server/js)";
    GTEST_SKIP() << "node or tests/server/js/node_modules is missing; run: (cd tests/server/js && npm ci)";
  }
  std::mt19937 rng(21);
  std::vector<int32_t> prompt = {128000};
  while (prompt.size() < 14) prompt.push_back(static_cast<int32_t>(rng() % 120000));
  EngineOptions o;
  o.threads = 1;
  o.ctx = 1024;
  Result<std::unique_ptr<Engine>> e = Engine::create(small_model_path(), o);
  ASSERT_TRUE(e.ok()) << e.message();
  Request r;
  r.tokens = prompt;
  r.max_tokens = 10;
  r.sampling.temperature = 0;
  Result<Engine::Completion> want = (*e)->generate(r);
  ASSERT_TRUE(want.ok());
  ASSERT_FALSE(want->text.empty()) << "the script compares the client's text with this one";
  const std::string expect = temp_dir() + "/expect.json";
  write_file(expect, json({{"model", "small-llama31"}, {"prompt_tokens", prompt}, {"max_tokens", 10}, {"text", want->text}}).dump());
  CommandResult res = run_command("node " + js + "/openai_client_test.mjs " + main_server()->url() + " " + kKey + " " + expect, true);
  std::printf("%s", res.output.c_str());
  EXPECT_EQ(res.exit_code, 0) << res.output;
  EXPECT_EQ(res.output.find("FAIL"), std::string::npos) << res.output;
  EXPECT_NE(res.output.find("ok   abort mid-stream"), std::string::npos) << res.output;
}

}  // namespace
}  // namespace ll3::test
