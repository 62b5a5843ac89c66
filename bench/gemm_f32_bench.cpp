// The float prompt GEMM (kernels/gemm_f32.h) on one block of weight rows already in float, the
// unit of work the F16 / BF16 / F32 prompt path hands a thread: GFLOP/s against the FMA peak
// (two 512-bit FMA units: 32 FLOP per cycle per core).
#include <benchmark/benchmark.h>

#include <vector>

#include "bench_data.h"
#include "core/aligned.h"
#include "core/half.h"
#include "kernels/gemm_f32.h"

namespace {

// 2 x rows x n x k FLOP per iteration, as a rate.
void count_gflops(benchmark::State& state, int64_t rows, int64_t n, int64_t k) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(rows * n * k),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

// Args: k, n (tokens), rows (16: the matmul's row block), pad (floats added to both leading
// dimensions: with k * 4 bytes a multiple of 4 KB every row maps to the same L1 sets).
void gemm_f32_block(benchmark::State& state) {
  const int64_t k = state.range(0), n = state.range(1), rows = state.range(2),
                ld = k + state.range(3);
  const std::vector<float> wv = ll3::bench::random_floats(rows * ld, 1),
                           xv = ll3::bench::random_floats(n * ld, 2);
  ll3::AlignedVector<float> w(wv.begin(), wv.end()), x(xv.begin(), xv.end());
  ll3::AlignedVector<float> y(static_cast<size_t>(n * rows));
  const ll3::kernels::GemmF32Fn gemm = ll3::kernels::gemm_f32();
  for (auto _ : state) {
    gemm(w.data(), static_cast<size_t>(ld), x.data(), static_cast<size_t>(ld), y.data(),
         static_cast<size_t>(rows), rows, n, k);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  count_gflops(state, rows, n, k);
}

BENCHMARK(gemm_f32_block)
    ->Args({2048, 128, 16, 0})
    ->Args({2048, 128, 16, 16})
    ->Args({8192, 128, 16, 0})
    ->Args({8192, 128, 16, 16})
    ->Args({2048, 16, 16, 0})
    ->Args({2048, 16, 16, 16})
    ->Args({256, 6, 4, 0})
    ->Args({512, 6, 4, 16})
    ->Args({2048, 6, 4, 16})
    ->Unit(benchmark::kMicrosecond);

// The lane-major GEMM (kernels/gemm_f32.h, AVX-512) on the same unit: a block of 32 rows
// packed (pack = 1: the packing inside the timed loop, as the matmul does it per block) times
// n tokens packed once. Args: k, n, rows (16 or 32), pack.
void gemm_f32_lanes_block(benchmark::State& state) {
  const ll3::kernels::GemmF32Lanes* lanes = ll3::kernels::gemm_f32_lanes();
  if (lanes == nullptr) {
    state.SkipWithError("no AVX-512");
    return;
  }
  const int64_t k = state.range(0), n = state.range(1), rows = state.range(2);
  const bool pack = state.range(3) != 0;
  const std::vector<float> wv = ll3::bench::random_floats(rows * k, 1), xv = ll3::bench::random_floats(n * k, 2);
  ll3::AlignedVector<float> wp(ll3::kernels::lanes_w_floats(rows, k)), xp(ll3::kernels::lanes_x_floats(n, k));
  ll3::AlignedVector<float> y(static_cast<size_t>(n * rows));
  lanes->pack_x(xv.data(), static_cast<size_t>(k), n, k, xp.data());
  const size_t row_bytes = static_cast<size_t>(k) * sizeof(float);
  lanes->pack_w(ll3::DType::F32, wv.data(), row_bytes, rows, k, wp.data());
  for (auto _ : state) {
    if (pack) lanes->pack_w(ll3::DType::F32, wv.data(), row_bytes, rows, k, wp.data());
    lanes->gemm(wp.data(), rows, xp.data(), n, k, y.data(), static_cast<size_t>(rows));
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  count_gflops(state, rows, n, k);
}

BENCHMARK(gemm_f32_lanes_block)
    ->Args({2048, 128, 32, 0})
    ->Args({2048, 128, 32, 1})
    ->Args({8192, 128, 32, 1})
    ->Args({2048, 24, 32, 1})
    ->Args({2048, 128, 16, 1})
    ->Unit(benchmark::kMicrosecond);

// The same unit for BF16 weights with bf16 activations (8-bit mode): the pair order's
// `vdpbf16ps` tiles, the BF16 rows packed in the timed loop as the matmul does. GFLOP/s against
// twice the FMA peak (one vdpbf16ps is two fmas per lane). Args: k, n, rows.
void gemm_bf16_pairs_block(benchmark::State& state) {
  const ll3::kernels::GemmF32Lanes* lanes = ll3::kernels::gemm_f32_lanes();
  if (lanes == nullptr) {
    state.SkipWithError("no AVX-512");
    return;
  }
  const int64_t k = state.range(0), n = state.range(1), rows = state.range(2);
  const std::vector<float> wv = ll3::bench::random_floats(rows * k, 1), xv = ll3::bench::random_floats(n * k, 2);
  std::vector<uint16_t> w(wv.size());
  std::vector<float> x(xv.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = ll3::f32_to_bf16(wv[i]);
  for (size_t i = 0; i < x.size(); ++i) x[i] = ll3::bf16_to_f32(ll3::f32_to_bf16(xv[i]));  // bf16 values
  ll3::AlignedVector<float> wp(ll3::kernels::lanes_w_floats(rows, k)), xp(ll3::kernels::lanes_x_floats(n, k));
  ll3::AlignedVector<float> y(static_cast<size_t>(n * rows));
  lanes->pack_x_pairs(x.data(), static_cast<size_t>(k), n, k, xp.data());
  for (auto _ : state) {
    lanes->pack_w_pairs(w.data(), static_cast<size_t>(k) * 2, rows, k, wp.data());
    lanes->gemm_pairs(wp.data(), rows, xp.data(), n, k, y.data(), static_cast<size_t>(rows));
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  count_gflops(state, rows, n, k);
}

BENCHMARK(gemm_bf16_pairs_block)->Args({2048, 128, 32})->Args({8192, 128, 32})->Args({2048, 24, 32})->Unit(benchmark::kMicrosecond);

}  // namespace
