// W8A8 (kernels/w8a8.h) against the Q8_0 integer path ll3 runs today, on the 1B shapes: W
// (rows x k) times n_x activation rows, one thread, the activations quantized before the loop
// (both sides). Counter GOPS = 2 * rows * k * n_x per second. Args: {k, rows, n_x}.
//   w8a8:        w8a8_gemm over the packed matrix (the dispatcher's kernel; LL3_CPU caps it)
//   q8_0_panels: what matmul_q runs for Q8_0 weights repacked into panels at load (the default):
//                dot_q_panels (decode, with panel_act) or dot_q_panel_rows (prompts)
//   q8_0_rows:   the row layout (weights mapped read-only): dot_q_wrows over 16-row chunks
//                (decode) or dot_q_rows per weight row (prompts)
// Compare medians: --benchmark_repetitions=3 --benchmark_report_aggregates_only=true.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "bench_data.h"
#include "core/aligned.h"
#include "kernels/panels.h"
#include "kernels/type_traits.h"
#include "kernels/w8a8.h"

namespace {

using ll3::DType;

void set_gops(benchmark::State& state, int64_t k, int64_t rows, int64_t n_x) {
  state.counters["GOPS"] = benchmark::Counter(2.0 * static_cast<double>(k) * rows * n_x * state.iterations() / 1e9,
                                              benchmark::Counter::kIsRate);
}

void w8a8(benchmark::State& state) {
  namespace k8 = ll3::kernels;
  const int64_t k = state.range(0), rows = state.range(1), n_x = state.range(2);
  // Weights as trained ones look (small Gaussians), quantized per row; 2048 unique rows repeated.
  const int64_t unique = std::min<int64_t>(rows, 2048);
  std::vector<int8_t> wq(static_cast<size_t>(rows * k));
  std::vector<float> ws(static_cast<size_t>(rows));
  for (int64_t r = 0; r < unique; ++r) {
    const std::vector<float> w = ll3::bench::random_floats(k, 42u + static_cast<uint32_t>(r), 0.02f);
    ws[r] = k8::w8a8_quantize_dynamic(w.data(), k, wq.data() + r * k);
  }
  for (int64_t r = unique; r < rows; ++r) {
    std::copy_n(wq.data() + (r % unique) * k, k, wq.data() + r * k);
    ws[r] = ws[r % unique];
  }
  ll3::AlignedVector<uint8_t> packed(k8::w8a8_packed_bytes(rows, k));
  k8::w8a8_pack(wq.data(), rows, k, packed.data());
  std::vector<int8_t> xq(static_cast<size_t>(n_x * k));
  std::vector<float> xs(static_cast<size_t>(n_x));
  for (int64_t t = 0; t < n_x; ++t) {
    const std::vector<float> x = ll3::bench::random_floats(k, 1 + static_cast<uint32_t>(t));
    xs[t] = k8::w8a8_quantize_dynamic(x.data(), k, xq.data() + t * k);
  }
  std::vector<float> y(static_cast<size_t>(rows * n_x));
  for (auto _ : state) {
    k8::w8a8_gemm(packed.data(), ws.data(), 0, rows, xq.data(), static_cast<size_t>(k), xs.data(), n_x, k, y.data(),
                  static_cast<size_t>(rows));
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_gops(state, k, rows, n_x);
}

void q8_0(benchmark::State& state, bool panels) {
  const int64_t k = state.range(0), rows = state.range(1), n_x = state.range(2);
  const ll3::TypeTraits* tt = ll3::type_traits(DType::Q8_0);
  if (panels && (tt->dot_q_panels == nullptr || tt->dot_q_panel_rows == nullptr ||
                 !ll3::kernels::panel_layout_exists(DType::Q8_0, rows, k))) {
    state.SkipWithError("no Q8_0 panel kernels on this CPU");
    return;
  }
  std::vector<uint8_t> w = ll3::bench::make_weights_tiled(DType::Q8_0, k, rows);
  if (panels) ll3::kernels::panel_pack_matrix(DType::Q8_0, w.data(), rows, k);
  const size_t row_bytes = ll3::dtype_row_bytes(DType::Q8_0, k);
  // The activations as matmul_q quantizes them: from_float_act of the vec_dot_type (Q8_0).
  const DType act_type = tt->vec_dot_type;
  const size_t xq_bytes = ll3::dtype_row_bytes(act_type, k);
  std::vector<uint8_t> xq(xq_bytes * static_cast<size_t>(n_x));
  for (int64_t t = 0; t < n_x; ++t) {
    const std::vector<float> x = ll3::bench::random_floats(k, 1 + static_cast<uint32_t>(t));
    ll3::type_traits(act_type)->from_float_act(x.data(), xq.data() + t * xq_bytes, k);
  }
  std::vector<uint8_t> act(ll3::kernels::panel_act_bytes(k));
  if (panels) ll3::kernels::panel_act(DType::Q8_0, xq.data(), k, act.data());
  std::vector<float> y(static_cast<size_t>(rows * n_x));
  constexpr int64_t P = ll3::kernels::kPanelRows;
  for (auto _ : state) {
    if (panels && n_x == 1) {
      tt->dot_q_panels(w.data(), rows / P, xq.data(), act.data(), k, y.data());
    } else if (panels) {
      tt->dot_q_panel_rows(w.data(), rows / P, xq.data(), xq_bytes, n_x, k, y.data(), static_cast<size_t>(rows));
    } else if (n_x == 1) {
      for (int64_t r0 = 0; r0 < rows; r0 += P) {
        tt->dot_q_wrows(w.data() + r0 * row_bytes, row_bytes, std::min(P, rows - r0), xq.data(), k, y.data() + r0);
      }
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        tt->dot_q_rows(w.data() + r * row_bytes, xq.data(), xq_bytes, n_x, k, y.data() + r, static_cast<size_t>(rows));
      }
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_gops(state, k, rows, n_x);
}

// {k, rows, n_x}: the 1B shapes (Q/O 2048 x 2048, gate/up 2048 -> 8192, down 8192 -> 2048).
void shapes(benchmark::internal::Benchmark* b) {
  for (int64_t n_x : {1, 128}) {
    b->Args({2048, 2048, n_x})->Args({2048, 8192, n_x})->Args({8192, 2048, n_x});
  }
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(w8a8)->Apply(shapes);
BENCHMARK_CAPTURE(q8_0, panels, true)->Apply(shapes);
BENCHMARK_CAPTURE(q8_0, rows, false)->Apply(shapes);

}  // namespace
