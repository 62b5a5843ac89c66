// Speculative decoding through a real `ll3 serve`: streamed and plain answers, alone and eight at
// once, are the tokens the engine gives without speculation; requests may opt out; /metrics
// counts the guesses.
#include <gtest/gtest.h>

#include <future>
#include <random>

#include "ll3/engine.h"
#include "server_harness.h"
#include "test_support.h"

namespace ll3::test {
namespace {

// A server whose guesses come from a draft model: the same file, so every guess is right and a
// step hands out several tokens at once (the case that can reorder or lose stream chunks).
ServeProcess* spec_server() {
  static std::unique_ptr<ServeProcess> p = [] {
    if (shared_dir().empty()) return std::unique_ptr<ServeProcess>();
    return std::make_unique<ServeProcess>(std::vector<std::string>{"-m", small_model_path(), "-t", "2", "--ctx", "4096",
                                                                   "--max-seqs", "16", "--spec", "draft", "--draft",
                                                                   small_model_path()});
  }();
  return p && p->ok() ? p.get() : nullptr;
}

std::vector<int32_t> random_tokens(uint32_t seed, int n) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t = {128000};
  while (static_cast<int>(t.size()) < n) t.push_back(static_cast<int32_t>(rng() % 120000));
  return t;
}

Engine::Completion expected(const std::vector<int32_t>& prompt, int64_t max_tokens) {
  Request r;
  r.tokens = prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  Result<Engine::Completion> c = reference_engine().generate(std::move(r));
  EXPECT_TRUE(c.ok()) << c.message();
  return c.ok() ? std::move(c.value()) : Engine::Completion{};
}

json completion_body(const std::vector<int32_t>& prompt, int max_tokens, bool stream) {
  json b = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}, {"stream", stream}};
  return b;
}

// The text of a streamed completion, and how many chunks carried text.
std::pair<std::string, int> streamed_text(const Reply& r) {
  std::string text;
  int chunks = 0;
  for (const std::string& e : r.events) {
    if (e == "[DONE]") break;
    json j = json::parse(e, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << e;
    if (j.is_discarded() || j["choices"].empty()) continue;
    text += j["choices"][0]["text"].get<std::string>();
    if (j["choices"][0]["finish_reason"].is_null()) ++chunks;
  }
  return {text, chunks};
}

TEST(ServerSpec, AnswersAreTheTokensWithoutSpeculation) {
  LL3_REQUIRE_SHARED();
  ASSERT_NE(spec_server(), nullptr) << "ll3 serve --spec draft did not start";
  HttpClient c(spec_server()->port());
  for (int round = 0; round < 3; ++round) {
    const std::vector<int32_t> prompt = random_tokens(40 + round, 12 + 9 * round);
    const int n = 16 + 8 * round;
    const Engine::Completion want = expected(prompt, n);
    Reply r = post(c, "/v1/completions", completion_body(prompt, n, false));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body_json()["choices"][0]["text"], want.text);
    EXPECT_EQ(r.body_json()["usage"]["completion_tokens"], n);
    Reply s = c.stream("/v1/completions", completion_body(prompt, n, true).dump());
    ASSERT_EQ(s.status, 200) << s.body;
    const auto [text, chunks] = streamed_text(s);
    EXPECT_EQ(text, want.text);
    EXPECT_EQ(chunks, n) << "one chunk per token, also when a step accepts several";
  }
}

TEST(ServerSpec, EightStreamsAtOnceAndAnOptOut) {
  LL3_REQUIRE_SHARED();
  ASSERT_NE(spec_server(), nullptr);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<Engine::Completion> want;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(random_tokens(100 + i, 10 + i));
    want.push_back(expected(prompts.back(), 24));
  }
  std::vector<std::future<Reply>> replies;
  for (int i = 0; i < 8; ++i) {
    replies.push_back(std::async(std::launch::async, [&, i] {
      HttpClient c(spec_server()->port());
      json b = completion_body(prompts[i], 24, true);
      if (i == 3) b["speculative"] = false;
      return c.stream("/v1/completions", b.dump());
    }));
  }
  for (int i = 0; i < 8; ++i) {
    Reply r = replies[i].get();
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(streamed_text(r).first, want[i].text) << "stream " << i;
  }
  HttpClient c(spec_server()->port());
  json bad = completion_body(prompts[0], 4, false);
  bad["speculative"] = "yes";
  EXPECT_EQ(post(c, "/v1/completions", bad).status, 400);
  const std::string m = c.request("GET", "/metrics").body;
  const double drafted = metric(m, "ll3_spec_drafted_tokens_total"), accepted = metric(m, "ll3_spec_accepted_tokens_total");
  EXPECT_GT(drafted, 0) << m;
  EXPECT_EQ(accepted, drafted) << "a model drafting for itself is always right";
  EXPECT_EQ(metric(m, "ll3_spec_acceptance_rate"), 1.0);
}

TEST(ServerSpec, BadSpeculationFlagsAreRefused) {
  LL3_REQUIRE_SHARED();
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--spec", "sometimes"}, {"--spec", "draft"}, {"--draft", "/nonexistent.gguf"}, {"--spec", "ngram", "--spec-max", "0"}}) {
    std::string cmd = ll3_binary() + " serve --port 0 -m " + small_model_path() + " -t 1 --ctx 512";
    for (const std::string& a : args) cmd += " " + a;
    const CommandResult r = run_command(cmd, true);
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.output;
    EXPECT_NE(r.output.find(args[0]), std::string::npos) << "the message names the flag: " << r.output;
  }
}

}  // namespace
}  // namespace ll3::test
