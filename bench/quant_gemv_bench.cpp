// GEMV per weight type: y = W x with W (rows x n) stored in the type, x float, one dot_f32 per
// row (the decode path). Reports weight bytes streamed per second, the figure to compare with
// the machine's read bandwidth. Args: {n, rows}; the 1B shapes (2048 x 2048, 2048 -> 8192) by
// default: W is 4-35 MB, larger than the caches, as in real decoding.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "bench_data.h"
#include "core/aligned.h"
#include "kernels/panels.h"
#include "kernels/stream_read.h"
#include "kernels/type_traits.h"

namespace {

using ll3::DType;
using ll3::bench::make_weights;
using ll3::bench::make_weights_tiled;
using ll3::bench::quantized_activations;
using ll3::bench::random_floats;

void gemv(benchmark::State& state, DType t, bool reference) {
  const int64_t n = state.range(0), rows = state.range(1);
  const ll3::TypeTraits* tt = reference ? ll3::type_traits_ref(t) : ll3::type_traits(t);
  const std::vector<uint8_t> w = make_weights(t, n, rows);
  const size_t row_bytes = ll3::dtype_row_bytes(t, n);
  const std::vector<float> x = random_floats(n, 1);
  std::vector<float> y(rows);
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) y[r] = tt->dot_f32(w.data() + r * row_bytes, x.data(), n);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
}

// The integer path: quantize x once (counted), then one dot_q per row.
void gemv_q(benchmark::State& state, DType t) {
  const int64_t n = state.range(0), rows = state.range(1);
  const ll3::TypeTraits* tt = ll3::type_traits(t);
  if (tt->dot_q == nullptr) {
    state.SkipWithError("no integer path");
    return;
  }
  const ll3::TypeTraits* act = ll3::type_traits(tt->vec_dot_type);
  const std::vector<uint8_t> w = make_weights(t, n, rows);
  const size_t row_bytes = ll3::dtype_row_bytes(t, n);
  const std::vector<float> x = random_floats(n, 1);
  std::vector<uint8_t> xq = quantized_activations(t, x);
  std::vector<float> y(rows);
  for (auto _ : state) {
    act->from_float(x.data(), xq.data(), n);
    for (int64_t r = 0; r < rows; ++r) y[r] = tt->dot_q(w.data() + r * row_bytes, xq.data(), n);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
}

// The decode path as old and new kernels: one dot_q per row (wrows false) or dot_q_wrows over
// chunks of 16 rows, the work unit the matmul hands a thread.
void gemv_wrows(benchmark::State& state, DType t, bool wrows) {
  const int64_t n = state.range(0), rows = state.range(1);
  const ll3::TypeTraits* tt = ll3::type_traits(t);
  if (wrows && tt->dot_q_wrows == nullptr) {
    state.SkipWithError("no dot_q_wrows");
    return;
  }
  const std::vector<uint8_t> w = make_weights(t, n, rows);
  const size_t row_bytes = ll3::dtype_row_bytes(t, n);
  const std::vector<uint8_t> xq = quantized_activations(t, random_floats(n, 1));
  std::vector<float> y(rows);
  constexpr int64_t kChunk = 16;
  for (auto _ : state) {
    for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
      const int64_t nr = std::min(kChunk, rows - r0);
      if (wrows) {
        tt->dot_q_wrows(w.data() + r0 * row_bytes, row_bytes, nr, xq.data(), n, y.data() + r0);
      } else {
        for (int64_t r = r0; r < r0 + nr; ++r) y[r] = tt->dot_q(w.data() + r * row_bytes, xq.data(), n);
      }
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
}

// The decode path over the same weights repacked into panels (kernels/panels.h): dot_q_panels
// over runs of 4 panels (64 rows, what the matmul hands a thread for the 1B shapes).
void gemv_panels(benchmark::State& state, DType t) {
  const int64_t n = state.range(0), rows = state.range(1);
  const ll3::TypeTraits* tt = ll3::type_traits(t);
  if (tt->dot_q_panels == nullptr || !ll3::kernels::panel_layout_exists(t, rows, n)) {
    state.SkipWithError("no panel kernel");
    return;
  }
  std::vector<uint8_t> w = make_weights_tiled(t, n, rows);
  ll3::kernels::panel_pack_matrix(t, w.data(), rows, n);
  const size_t row_bytes = ll3::dtype_row_bytes(t, n);
  const std::vector<uint8_t> xq = quantized_activations(t, random_floats(n, 1));
  std::vector<uint8_t> act(ll3::kernels::panel_act_bytes(n));
  ll3::kernels::panel_act(t, xq.data(), n, act.data());
  std::vector<float> y(rows);
  constexpr int64_t kRun = 4 * ll3::kernels::kPanelRows;
  for (auto _ : state) {
    for (int64_t r0 = 0; r0 < rows; r0 += kRun) {
      const int64_t nr = std::min(kRun, rows - r0);
      tt->dot_q_panels(w.data() + r0 * row_bytes, nr / ll3::kernels::kPanelRows, xq.data(), act.data(), n,
                       y.data() + r0);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
}

// F16 / BF16 / F32 rows through dot_f32_wrows over chunks of 16 rows: the float decode path.
void gemv_float_wrows(benchmark::State& state, DType t) {
  const int64_t n = state.range(0), rows = state.range(1);
  const ll3::TypeTraits* tt = ll3::type_traits(t);
  const std::vector<uint8_t> w = make_weights_tiled(t, n, rows);
  const size_t row_bytes = ll3::dtype_row_bytes(t, n);
  const std::vector<float> x = random_floats(n, 1);
  std::vector<float> y(rows);
  constexpr int64_t kChunk = 16;
  for (auto _ : state) {
    for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
      tt->dot_f32_wrows(w.data() + r0 * row_bytes, row_bytes, std::min(kChunk, rows - r0), x.data(), n, y.data() + r0);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
}

// F16 panels through dot_f32_panels over runs of 2 panels (the 128 KB decode work item of
// kernels/ops/matmul.cpp for rows of 2048): the float decode path where it has panels.
void gemv_float_panels(benchmark::State& state, DType t) {
  const int64_t n = state.range(0), rows = state.range(1);
  const ll3::TypeTraits* tt = ll3::type_traits(t);
  if (tt->dot_f32_panels == nullptr || !ll3::kernels::panel_layout_exists(t, rows, n)) {
    state.SkipWithError("no panel kernel");
    return;
  }
  std::vector<uint8_t> w = make_weights_tiled(t, n, rows);
  ll3::kernels::panel_pack_matrix(t, w.data(), rows, n);
  const size_t row_bytes = ll3::dtype_row_bytes(t, n);
  const std::vector<float> x = random_floats(n, 1);
  std::vector<float> y(rows);
  constexpr int64_t kRun = 2 * ll3::kernels::kPanelRows;
  for (auto _ : state) {
    for (int64_t r0 = 0; r0 < rows; r0 += kRun) {
      const int64_t nr = std::min(kRun, rows - r0);
      tt->dot_f32_panels(w.data() + r0 * row_bytes, nr / ll3::kernels::kPanelRows, x.data(), n, y.data() + r0);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
}

// The streaming read `ll3 bench --roofline` measures (kernels/stream_read.h) over range(0) MiB:
// beside the DRAM-sized shapes above (Args {2048, 65536}), the share of the read a kernel reaches.
void stream(benchmark::State& state, size_t ahead) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  ll3::AlignedVector<uint8_t> buf(bytes);  // stream_read's loads are aligned
  for (size_t i = 0; i < bytes; i += 64) buf[i] = static_cast<uint8_t>(i >> 6);
  for (auto _ : state) benchmark::DoNotOptimize(ll3::kernels::stream_read(buf.data(), bytes, ahead));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}
BENCHMARK_CAPTURE(stream, prefetch, size_t{1024})->Arg(128)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(stream, prefetch_far, size_t{16384})->Arg(128)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(stream, plain, size_t{0})->Arg(128)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(gemv_float_wrows, F16, DType::F16)->Args({2048, 32768})->Args({2048, 128})->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(gemv_float_panels, F16, DType::F16)->Args({2048, 65536})->Args({2048, 128})->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(gemv_float_wrows, BF16, DType::BF16)->Args({2048, 32768})->Args({2048, 128})->Unit(benchmark::kMicrosecond);

// Old and new interleaved, so both see the same machine load: compare medians of repetitions
// (--benchmark_repetitions=5 --benchmark_enable_random_interleaving=true).
#define LL3_GEMV_WROWS(T)                                                                              \
  BENCHMARK_CAPTURE(gemv_wrows, T##_dot_q, DType::T, false)->Args({2048, 8192})->Args({8192, 2048})->Args({2048, 512})->Unit(benchmark::kMicrosecond); \
  BENCHMARK_CAPTURE(gemv_wrows, T##_wrows, DType::T, true)->Args({2048, 8192})->Args({8192, 2048})->Args({2048, 512})->Unit(benchmark::kMicrosecond); \
  BENCHMARK_CAPTURE(gemv_panels, T##_panels, DType::T)->Args({2048, 8192})->Args({8192, 2048})->Args({2048, 512})->Unit(benchmark::kMicrosecond); \
  BENCHMARK_CAPTURE(gemv_panels, T##_panels, DType::T)->Args({2048, 65536})->Unit(benchmark::kMicrosecond);

LL3_GEMV_WROWS(Q4_K)
LL3_GEMV_WROWS(Q6_K)
LL3_GEMV_WROWS(Q8_0)
// Q4_0 has no panels: its decode kernel reads the rows (16 at a time).
BENCHMARK_CAPTURE(gemv_wrows, Q4_0_dot_q, DType::Q4_0, false)->Args({2048, 8192})->Args({2048, 512})->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(gemv_wrows, Q4_0_wrows, DType::Q4_0, true)->Args({2048, 8192})->Args({2048, 512})->Args({2048, 65536})->Unit(benchmark::kMicrosecond);

// Prompt processing: W (rows x n) times `tokens` activation rows through dot_q_rows (each weight
// row unpacked once per few tokens) or, with per_row, one dot_q per (row, token). Counts 2 ops
// per weight per token.
void gemm_q(benchmark::State& state, DType t, bool per_row) {
  const int64_t n = state.range(0), rows = state.range(1), tokens = state.range(2);
  const ll3::TypeTraits* tt = ll3::type_traits(t);
  const std::vector<uint8_t> w = make_weights(t, n, rows);
  const size_t row_bytes = ll3::dtype_row_bytes(t, n);
  const size_t xq_bytes = ll3::dtype_row_bytes(tt->vec_dot_type, n);
  std::vector<float> y(rows * tokens);
  std::vector<uint8_t> xq;
  for (int64_t j = 0; j < tokens; ++j) {
    const std::vector<uint8_t> row = quantized_activations(t, random_floats(n, 1 + static_cast<uint32_t>(j)));
    xq.insert(xq.end(), row.begin(), row.end());
  }
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* wr = w.data() + r * row_bytes;
      if (per_row) {
        for (int64_t j = 0; j < tokens; ++j) y[j * rows + r] = tt->dot_q(wr, xq.data() + j * xq_bytes, n);
      } else {
        tt->dot_q_rows(wr, xq.data(), xq_bytes, tokens, n, y.data() + r, rows);
      }
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GOPS"] = benchmark::Counter(2.0 * n * rows * tokens * state.iterations() / 1e9,
                                              benchmark::Counter::kIsRate);
}

#define LL3_GEMM_Q(T)                                                                                  \
  BENCHMARK_CAPTURE(gemm_q, T, DType::T, false)->Args({2048, 512, 32})->Unit(benchmark::kMillisecond); \
  BENCHMARK_CAPTURE(gemm_q, T##_per_row, DType::T, true)->Args({2048, 512, 32})->Unit(benchmark::kMillisecond);

LL3_GEMM_Q(Q8_0)
LL3_GEMM_Q(Q4_0)
LL3_GEMM_Q(Q4_K)
LL3_GEMM_Q(Q5_K)
LL3_GEMM_Q(Q6_K)

// The prompt / batched-decode path over panels: W (rows x n) repacked into panels times
// `tokens` activation rows through dot_q_panel_rows, the kernel a step of many decode rows
// runs. Counts 2 ops per weight per token; one thread. 2048 x 65536 streams its weights from
// memory (75-110 MB), as a step of the model does; the other shapes sit in L2.
void gemm_panels(benchmark::State& state, DType t) {
  const int64_t n = state.range(0), rows = state.range(1), tokens = state.range(2);
  const ll3::TypeTraits* tt = ll3::type_traits(t);
  if (tt->dot_q_panel_rows == nullptr || !ll3::kernels::panel_layout_exists(t, rows, n)) {
    state.SkipWithError("no panel row kernel");
    return;
  }
  std::vector<uint8_t> w = make_weights_tiled(t, n, rows);
  ll3::kernels::panel_pack_matrix(t, w.data(), rows, n);
  const size_t xq_bytes = ll3::dtype_row_bytes(tt->vec_dot_type, n);
  std::vector<uint8_t> xq;
  for (int64_t j = 0; j < tokens; ++j) {
    const std::vector<uint8_t> row = quantized_activations(t, random_floats(n, 1 + static_cast<uint32_t>(j)));
    xq.insert(xq.end(), row.begin(), row.end());
  }
  std::vector<float> y(rows * tokens);
  for (auto _ : state) {
    tt->dot_q_panel_rows(w.data(), rows / ll3::kernels::kPanelRows, xq.data(), xq_bytes, tokens, n, y.data(), rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GOPS"] = benchmark::Counter(2.0 * n * rows * tokens * state.iterations() / 1e9,
                                              benchmark::Counter::kIsRate);
}

#define LL3_GEMM_PANELS(T) \
  BENCHMARK_CAPTURE(gemm_panels, T, DType::T)->Args({2048, 512, 16})->Args({2048, 512, 4})->Args({8192, 256, 16})->Args({2048, 512, 64})->Args({2048, 65536, 16})->Args({2048, 65536, 64})->Unit(benchmark::kMicrosecond);

LL3_GEMM_PANELS(Q4_K)
LL3_GEMM_PANELS(Q6_K)
LL3_GEMM_PANELS(Q8_0)

#define LL3_GEMV_Q(T) \
  BENCHMARK_CAPTURE(gemv_q, T, DType::T)->Args({2048, 256})->Args({2048, 2048})->Args({2048, 8192})->Unit(benchmark::kMicrosecond);

LL3_GEMV_Q(Q8_0)
LL3_GEMV_Q(Q4_0)
LL3_GEMV_Q(Q4_1)
LL3_GEMV_Q(Q5_0)
LL3_GEMV_Q(Q5_1)
LL3_GEMV_Q(Q2_K)
LL3_GEMV_Q(Q3_K)
LL3_GEMV_Q(Q4_K)
LL3_GEMV_Q(Q5_K)
LL3_GEMV_Q(Q6_K)

#define LL3_GEMV(T)                                                                          \
  BENCHMARK_CAPTURE(gemv, T, DType::T, false)->Args({2048, 2048})->Args({2048, 8192})->Unit(benchmark::kMicrosecond); \
  BENCHMARK_CAPTURE(gemv, T##_ref, DType::T, true)->Args({2048, 2048})->Unit(benchmark::kMicrosecond);

LL3_GEMV(F32)
LL3_GEMV(F16)
LL3_GEMV(BF16)
LL3_GEMV(Q8_0)
LL3_GEMV(Q4_0)
LL3_GEMV(Q4_1)
LL3_GEMV(Q5_0)
LL3_GEMV(Q5_1)
LL3_GEMV(Q2_K)
LL3_GEMV(Q3_K)
LL3_GEMV(Q4_K)
LL3_GEMV(Q5_K)
LL3_GEMV(Q6_K)

}  // namespace
