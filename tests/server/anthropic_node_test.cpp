// The official Anthropic TypeScript SDK (tests/server/js, installed by scripts/setup.sh with
// npm ci) against the main test server's /v1/messages: tests/server/js/anthropic_client_test.mjs,
// with the engine's greedy output for the conversation as its exact expectation.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "ll3/engine.h"
#include "server_harness.h"
#include "test_support.h"

namespace ll3::test {
namespace {

TEST(AnthropicNode, OfficialSdk) {
  LL3_REQUIRE_SHARED();
  ASSERT_NE(main_server(), nullptr);
  const std::string js = source_dir() + "/tests/server/js";
  if (run_command("command -v node").exit_code != 0 ||
      !std::filesystem::exists(js + "/node_modules/@anthropic-ai/sdk/package.json")) {
    if (in_ci())
      FAIL() << "node or the @anthropic-ai/sdk package is missing (scripts/setup.sh runs npm ci in "
                "tests/server/js)";
    GTEST_SKIP()
        << "node or tests/server/js/node_modules is missing; run: (cd tests/server/js && npm ci)";
  }
  const std::string system = "You are terse.", user = "Name three rivers of Europe.";
  const int max_tokens = 10;
  // The prompt as the server renders it (the OpenAI form of the same conversation), and the
  // engine's greedy output for it.
  HttpClient c = main_client();
  Reply t =
      post(c, "/tokenize",
           {{"messages",
             {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", user}}}}});
  ASSERT_EQ(t.status, 200) << t.body;
  Request r;
  r.tokens = t.body_json()["tokens"].get<std::vector<int32_t>>();
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  Result<Engine::Completion> want = reference_engine().generate(r);
  ASSERT_TRUE(want.ok()) << want.message();
  ASSERT_FALSE(want->text.empty()) << "the script compares the client's text with this one";
  const std::string expect = temp_dir() + "/anthropic_expect.json";
  write_file(expect, json({{"model", "small-llama31"},
                           {"system", system},
                           {"user", user},
                           {"max_tokens", max_tokens},
                           {"text", want->text},
                           {"input_tokens", r.tokens.size()}})
                         .dump());
  CommandResult res = run_command("node " + js + "/anthropic_client_test.mjs " +
                                      main_server()->url() + " " + kKey + " " + expect,
                                  true);
  std::printf("%s", res.output.c_str());
  EXPECT_EQ(res.exit_code, 0) << res.output;
  EXPECT_EQ(res.output.find("FAIL"), std::string::npos) << res.output;
  EXPECT_NE(res.output.find("ok   errors"), std::string::npos) << res.output;
}

}  // namespace
}  // namespace ll3::test
