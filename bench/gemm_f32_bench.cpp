// The float prompt GEMM (kernels/gemm_f32.h) on one block of weight rows already in float, the
// unit of work the F16 / BF16 / F32 prompt path hands a thread: GFLOP/s against the FMA peak
// (two 512-bit FMA units: 32 FLOP per cycle per core).
#include <benchmark/benchmark.h>

#include <vector>

#include "bench_data.h"
#include "core/aligned.h"
#include "kernels/gemm_f32.h"

namespace {

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
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(rows * n * k),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
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

}  // namespace
