// Constrained sampling in the engine (Request::grammar): every output matches its grammar, ends
// where it may, fits max_tokens, batches like any other request, and a draw follows the model's
// distribution restricted to what the grammar allows.
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "engine/model_impl.h"
#include "engine_fixtures.h"
#include "eval/sequence_evaluator.h"
#include "ll3/grammar.h"

namespace ll3::test {
namespace {

std::unique_ptr<Engine> make_engine(int64_t max_seqs = 16) {
  EngineOptions o;
  o.threads = 2;
  o.ctx = 8192;
  o.max_seqs = max_seqs;
  o.max_queue = 4096;
  Result<std::unique_ptr<Engine>> e = Engine::create(engine_model(), o);
  EXPECT_TRUE(e.ok()) << e.message();
  return e.ok() ? std::move(e.value()) : nullptr;
}

std::shared_ptr<const Grammar> schema(const std::string& text) {
  Result<std::shared_ptr<const Grammar>> g = Grammar::from_json_schema(text);
  EXPECT_TRUE(g.ok()) << g.message();
  return g.ok() ? g.value() : nullptr;
}

Request constrained(std::shared_ptr<const Grammar> g, uint32_t seed, int64_t max_tokens, float temperature) {
  Request r;
  r.tokens = random_prompt(12, seed);
  r.max_tokens = max_tokens;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.grammar = std::move(g);
  return r;
}

constexpr const char* kPerson = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "role": {"enum": ["admin", "user", "guest"]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3}
  },
  "required": ["name", "age", "role", "tags"],
  "additionalProperties": false
})";

void expect_person(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << text;
  ASSERT_TRUE(j.is_object()) << text;
  EXPECT_EQ(j.size(), 4u) << text;
  ASSERT_TRUE(j["name"].is_string()) << text;
  EXPECT_LE(j["name"].get<std::string>().size(), 12u * 4) << text;  // 12 characters of up to 4 bytes
  ASSERT_TRUE(j["age"].is_number_integer()) << text;
  EXPECT_GE(j["age"].get<int>(), 0);
  EXPECT_LE(j["age"].get<int>(), 120);
  const std::string role = j["role"].get<std::string>();
  EXPECT_TRUE(role == "admin" || role == "user" || role == "guest") << text;
  ASSERT_TRUE(j["tags"].is_array());
  EXPECT_LE(j["tags"].size(), 3u);
}

TEST(EngineConstrained, EveryOutputMatchesItsSchemaGreedyAndSampled) {
  LL3_REQUIRE_ENGINE_MODEL();
  std::unique_ptr<Engine> e = make_engine();
  ASSERT_NE(e, nullptr);
  std::shared_ptr<const Grammar> g = schema(kPerson);
  ASSERT_NE(g, nullptr);
  for (float temp : {0.0f, 0.8f, 1.5f}) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      Result<Engine::Completion> c = e->generate(constrained(g, seed, 400, temp));
      ASSERT_TRUE(c.ok()) << c.message();
      EXPECT_EQ(c->finish.reason, FinishReason::kStop) << c->text;
      expect_person(c->text);
    }
  }
}

TEST(EngineConstrained, ASmallMaxTokensStillEndsTheJson) {
  LL3_REQUIRE_ENGINE_MODEL();
  std::unique_ptr<Engine> e = make_engine();
  ASSERT_NE(e, nullptr);
  std::shared_ptr<const Grammar> g = schema(kPerson);
  // The shortest answer, {"name":"","age":0,"role":"user","tags":[]}, is 44 bytes: 44 tokens of one byte at worst.
  for (int64_t max_tokens : {44, 50, 64}) {
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      Result<Engine::Completion> c = e->generate(constrained(g, seed, max_tokens, 1.0f));
      ASSERT_TRUE(c.ok()) << c.message();
      EXPECT_LE(static_cast<int64_t>(c->tokens.size()), max_tokens);
      expect_person(c->text);
    }
  }
}

TEST(EngineConstrained, ConstrainedRequestsBatchedGiveTheirSoloTokens) {
  LL3_REQUIRE_ENGINE_MODEL();
  std::unique_ptr<Engine> e = make_engine();
  ASSERT_NE(e, nullptr);
  std::shared_ptr<const Grammar> g = schema(kPerson);
  std::vector<Engine::Completion> solo;
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    Result<Engine::Completion> c = e->generate(constrained(g, seed, 120, seed % 2 ? 0.0f : 0.9f));
    ASSERT_TRUE(c.ok());
    ASSERT_FALSE(c->tokens.empty()) << "seed " << seed;
    expect_person(c->text);
    solo.push_back(std::move(*c));
  }
  // The same 8 at once, beside 8 unconstrained streams.
  std::vector<std::future<Result<Engine::Completion>>> runs, others;
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    others.push_back(std::async(std::launch::async, [&, seed] { return e->generate(greedy(random_prompt(20, 100 + seed), 60)); }));
    runs.push_back(std::async(std::launch::async, [&, seed] { return e->generate(constrained(g, seed, 120, seed % 2 ? 0.0f : 0.9f)); }));
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    Result<Engine::Completion> c = runs[i].get();
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->tokens, solo[i].tokens) << "seed " << i + 1;
  }
  for (auto& o : others) EXPECT_TRUE(o.get().ok());
}

TEST(EngineConstrained, GbnfAlternativesAndTheEndOfTheGrammarStopIt) {
  LL3_REQUIRE_ENGINE_MODEL();
  std::unique_ptr<Engine> e = make_engine();
  ASSERT_NE(e, nullptr);
  Result<std::shared_ptr<const Grammar>> g = Grammar::from_gbnf(R"(root ::= ("yes" | "no") " because " [a-z]{3,8} ".")");
  ASSERT_TRUE(g.ok()) << g.message();
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    Request r = constrained(*g, seed, 100, seed > 3 ? 1.0f : 0.0f);
    r.ignore_eos = true;  // the grammar's end stops it all the same
    Result<Engine::Completion> c = e->generate(r);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->finish.reason, FinishReason::kStop);
    const std::string& t = c->text;
    const size_t b = t.find(" because ");
    ASSERT_NE(b, std::string::npos) << t;
    EXPECT_TRUE(t.substr(0, b) == "yes" || t.substr(0, b) == "no") << t;
    const std::string word = t.substr(b + 9, t.size() - b - 10);
    EXPECT_GE(word.size(), 3u) << t;
    EXPECT_LE(word.size(), 8u) << t;
    for (char ch : word) EXPECT_TRUE(ch >= 'a' && ch <= 'z') << t;
    EXPECT_EQ(t.back(), '.') << t;
  }
}

TEST(EngineConstrained, JsonObjectAndLogprobs) {
  LL3_REQUIRE_ENGINE_MODEL();
  std::unique_ptr<Engine> e = make_engine();
  ASSERT_NE(e, nullptr);
  Request r = constrained(Grammar::json_object(), 3, 300, 0.0f);
  r.logprobs = true;
  r.top_logprobs = 3;
  Result<Engine::Completion> c = e->generate(r);
  ASSERT_TRUE(c.ok());
  nlohmann::json j = nlohmann::json::parse(c->text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << c->text;
  EXPECT_TRUE(j.is_object()) << c->text;
  ASSERT_FALSE(c->events.empty());
  for (const TokenEvent& ev : c->events) {
    EXPECT_LE(ev.logprob, 0.0f);
    EXPECT_EQ(ev.top_logprobs.size(), 3u);
  }
}

// One letter after the prompt, drawn at temperature 1 without truncation, many times: the
// frequencies follow softmax(logits) over the 26 letter tokens (a chi-square test; 25 degrees
// of freedom, critical value 52.6 for a false-failure rate of 1e-3; the seeds are fixed, so the
// outcome is the same every run).
TEST(EngineConstrained, ADrawFollowsTheModelRestrictedToTheGrammar) {
  LL3_REQUIRE_ENGINE_MODEL();
  const std::vector<int32_t> prompt = random_prompt(10, 77);
  const LlamaModel& lm = *model_impl(*engine_model()).llama;
  EvaluatorOptions eo;
  eo.threads = 2;
  eo.context = 64;
  Result<std::unique_ptr<SequenceEvaluator>> ev = SequenceEvaluator::create(lm, eo);
  ASSERT_TRUE(ev.ok()) << ev.message();
  ASSERT_TRUE((*ev)->eval(prompt).ok());
  const float* logits = (*ev)->last_logits();
  std::vector<int32_t> ids;
  std::vector<double> p;
  double sum = 0;
  for (char ch = 'a'; ch <= 'z'; ++ch) {
    std::vector<int32_t> t = engine_model()->encode(std::string(1, ch), false, false);
    ASSERT_EQ(t.size(), 1u);
    ids.push_back(t[0]);
    p.push_back(std::exp(static_cast<double>(logits[t[0]])));
    sum += p.back();
  }
  for (double& x : p) x /= sum;

  std::unique_ptr<Engine> e = make_engine(64);
  ASSERT_NE(e, nullptr);
  Result<std::shared_ptr<const Grammar>> g = Grammar::from_gbnf("root ::= [a-z]");
  ASSERT_TRUE(g.ok());
  constexpr int kDraws = 3000;
  std::mutex mu;
  std::map<int32_t, int> count;
  int bad = 0;
  for (int i = 0; i < kDraws; ++i) {
    Request r;
    r.tokens = prompt;
    r.max_tokens = 4;
    r.sampling.temperature = 1.0f;
    r.sampling.top_k = 0;
    r.sampling.top_p = 1.0f;
    r.sampling.min_p = 0.0f;
    r.sampling.seed = 1000 + static_cast<uint64_t>(i);
    r.grammar = *g;
    auto tokens = std::make_shared<std::vector<int32_t>>();
    r.on_token = [tokens](const TokenEvent& t) {
      tokens->push_back(t.token);
      return true;
    };
    r.on_finish = [tokens, &mu, &count, &bad](const FinishInfo&) {
      std::lock_guard<std::mutex> lk(mu);
      if (tokens->size() == 1) ++count[(*tokens)[0]];
      else ++bad;
    };
    ASSERT_TRUE(e->submit(std::move(r)).ok());
  }
  e->wait_idle();
  EXPECT_EQ(bad, 0);
  double chi2 = 0;
  for (size_t k = 0; k < ids.size(); ++k) {
    const double expect = p[k] * kDraws;
    const double d = count[ids[k]] - expect;
    chi2 += d * d / expect;
  }
  EXPECT_LT(chi2, 52.6);
}

}  // namespace
}  // namespace ll3::test
