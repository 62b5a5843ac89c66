// What constrained sampling costs a user: the same engine, prompts and token counts with no
// grammar, with any JSON object, and with a schema, as 1 and 8 concurrent streams on the shared
// small model (random weights: its draws often fall outside the grammar, so the allowed-token
// walk runs on many tokens, a worst case for the cost). Reported: time per generated token.
// The model comes from $LL3_SHARED (default ../shared beside the repository)/models, or is
// $LL3_BENCH_MODEL.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <random>

#include "ll3/engine.h"
#include "ll3/grammar.h"

namespace {

std::string shared_dir() {
  const char* env = std::getenv("LL3_SHARED");
  const std::string here = __FILE__;  // <repo>/bench/constrained_bench.cpp
  return env ? env : here.substr(0, here.rfind('/')) + "/../../shared";
}

ll3::Engine* engine() {
  static std::unique_ptr<ll3::Engine> e = [] {
    ll3::EngineOptions o;
    o.threads = 2;
    o.ctx = 8192;
    const char* model = std::getenv("LL3_BENCH_MODEL");  // another model: its path
    auto r = ll3::Engine::create(model ? model : shared_dir() + "/models/small-llama31-q4_k_m.gguf", o);
    return r.ok() ? std::move(r.value()) : nullptr;
  }();
  return e.get();
}

std::shared_ptr<const ll3::Grammar> grammar(int which) {
  static const auto schema = ll3::Grammar::from_json_schema(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "age", "tags"]})");
  if (which == 1) return ll3::Grammar::json_object();
  if (which == 2) return schema.value();
  return nullptr;
}

const char* kNames[] = {"none", "json_object", "schema"};

// Args: grammar (0 none, 1 json_object, 2 schema), streams.
void BM_Generate(benchmark::State& st) {
  ll3::Engine* e = engine();
  if (!e) return st.SkipWithError("the shared small model was not found (LL3_SHARED)");
  const int streams = static_cast<int>(st.range(1));
  constexpr int kTokens = 64;
  int64_t generated = 0;
  uint32_t round = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : st) {
    std::vector<std::future<ll3::Result<ll3::Engine::Completion>>> runs;
    for (int s = 0; s < streams; ++s) {
      ll3::Request r;
      std::mt19937 rng(1000 * round + static_cast<uint32_t>(s));
      r.tokens = {128000};
      while (r.tokens.size() < 16) r.tokens.push_back(static_cast<int32_t>(rng() % 120000));
      r.max_tokens = kTokens;
      r.ignore_eos = true;  // the same token count with and without a grammar (which ends at its own end)
      r.sampling.seed = rng();
      r.grammar = grammar(static_cast<int>(st.range(0)));
      runs.push_back(std::async(std::launch::async, [e, r]() mutable { return e->generate(std::move(r)); }));
    }
    for (auto& f : runs) {
      auto c = f.get();
      if (c.ok()) generated += static_cast<int64_t>(c->tokens.size());
    }
    ++round;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.counters["ms_per_token"] = generated > 0 ? 1e3 * seconds / static_cast<double>(generated) : 0;
  st.counters["tokens"] = static_cast<double>(generated);
  st.SetLabel(std::string(kNames[st.range(0)]) + ", " + std::to_string(streams) + " streams");
}
BENCHMARK(BM_Generate)->ArgsProduct({{0, 1, 2}, {1, 8}})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);

}  // namespace
