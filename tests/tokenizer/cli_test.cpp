// The tokenize / detokenize / template subcommands, run as the real binary.
#include <gtest/gtest.h>

#include <sstream>

#include "test_support.h"
#include "tokenizer_shared.h"

namespace ll3 {
namespace {

using test::run_command;

std::string q(const std::string& s) {  // single-quote for sh
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LL3_REQUIRE_SHARED();
    gguf_ = test::shared_dir() + "/models/tiny-llama3-f32.gguf";
    hf_ = test::shared_dir() + "/tokenizers/llama3";
    bin_ = test::ll3_binary();
  }
  std::string gguf_, hf_, bin_;
};

TEST_F(CliTest, TokenizeIdsMatchTheGoldenPrompt) {
  auto p1 = nlohmann::json::parse(
      test::read_file(test::shared_dir() + "/models/golden/tiny-llama3-f32/P1.json"));
  auto r = run_command(bin_ + " tokenize -m " + q(gguf_) + " --ids --add-bos --text " +
                       q(p1["text"].get<std::string>()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output), p1["tokens"]);
  // Per-token listing: id TAB JSON piece.
  r = run_command(bin_ + " tokenize --tokenizer " + q(hf_) + " --text 'Hello world'");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "9906\t\"Hello\"\n1917\t\" world\"\n");
  // Specials only with --parse-special.
  r = run_command(bin_ + " tokenize -m " + q(gguf_) + " --ids --parse-special --text '<|eot_id|>'");
  EXPECT_EQ(r.output, "[128009]\n");
  r = run_command(bin_ + " tokenize -m " + q(gguf_) + " --ids --text '<|eot_id|>'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.front(), '[') << r.output;
  EXPECT_NE(r.output.find(','), std::string::npos) << "the text as several plain tokens: " << r.output;
  EXPECT_EQ(r.output.find("128009"), std::string::npos) << r.output;
}

TEST_F(CliTest, JsonlBatchKeepsOrder) {
  const Tokenizer* tok = test::gguf_tokenizer();
  ASSERT_NE(tok, nullptr);
  std::vector<std::string> texts = {"first line", "", "日本語 and emoji 😀\n\ttab", "x<|eot_id|>y",
                                    "  spaces  "};
  std::string in_path = test::temp_dir() + "/in.jsonl";
  std::string data;
  for (const auto& t : texts) data += nlohmann::json{{"text", t}}.dump() + "\n";
  test::write_file(in_path, data);
  auto r = run_command(bin_ + " tokenize -m " + q(gguf_) + " --jsonl " + q(in_path));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  std::string line;
  size_t k = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(k, texts.size());
    auto ids = nlohmann::json::parse(line)["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(ids, tok->encode(texts[k], false, false)) << texts[k];
    ++k;
  }
  EXPECT_EQ(k, texts.size());
  // A bad line names itself.
  test::write_file(in_path, "{\"text\": \"ok\"}\n{\"txt\": 1}\n");
  r = run_command(bin_ + " tokenize -m " + q(gguf_) + " --jsonl " + q(in_path), true);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(":2:"), std::string::npos) << r.output;
}

TEST_F(CliTest, DetokenizeAndStream) {
  auto r = run_command(bin_ + " detokenize -m " + q(gguf_) + " --ids 9906,1917,0");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "Hello world!");
  std::string in_path = test::temp_dir() + "/ids.jsonl";
  test::write_file(in_path, "{\"ids\": [9906, 1917]}\n{\"ids\": [128000, 9468, 239]}\n");
  r = run_command(bin_ + " detokenize -m " + q(gguf_) + " --jsonl " + q(in_path));
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output,
            "{\"text\": \"Hello world\"}\n{\"text\": \"<|begin_of_text|>\xEF\xBF\xBD\"}\n");
  r = run_command(bin_ + " detokenize -m " + q(gguf_) + " --stream --ids 9468,239,101,0");
  EXPECT_EQ(r.output, "\"\xF0\x9F\x91\xA8\"\n\"!\"\n");  // 👨 once its 4th byte arrives
  r = run_command(bin_ + " detokenize -m " + q(gguf_) + " --ids 999999", true);
  EXPECT_EQ(r.exit_code, 1);
}

TEST_F(CliTest, TemplateRendersTheModelsTemplate) {
  auto p2 = nlohmann::json::parse(
      test::read_file(test::shared_dir() + "/models/golden/tiny-llama3-f32/P2.json"));
  std::string path = test::temp_dir() + "/chat.json";
  test::write_file(path, R"([{"role": "system", "content": "You are a helpful assistant."},
                            {"role": "user", "content": "Write a haiku about the sea."}])");
  auto r = run_command(bin_ + " template -m " + q(gguf_) + " --messages " + q(path));
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, p2["text"].get<std::string>());
  r = run_command(bin_ + " template -m " + q(gguf_) + " --messages " + q(path) + " --ids");
  EXPECT_EQ(nlohmann::json::parse(r.output), p2["tokens"]);
  // The 3.1 template from a file, with the date and without the generation prompt.
  std::string tmpl = test::source_dir() + "/tests/fixtures/tokenizer/chat_templates/llama31.jinja";
  r = run_command(bin_ + " template --tokenizer " + q(hf_) + " --messages " + q(path) +
                  " --template " + q(tmpl) + " --date '02 Jan 2025' --no-generation-prompt");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("Today Date: 02 Jan 2025\n\nYou are a helpful assistant.<|eot_id|>"),
            std::string::npos);
  EXPECT_EQ(r.output.substr(r.output.size() - 10), "<|eot_id|>");
  // A broken template falls back with a warning on stderr.
  std::string bad = test::temp_dir() + "/bad.jinja";
  test::write_file(bad, "{% for %}");
  r = run_command(
      bin_ + " template -m " + q(gguf_) + " --messages " + q(path) + " --template " + q(bad), true);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("warning"), std::string::npos);
  EXPECT_NE(r.output.find(p2["text"].get<std::string>()), std::string::npos);
}

TEST_F(CliTest, UsageErrors) {
  EXPECT_EQ(run_command(bin_ + " tokenize -m " + q(gguf_), true).exit_code, 2);  // no input
  EXPECT_EQ(run_command(bin_ + " tokenize --text x", true).exit_code, 2);        // no model
  EXPECT_EQ(run_command(bin_ + " tokenize -m a --tokenizer b --text x", true).exit_code, 2);
  EXPECT_EQ(run_command(bin_ + " tokenize -m " + q(gguf_) + " --text x --bogus", true).exit_code,
            2);
  EXPECT_EQ(run_command(bin_ + " tokenize -m /nonexistent.gguf --text x", true).exit_code, 1);
  EXPECT_EQ(run_command(bin_ + " template -m " + q(gguf_), true).exit_code, 2);
  EXPECT_EQ(run_command(bin_ + " detokenize -m " + q(gguf_) + " --ids x1", true).exit_code, 2);
  EXPECT_EQ(run_command(bin_ + " tokenize --help", true).exit_code, 0);
}

}  // namespace
}  // namespace ll3
