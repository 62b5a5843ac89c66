// Attention of m consecutive tokens over n cached positions (one KV head and its G query heads;
// m = 1: a decode row, more: a prompt chunk): the kernel LL3_CPU leaves against the scalar reference,
// F16 and Q8_0 caches. Counters: positions attended per second (all m tokens) and the bytes of
// K and V a token alone would read (one head's slice of each row).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/type_traits.h"

namespace {

using namespace ll3;

template <bool kSimd>
void attend_bench(benchmark::State& state) {
  const int64_t n = state.range(0), hd = state.range(1), G = state.range(2);
  const DType type = state.range(3) != 0 ? DType::Q8_0 : DType::F16;
  const int m = static_cast<int>(state.range(4));
  const int64_t bs = 16, n_kv = 8, n_blocks = (n + m - 1 + bs - 1) / bs;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t slots = n_blocks * bs, row = n_kv * hd;
  const size_t row_bytes = dtype_row_bytes(type, row), head_bytes = dtype_row_bytes(type, hd);
  std::vector<float> x(static_cast<size_t>(row));
  std::vector<uint8_t> k(static_cast<size_t>(slots) * row_bytes), v(k.size());
  for (int64_t s = 0; s < slots; ++s) {  // rows as the KV cache stores them
    for (float& e : x) e = nd(rng);
    type_traits(type)->from_float(x.data(), &k[s * row_bytes], row);
    for (float& e : x) e = nd(rng);
    type_traits(type)->from_float(x.data(), &v[s * row_bytes], row);
  }
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  kernels::KvHeadView kv;
  kv.type = type;
  kv.k = k.data() + 3 * head_bytes;
  kv.v = v.data() + 3 * head_bytes;
  kv.slot_bytes = row_bytes;
  kv.block_size = bs;
  kv.block_table = table.data();
  std::vector<float> q(static_cast<size_t>(m * G * hd)), out(q.size());
  std::vector<float> s(static_cast<size_t>(std::max(m * G * (n + m), kernels::attend_scratch_floats(G, hd, bs))));
  for (float& x : q) x = nd(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (auto _ : state) {
    if constexpr (kSimd) {
      kernels::attend_rows(q.data(), G * hd, m, static_cast<int>(G), hd, kv, n, scale, s.data(), out.data());
    } else {
      for (int i = 0; i < m; ++i) {
        kernels::ref::attend(q.data() + i * G * hd, static_cast<int>(G), hd, kv, n + i, scale, s.data(),
                             out.data() + i * G * hd);
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  const double positions = static_cast<double>(m) * static_cast<double>(n) + m * (m - 1) / 2.0;
  state.counters["positions/s"] = benchmark::Counter(positions, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["KV_bytes/s"] =
      benchmark::Counter(2 * positions * static_cast<double>(head_bytes), benchmark::Counter::kIsIterationInvariantRate);
}

// n positions, head_dim, query heads per KV head (Llama 3.2 1B: 64, 4; 3B: 128, 3; 8B: 128, 4),
// cache type (0 F16, 1 Q8_0), tokens.
void args(benchmark::internal::Benchmark* b) {
  for (int64_t q8 : {0, 1}) {
    for (int64_t n : {256, 4096, 16384}) {
      for (int64_t m : {1, 16}) {
        b->Args({n, 64, 4, q8, m});
        b->Args({n, 128, 4, q8, m});
        b->Args({n, 128, 3, q8, m});
      }
    }
  }
  b->Args({4096, 64, 4, 0, 4});
}

BENCHMARK(attend_bench<true>)->Name("attend_simd")->Apply(args);
BENCHMARK(attend_bench<false>)->Name("attend_ref")->Apply(args);

}  // namespace
