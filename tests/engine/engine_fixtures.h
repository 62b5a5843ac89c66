// What the engine tests share: the shared small model (loaded once per test binary), random
// prompts, and greedy requests.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ll3/engine.h"
#include "test_support.h"

namespace ll3::test {

inline std::string engine_model_path() { return shared_dir() + "/models/small-llama31-q4_k_m.gguf"; }

// Null (with the shared data missing, LL3_REQUIRE_SHARED skips or fails first).
inline std::shared_ptr<const Model> engine_model() {
  static std::shared_ptr<const Model> m = [] {
    Result<std::shared_ptr<const Model>> r = Model::load(engine_model_path());
    return r.ok() ? r.value() : nullptr;
  }();
  return m;
}

#define LL3_REQUIRE_ENGINE_MODEL() \
  LL3_REQUIRE_SHARED();            \
  ASSERT_NE(::ll3::test::engine_model(), nullptr) << ::ll3::test::engine_model_path()

// <|begin_of_text|>, then n - 1 random ids below 120000.
inline std::vector<int32_t> random_prompt(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t = {128000};
  while (static_cast<int>(t.size()) < n) t.push_back(static_cast<int32_t>(rng() % 120000));
  return t;
}

// Greedy, past end-of-generation tokens.
inline Request greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
  Request r;
  r.tokens = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  return r;
}

}  // namespace ll3::test
