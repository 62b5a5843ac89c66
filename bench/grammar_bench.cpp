// Constrained sampling's per-token costs on the Llama-3 vocabulary (128k tokens): allows() (one
// token, the common case) and allowed() (the whole vocabulary, after a refused token or near
// the budget), in a few grammar states. The tokenizer comes from $LL3_SHARED (default
// ../shared beside the repository)/tokenizers/llama3; without it the benchmarks skip.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>

#include "grammar/token_filter.h"
#include "ll3/grammar.h"
#include "tokenizer/tokenizer.h"

namespace {

using ll3::grammar::Matcher;
using ll3::grammar::TokenFilter;

struct Vocab {
  std::unique_ptr<ll3::Tokenizer> tok;
  std::unique_ptr<TokenFilter> filter;
};

const Vocab* vocab() {
  static const Vocab* v = []() -> const Vocab* {
    const char* env = std::getenv("LL3_SHARED");
    std::string here = __FILE__;  // <repo>/bench/grammar_bench.cpp
    std::string dir = env ? env : here.substr(0, here.rfind('/')) + "/../../shared";
    auto t = ll3::load_tokenizer(dir + "/tokenizers/llama3");
    if (!t.ok()) return nullptr;
    auto* out = new Vocab{std::move(*t), nullptr};
    std::vector<std::string> bytes(size_t(out->tok->n_vocab()));
    std::vector<int32_t> ends;
    for (int32_t i = 0; i < out->tok->n_vocab(); ++i) {
      if (out->tok->is_eog(i)) ends.push_back(i);
      if (!out->tok->is_control(i)) bytes[size_t(i)] = std::string(out->tok->piece(i));
    }
    out->filter = std::make_unique<TokenFilter>(std::move(bytes), std::move(ends));
    return out;
  }();
  return v;
}

std::shared_ptr<const ll3::Grammar> schema() {
  static auto g = ll3::Grammar::from_json_schema(
                      R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150},
          "tags":{"type":"array","items":{"type":"string"}}},"required":["name","age","tags"]})")
                      .value();
  return g;
}

// States: 0 inside a string of json_object, 1 at the start of an object value, 2 in a bounded
// integer of a schema, 3 at an object's start.
Matcher state(int which) {
  switch (which) {
    case 0: { Matcher m(ll3::Grammar::json_object()); (void)m.accept("{\"key\": \"some text"); return m; }
    case 1: { Matcher m(ll3::Grammar::json_object()); (void)m.accept("{\"key\": "); return m; }
    case 2: { Matcher m(schema()); (void)m.accept("{\"name\": \"x\", \"age\": 1"); return m; }
    default: return Matcher(ll3::Grammar::json_object());
  }
}

const char* kStateNames[] = {"in_string", "value_start", "bounded_int", "object_start"};

void BM_Allowed(benchmark::State& st) {
  const Vocab* v = vocab();
  if (!v) return st.SkipWithError("llama3 tokenizer not found (LL3_SHARED)");
  Matcher m = state(int(st.range(0)));
  std::vector<uint8_t> mask;
  for (auto _ : st) {
    v->filter->allowed(m, st.range(1) ? 64 : -1, mask);
    benchmark::DoNotOptimize(mask.data());
  }
  st.SetLabel(std::string(kStateNames[st.range(0)]) + (st.range(1) ? " budget 64" : ""));
}
BENCHMARK(BM_Allowed)->ArgsProduct({{0, 1, 2, 3}, {0, 1}})->Unit(benchmark::kMillisecond);

// allows() on a fixed mix of tokens (common words, JSON punctuation, refused ones).
void BM_Allows(benchmark::State& st) {
  const Vocab* v = vocab();
  if (!v) return st.SkipWithError("llama3 tokenizer not found (LL3_SHARED)");
  Matcher m = state(int(st.range(0)));
  std::vector<int32_t> probe;
  for (const char* s : {" the", "\",", "\"}", " world", "123", "\\n", "}", " {\"", "é", "ing"}) {
    auto ids = v->tok->encode(s, false, false);
    if (ids.size() == 1) probe.push_back(ids[0]);
  }
  size_t i = 0, allowed = 0;
  for (auto _ : st) {
    allowed += v->filter->allows(m, probe[i]);
    i = i + 1 == probe.size() ? 0 : i + 1;
  }
  benchmark::DoNotOptimize(allowed);
  st.SetLabel(kStateNames[st.range(0)]);
}
BENCHMARK(BM_Allows)->DenseRange(0, 3)->Unit(benchmark::kNanosecond);

// Matcher::accept of one token's bytes on a copy (what the engine's trial costs).
void BM_CopyAndAccept(benchmark::State& st) {
  Matcher m = state(0);
  Matcher trial = m;
  for (auto _ : st) {
    trial = m;
    benchmark::DoNotOptimize(trial.accept(" more"));
  }
}
BENCHMARK(BM_CopyAndAccept)->Unit(benchmark::kNanosecond);

}  // namespace
