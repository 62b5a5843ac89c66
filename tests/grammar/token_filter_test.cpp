// TokenFilter on the real Llama-3 vocabulary (128k tokens): allowed() equals a brute force over
// every token, allows() agrees, and the budget brings every random walk to an end in time.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <random>

#include "grammar/token_filter.h"
#include "grammar_test_util.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace ll3::grammar {
namespace {

struct Vocab {
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<TokenFilter> filter;
  int32_t eot = -1;
};

// Loaded once per process; nullptr without the shared data.
const Vocab* vocab() {
  static Vocab* v = [] () -> Vocab* {
    if (ll3::test::shared_dir().empty()) return nullptr;
    auto t = load_tokenizer(ll3::test::shared_dir() + "/tokenizers/llama3");
    if (!t.ok()) return nullptr;
    auto* out = new Vocab;
    out->tok = std::move(*t);
    std::vector<std::string> bytes(size_t(out->tok->n_vocab()));
    std::vector<int32_t> ends;
    for (int32_t i = 0; i < out->tok->n_vocab(); ++i) {
      if (out->tok->is_control(i)) {
        if (out->tok->is_eog(i)) ends.push_back(i);
        continue;
      }
      bytes[size_t(i)] = std::string(out->tok->piece(i));
    }
    out->eot = out->tok->eot_id();
    out->filter = std::make_unique<TokenFilter>(std::move(bytes), ends);
    return out;
  }();
  return v;
}

#define REQUIRE_VOCAB()                        \
  LL3_REQUIRE_SHARED();                        \
  const Vocab* v = vocab();                    \
  ASSERT_NE(v, nullptr) << "llama3 tokenizer"; \
  const TokenFilter& f = *v->filter

// allowed() against accept() of every token on a copy of the matcher, and allows().
void expect_brute_force(const Vocab& v, const Matcher& m, const char* what) {
  const TokenFilter& f = *v.filter;
  std::vector<uint8_t> mask;
  f.allowed(m, -1, mask);
  ASSERT_EQ(mask.size(), size_t(f.n_vocab()));
  int n_allowed = 0, mismatches = 0;
  for (int32_t t = 0; t < f.n_vocab(); ++t) {
    bool want;
    if (v.tok->is_control(t)) {
      want = v.tok->is_eog(t) && m.can_end();
    } else {
      Matcher copy = m;
      want = copy.accept(v.tok->piece(t));
    }
    n_allowed += want;
    if (bool(mask[size_t(t)]) != want || f.allows(m, t) != want) {
      if (++mismatches < 5) ADD_FAILURE() << what << ": token " << t << " '" << v.tok->piece(t) << "' want " << want;
    }
  }
  EXPECT_EQ(mismatches, 0) << what;
  std::printf("  %-28s %6d tokens allowed\n", what, n_allowed);
}

TEST(TokenFilter, AllowedEqualsBruteForce) {
  REQUIRE_VOCAB();
  (void)f;
  auto obj = Grammar::json_object();
  auto sch = test::schema(R"({"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer","minimum":-5,"maximum":120},
      "when":{"type":"string","format":"date"},"kind":{"enum":["alpha","beta","gamma delta"]}},"required":["name","n","when","kind"]})");
  struct State {
    std::shared_ptr<const Grammar> g;
    const char* prefix;
  } states[] = {
      {obj, ""},
      {obj, "{"},
      {obj, "{\"k\": \"some te"},
      {obj, "{\"k\": \"\xE2\x82"},  // inside a UTF-8 sequence
      {obj, "{\"k\": 12"},
      {obj, "{\"k\": [tr"},
      {obj, "{\"k\": {}}"},
      {sch, "{\"name\": \"x\", \"n\": "},
      {sch, "{\"name\": \"x\", \"n\": 1"},
      {sch, "{\"name\": \"x\", \"n\": 12, \"when\": \"2024-0"},
      {sch, "{\"name\": \"x\", \"n\": 12, \"when\": \"2024-02-29\", \"kind\": \"gam"},
      {test::gbnf("root ::= \"hello\" | \"help\" [a-z]* | \"x\"{3,5}\n"), "hel"},
  };
  for (const auto& s : states) {
    Matcher m(s.g);
    ASSERT_TRUE(m.accept(s.prefix)) << s.prefix;
    expect_brute_force(*v, m, s.prefix);
  }
}

TEST(TokenFilter, BudgetBringsEveryWalkToAnEnd) {
  REQUIRE_VOCAB();
  auto sch = test::schema(R"({"type":"object","properties":{"title":{"type":"string"},"tags":{"type":"array","items":{"type":"string"},"minItems":1},
      "meta":{"type":"object","properties":{"score":{"type":"number"},"ok":{"type":"boolean"}},"required":["score","ok"]}},
      "required":["title","tags","meta"]})");
  std::mt19937 rng(7);
  std::vector<uint8_t> mask;
  std::vector<int32_t> choices;
  for (int walk = 0; walk < 20; ++walk) {
    Matcher m(sch);
    const int64_t budget = m.min_bytes_to_end() + 1 + 2 * walk;  // from just enough to some slack
    std::string text;
    bool ended = false;
    for (int64_t left = budget; left >= 0 && !ended; --left) {
      f.allowed(m, left, mask);
      choices.clear();
      for (int32_t t = 0; t < f.n_vocab(); ++t)
        if (mask[size_t(t)]) choices.push_back(t);
      ASSERT_FALSE(choices.empty()) << "walk " << walk << " stuck at " << text;
      int32_t t = choices[rng() % choices.size()];
      if (t == v->eot || v->tok->is_control(t)) {
        ASSERT_TRUE(m.can_end());
        ended = true;
        break;
      }
      ASSERT_TRUE(f.allows(m, t));
      ASSERT_TRUE(m.accept(v->tok->piece(t))) << text << " + " << v->tok->piece(t);
      text += v->tok->piece(t);
      ASSERT_LE(m.min_bytes_to_end(), left - 1) << text;
    }
    ASSERT_TRUE(ended) << "walk " << walk << ": " << text;
    auto j = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << text;
    EXPECT_TRUE(j["title"].is_string() && j["tags"].is_array() && j["tags"].size() >= 1 && j["meta"]["score"].is_number() &&
                j["meta"]["ok"].is_boolean())
        << text;
  }
}

// Timing on the full vocabulary (the benchmark, bench/grammar_bench.cpp, has the figures).
TEST(TokenFilter, AllowedInsideAStringIsFast) {
  REQUIRE_VOCAB();
  Matcher m(Grammar::json_object());
  ASSERT_TRUE(m.accept("{\"key\": \"some text"));
  std::vector<uint8_t> mask;
  f.allowed(m, -1, mask);
  auto t0 = std::chrono::steady_clock::now();
  const int n = 20;
  for (int i = 0; i < n; ++i) f.allowed(m, -1, mask);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / n;
  std::printf("  allowed() inside a string: %.2f ms (%zu trie nodes)\n", ms, f.n_trie_nodes());
#if !defined(LL3_SANITIZED) && defined(NDEBUG)
  EXPECT_LT(ms, 50.0);
#endif
}

}  // namespace
}  // namespace ll3::grammar
