// The AMX bf16 prompt GEMM: blocks of 32 weight rows (each kernel call unpacks its block chunk
// by chunk and multiplies it with every packed token), the unit of work matmul hands a thread.
// GFLOP/s against the AMX peak (~2.5 TFLOP/s per core measured here) shows how far feeding the
// tiles, not arithmetic, bounds it.
#include <benchmark/benchmark.h>

#include <vector>

#include "bench_data.h"
#include "kernels/gemm_bf16.h"
#include "kernels/type_traits.h"

namespace ll3 {
namespace {

// Args: k, n (tokens), rows (several blocks, as one thread sees them).
void gemm_bf16_blocks(benchmark::State& state, DType type) {
  const kernels::Bf16Gemm* amx = kernels::bf16_gemm_amx();
  if (amx == nullptr) {
    state.SkipWithError("no AMX-BF16 on this CPU");
    return;
  }
  const int64_t k = state.range(0), n = state.range(1), rows = state.range(2);
  const TypeTraits* tr = type_traits(type);
  const size_t row_bytes = dtype_row_bytes(type, k);
  const std::vector<uint8_t> w = bench::make_weights(type, k, rows);
  const std::vector<float> x = bench::random_floats(n * k, 1);
  std::vector<uint16_t> xp(kernels::bf16_packed_x_elems(n, k));
  for (int64_t g = 0; g * 16 < n; ++g) {
    amx->pack_x(x.data() + g * 16 * k, static_cast<size_t>(k), std::min<int64_t>(16, n - g * 16), k,
                xp.data() + g * 16 * k);
  }
  std::vector<float> y(static_cast<size_t>(n * rows));
  kernels::Bf16WeightRows blk;
  blk.row_bytes = row_bytes;
  blk.chunk_bytes = dtype_row_bytes(type, kernels::kBf16ChunkK);
  blk.to_bf16 = tr->to_bf16;
  blk.to_float = tr->to_float;
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; r += 32) {
      blk.rows = w.data() + r * row_bytes;
      blk.nr = 32;
      amx->gemm(blk, xp.data(), n, k, y.data() + r, static_cast<size_t>(rows));
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(rows * n * k),
                                                 benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

BENCHMARK_CAPTURE(gemm_bf16_blocks, f16, DType::F16)->Args({2048, 128, 256})->Args({8192, 128, 256})->Args({2048, 32, 256})->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(gemm_bf16_blocks, q8_0, DType::Q8_0)->Args({2048, 128, 256})->Args({8192, 128, 256})->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(gemm_bf16_blocks, q4_k, DType::Q4_K)->Args({2048, 128, 256})->Args({8192, 128, 256})->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(gemm_bf16_blocks, q6_k, DType::Q6_K)->Args({2048, 128, 256})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ll3
