// Structured output (response_format json_schema / json_object, constrained tool calls) driven by
// the official OpenAI Node client: tests/server/js/structured_output_test.mjs checks every answer
// with an independent validator (ajv) over the schema corpus in tests/server/js/schemas. It runs
// against the main test server (Llama 3.1 template, which reads `tools`) and, for the tool calls,
// against a server on the model's own template, which does not (the generic tool preamble).
// The refusal of a keyword that cannot be enforced is also checked over plain HTTP, so its error
// shape is covered where node is missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "server_harness.h"
#include "test_support.h"

namespace ll3::test {
namespace {

// The id the server gives its model (what the script must send as `model`).
std::string model_id(int port) {
  HttpClient c(port);
  c.set_key(kKey);
  const json models = c.request("GET", "/v1/models").body_json();
  if (!models.is_object() || !models.contains("data") || models["data"].empty()) return "";
  return models["data"][0].value("id", "");
}

// Runs the script against `port`; its output is printed (once) so a failure's lines, each with
// the request that reproduces it, land in the test log.
CommandResult run_script(int port, const std::string& mode, int limit_s) {
  const std::string script = source_dir() + "/tests/server/js/structured_output_test.mjs";
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  // The script stops itself at limit_s (saying where it was); the command's deadline is a backstop after it.
  CommandResult res = run_command("node " + script + " " + url + " " + kKey + " " + model_id(port) + " " + mode + " " + std::to_string(limit_s),
                                  true, limit_s + 60);
  std::printf("%s", res.output.c_str());
  return res;
}

#define LL3_REQUIRE_NODE()                                                                                                       \
  do {                                                                                                                           \
    const std::string js = source_dir() + "/tests/server/js";                                                                    \
    if (run_command("command -v node").exit_code != 0 || !std::filesystem::exists(js + "/node_modules/openai/package.json") ||   \
        !std::filesystem::exists(js + "/node_modules/ajv-formats/package.json")) {                                               \
      if (in_ci()) FAIL() << "node, openai or ajv is missing (scripts/setup.sh runs npm ci in tests/server/js)";               \
      GTEST_SKIP() << "node or tests/server/js/node_modules is missing; run: (cd tests/server/js && npm ci)";                  \
    }                                                                                                                            \
  } while (0)

TEST(ServerStructuredOutputNode, SchemaCorpusJsonObjectRefusalsAndTools) {
  LL3_REQUIRE_SHARED();
  ASSERT_NE(main_server(), nullptr);
  LL3_REQUIRE_NODE();
  CommandResult res = run_script(main_server()->port(), "all", 300);
  // The script's lines are above: each FAIL with the request that reproduces it.
  EXPECT_EQ(res.exit_code, 0);
  EXPECT_EQ(res.output.find("FAIL"), std::string::npos);
  // The run reached its end (a crash or the time limit prints no summary).
  EXPECT_NE(res.output.find(" checks passed in "), std::string::npos);
  EXPECT_NE(res.output.find(" schemas (at least 35)"), std::string::npos);
}

// A model whose built-in template never reads `tools` (all the shared files carry the plain
// Llama 3 template): the server must still return constrained calls as tool_calls.
TEST(ServerStructuredOutputNode, ToolsOnTemplateWithoutTools) {
  LL3_REQUIRE_SHARED();
  LL3_REQUIRE_NODE();
  // The premise: the built-in template renders a conversation without the tools it is given.
  const std::string dir = temp_dir();
  write_file(dir + "/messages.json", R"([{"role": "user", "content": "hi"}])");
  write_file(dir + "/tools.json", R"([{"type": "function", "function": {"name": "zz_probe_tool", "parameters": {"type": "object"}}}])");
  CommandResult prompt = run_command(ll3_binary() + " template -m " + small_model_path() + " --messages " + dir + "/messages.json --tools " + dir + "/tools.json");
  ASSERT_EQ(prompt.exit_code, 0) << prompt.output;
  ASSERT_EQ(prompt.output.find("zz_probe_tool"), std::string::npos) << prompt.output;
  ServeProcess s({"-m", small_model_path(), "-t", "1", "--ctx", "2048", "--max-seqs", "8", "--api-key", kKey, "--no-access-log"});
  ASSERT_TRUE(s.ok()) << s.log();
  CommandResult res = run_script(s.port(), "tools", 150);
  EXPECT_EQ(res.exit_code, 0);
  EXPECT_EQ(res.output.find("FAIL"), std::string::npos);
  EXPECT_NE(res.output.find("ok   no-tools-template tools tool_choice=required t=0 "), std::string::npos);
}

// The error a client gets for a schema keyword the grammar cannot enforce: 400, an
// invalid_request_error on `response_format`, the keyword quoted and where it is.
void expect_refusal(const Reply& r, const std::string& keyword, const std::string& where, const std::string& param = "response_format") {
  ASSERT_EQ(r.status, 400) << r.body;
  const json b = r.body_json();
  ASSERT_TRUE(b.is_object() && b.contains("error")) << r.body;
  const json& e = b["error"];
  EXPECT_EQ(e.value("type", ""), "invalid_request_error") << r.body;
  ASSERT_TRUE(e["param"].is_string()) << r.body;
  EXPECT_EQ(e["param"].get<std::string>().rfind(param, 0), 0u) << r.body;
  const std::string message = e.value("message", "");
  EXPECT_NE(message.find("'" + keyword + "'"), std::string::npos) << message;
  if (!where.empty()) EXPECT_NE(message.find(where), std::string::npos) << message;
}

json schema_format(const json& schema) {
  return {{"type", "json_schema"}, {"json_schema", {{"name", "t"}, {"strict", true}, {"schema", schema}}}};
}

const json kTagsUnique = {{"type", "object"},
                          {"properties", {{"tags", {{"type", "array"}, {"items", {{"type", "string"}}}, {"uniqueItems", true}}}}},
                          {"required", {"tags"}}};

TEST(ServerStructuredOutput, UnsupportedKeywordOnChat) {
  LL3_REQUIRE_SHARED();
  ASSERT_NE(main_server(), nullptr);
  HttpClient c = main_client();
  json b = {{"messages", {{{"role", "user"}, {"content", "tags?"}}}}, {"max_tokens", 8}, {"response_format", schema_format(kTagsUnique)}};
  expect_refusal(post(c, "/v1/chat/completions", b), "uniqueItems", "/properties/tags");
  // A streamed request is refused before its stream starts: a status, not an event.
  b["stream"] = true;
  Reply s = c.stream("/v1/chat/completions", b.dump());
  EXPECT_TRUE(s.events.empty()) << s.body;
  expect_refusal(s, "uniqueItems", "/properties/tags");
}

TEST(ServerStructuredOutput, UnsupportedKeywordOnCompletionsNestedInRef) {
  LL3_REQUIRE_SHARED();
  ASSERT_NE(main_server(), nullptr);
  HttpClient c = main_client();
  // The keyword sits in a definition reached through $ref: the error points into $defs.
  const json schema = {{"type", "object"},
                       {"properties", {{"qty", {{"$ref", "#/$defs/qty"}}}}},
                       {"required", {"qty"}},
                       {"$defs", {{"qty", {{"type", "integer"}, {"multipleOf", 5}}}}}};
  expect_refusal(post(c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 8}, {"response_format", schema_format(schema)}}), "multipleOf",
                 "/$defs/qty");
  const json not_schema = {{"type", "object"}, {"properties", {{"name", {{"type", "string"}, {"not", {{"const", "admin"}}}}}}}};
  expect_refusal(post(c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 8}, {"response_format", schema_format(not_schema)}}), "not",
                 "/properties/name");
}

TEST(ServerStructuredOutput, MalformedResponseFormat) {
  LL3_REQUIRE_SHARED();
  ASSERT_NE(main_server(), nullptr);
  HttpClient c = main_client();
  const json msgs = {{{"role", "user"}, {"content", "hi"}}};
  for (const json& rf : {json{{"type", "json_schema"}}, json{{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", 5}}}},
                         json{{"type", "yaml"}}, json("json_object")}) {
    Reply r = post(c, "/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 4}, {"response_format", rf}});
    ASSERT_EQ(r.status, 400) << rf.dump() << ": " << r.body;
    const json e = r.body_json()["error"];
    ASSERT_TRUE(e["param"].is_string()) << r.body;
    EXPECT_EQ(e["param"].get<std::string>().rfind("response_format", 0), 0u) << r.body;
  }
}

TEST(ServerStructuredOutput, UnsupportedKeywordInToolParameters) {
  LL3_REQUIRE_SHARED();
  ASSERT_NE(main_server(), nullptr);
  HttpClient c = main_client();
  const json tools = {{{"type", "function"}, {"function", {{"name", "tag"}, {"parameters", kTagsUnique}}}}};
  const json b = {{"messages", {{{"role", "user"}, {"content", "tag it"}}}}, {"max_tokens", 8}, {"tools", tools}, {"tool_choice", "required"}};
  const Reply r = post(c, "/v1/chat/completions", b);
  expect_refusal(r, "uniqueItems", "/properties/tags", "tools[0].function.parameters");
  // The pointer is the client's own schema's, not the combined grammar's.
  EXPECT_EQ(r.body.find("$defs/p0"), std::string::npos) << r.body;
}

// The accepted path without node: at temperature 1 the random model's choice is noise, so only
// the grammar can make the answer one of the enum's values.
TEST(ServerStructuredOutput, EnumAnswerOnCompletions) {
  LL3_REQUIRE_SHARED();
  ASSERT_NE(main_server(), nullptr);
  HttpClient c = main_client();
  const json values = {"red", "green", "it's \"blue\""};
  for (int seed = 1; seed <= 3; ++seed) {
    Reply r = post(c, "/v1/completions", {{"prompt", "Color:"}, {"max_tokens", 20}, {"temperature", 1.0}, {"seed", seed},
                                          {"response_format", schema_format({{"type", "string"}, {"enum", values}})}});
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string text = r.body_json()["choices"][0].value("text", "");
    const json v = json::parse(text, nullptr, false);
    EXPECT_TRUE(std::find(values.begin(), values.end(), v) != values.end()) << text;
  }
}

}  // namespace
}  // namespace ll3::test
