// Chat templates against Python's jinja2 (tests/fixtures/tokenizer/chat_cases.jsonl, made by
// scripts/tokenizer-fixtures/gen_chat.py with transformers' settings): the published Llama 3,
// 3.1 and 3.2 templates on many conversations, and small templates for each language feature.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "test_support.h"
#include "tokenizer/jinja.h"
#include "tokenizer_shared.h"

namespace ll3 {
namespace {

using ojson = nlohmann::ordered_json;

std::string template_file(const std::string& name) {
  return test::read_file(test::fixture_path("chat_templates/" + name));
}

std::vector<ojson> chat_cases() {
  std::vector<ojson> out;
  std::ifstream in(test::fixture_path("chat_cases.jsonl"));
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(ojson::parse(line));  // ordered: key order matters for tojson
  return out;
}

class ChatTemplateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { setenv("TZ", "UTC", 1); }  // the fixtures' strftime_now ran in UTC
};

TEST_F(ChatTemplateTest, MatchesJinja2ByteForByte) {
  auto cases = chat_cases();
  ASSERT_GE(cases.size(), 70u);
  int failures = 0, errors = 0;
  for (const auto& c : cases) {
    std::string name = c["name"].get<std::string>();
    std::string src = c.contains("source") ? c["source"].get<std::string>()
                                           : template_file(c["template"].get<std::string>());
    auto t = jinja::parse(src);
    ASSERT_TRUE(t.ok()) << name << ": " << t.message();
    auto out = jinja::render(**t, c["context"], std::time_t(c["now"].get<int64_t>()));
    if (c.contains("error")) {
      ++errors;
      EXPECT_FALSE(out.ok()) << name << " should fail like jinja2: " << c["error"];
      continue;
    }
    if (!out.ok()) {
      ADD_FAILURE() << name << ": " << out.message();
      ++failures;
      continue;
    }
    if (*out != c["output"].get<std::string>()) {
      ++failures;
      ADD_FAILURE() << name << "\n--- want\n"
                    << c["output"].get<std::string>() << "\n--- got\n"
                    << *out;
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GE(errors, 4);
}

TEST_F(ChatTemplateTest, RenderChatUsesTheTemplate) {
  std::string tmpl = template_file("llama31.jinja");
  ChatTemplateOptions opt;
  opt.date_string = "01 Feb 2025";
  std::string warning = "stale";
  auto out = render_chat(tmpl, {{"system", "Be brief.", ""}, {"user", " Hi! ", ""}}, opt, &warning);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(warning.empty());
  EXPECT_EQ(*out,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge "
            "Date: December "
            "2023\nToday Date: 01 Feb 2025\n\nBe "
            "brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!"
            "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  opt.add_generation_prompt = false;
  out = render_chat(tmpl, {{"user", "x", ""}}, opt, &warning);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->substr(out->size() - 10), "<|eot_id|>");
}

TEST_F(ChatTemplateTest, ToolCallsThroughChatMessages) {
  std::string tmpl = template_file("llama32.jinja");
  ChatTemplateOptions opt;
  opt.date_string = "26 Jul 2024";
  opt.tools_json = R"([{"type": "function", "function": {"name": "f", "parameters": {}}}])";
  opt.extra_context_json = R"({"tools_in_user_message": false})";
  std::vector<ChatMessage> msgs = {
      {"user", "call f", ""},
      {"assistant", "", R"([{"function": {"name": "f", "arguments": {"b": 2, "a": 1}}}])"},
      {"tool", "ok", ""}};
  std::string warning;
  auto out = render_chat(tmpl, msgs, opt, &warning);
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_TRUE(warning.empty()) << warning;
  EXPECT_NE(out->find("{\"name\": \"f\", \"parameters\": {\"b\": 2, \"a\": 1}}<|eot_id|>"),
            std::string::npos)
      << *out;
  EXPECT_NE(out->find("<|start_header_id|>ipython<|end_header_id|>\n\n\"ok\"<|eot_id|>"),
            std::string::npos);
  EXPECT_NE(out->find("    \"type\": \"function\",\n"), std::string::npos);
  // Bad option JSON is an error, not a fallback.
  opt.tools_json = "[not json";
  EXPECT_FALSE(render_chat(tmpl, msgs, opt).ok());
}

TEST_F(ChatTemplateTest, FallsBackToLlama3WithAWarning) {
  std::vector<ChatMessage> msgs = {{"system", " sys ", ""}, {"user", "hello", ""}};
  ChatTemplateOptions opt;
  std::string want =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nsys<|eot_id|><|start_header_"
      "id|>user"
      "<|end_header_id|>\n\nhello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
  for (const char* bad :
       {"", "{% macro m() %}x{% endmacro %}", "{{ unclosed", "{{ raise_exception('no') }}",
        "{% for x in %}", "{{ 1 + 'a' }}", "{% if %}", "{{ x.y.z }}", "{% endfor %}"}) {
    std::string warning;
    auto out = render_chat(bad, msgs, opt, &warning);
    ASSERT_TRUE(out.ok()) << bad;
    EXPECT_EQ(*out, want) << bad;
    EXPECT_FALSE(warning.empty()) << bad;
  }
  // The built-in format is the Llama 3 template itself.
  auto out = render_chat(template_file("llama3.jinja"), msgs, opt);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, want);
}

// Each thread keeps the last template it parsed: templates rendered by turns must each give
// their own text, and a template that does not parse its warning every time.
TEST_F(ChatTemplateTest, TemplatesRenderedByTurnsEachGiveTheirOwnText) {
  const std::vector<ChatMessage> msgs = {{"system", "sys", ""}, {"user", "hello", ""}};
  ChatTemplateOptions opt;
  opt.date_string = "26 Jul 2024";
  const std::string t31 = template_file("llama31.jinja"), t3 = template_file("llama3.jinja");
  auto a = render_chat(t31, msgs, opt), b = render_chat(t3, msgs, opt);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_FALSE(a->empty());
  EXPECT_NE(*a, *b);
  for (int turn = 0; turn < 2; ++turn) {
    std::string warning;
    auto bad = render_chat("{{ unclosed", msgs, opt, &warning);
    ASSERT_TRUE(bad.ok());
    EXPECT_EQ(*bad, *b) << "the built-in format is llama3.jinja's";
    EXPECT_FALSE(warning.empty()) << "turn " << turn;
    auto again = render_chat(turn == 0 ? t31 : t3, msgs, opt, &warning);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, turn == 0 ? *a : *b);
    EXPECT_TRUE(warning.empty());
  }
}

TEST_F(ChatTemplateTest, HostileTemplatesAreBounded) {
  jinja::RenderLimits limits;
  limits.max_steps = 100000;
  limits.max_output_bytes = 1 << 20;
  ojson ctx = ojson::object();
  for (const char* src :
       {"{% for i in range(1000000) %}{% for j in range(1000000) %}x{% endfor %}{% endfor %}",
        "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}", "{{ 'ab' * 100000000 }}"}) {
    auto t = jinja::parse(src);
    ASSERT_TRUE(t.ok()) << src;
    EXPECT_FALSE(jinja::render(**t, ctx, 0, limits).ok()) << src;
  }
  std::string deep(100000, '(');
  EXPECT_FALSE(jinja::parse("{{ " + deep + " }}").ok());
  std::string nested;
  for (int i = 0; i < 1000; ++i) nested += "{% if true %}";
  EXPECT_FALSE(jinja::parse(nested).ok());
}

// The shared models' template, rendered and tokenized, gives llama.cpp's chat prompt (P2).
TEST_F(ChatTemplateTest, RenderedPromptTokenizesLikeTheGoldenChatPrompt) {
  LL3_REQUIRE_SHARED();
  const Tokenizer* tok = test::gguf_tokenizer();
  ASSERT_NE(tok, nullptr);
  auto p2 =
      ojson::parse(test::read_file(test::shared_dir() + "/models/golden/tiny-llama3-f32/P2.json"));
  auto out = render_chat(tok->vocab().chat_template,
                         {{"system", "You are a helpful assistant.", ""},
                          {"user", "Write a haiku about the sea.", ""}},
                         ChatTemplateOptions{});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, p2["text"].get<std::string>());
  EXPECT_EQ(tok->encode(*out, false, true), p2["tokens"].get<std::vector<int32_t>>());
}

}  // namespace
}  // namespace ll3
