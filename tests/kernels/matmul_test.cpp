// matmul and matmul_shared on every path (8-bit activations, AMX bf16 where present, float):
// a shared-input group gives exactly what its products give one by one, whether the group runs
// in one pass (same activation type) or falls back to separate passes (mixed types), and the
// products are close to a double-precision product of the dequantized weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "core/aligned.h"
#include "core/cpu_features.h"
#include "core/half.h"
#include "kernels/gemm_f32.h"
#include "kernels/matmul.h"
#include "kernels/panels.h"
#include "quant_test_rows.h"
#include "test_support.h"

namespace ll3 {
namespace {

struct TestWeight {
  std::vector<uint8_t> bytes;
  WeightMatrix W;
};

std::unique_ptr<TestWeight> random_weight(DType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  auto t = std::make_unique<TestWeight>();
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<uint8_t> row = test::random_quant_row(type, {}, cols, rng, true);
    t->bytes.insert(t->bytes.end(), row.begin(), row.end());
  }
  t->W.type = type;
  t->W.rows = rows;
  t->W.cols = cols;
  t->W.row_bytes = dtype_row_bytes(type, cols);
  t->W.data = t->bytes.data();
  t->W.traits = type_traits(type);
  return t;
}

// The scratch a runner would size, for n activation rows of cols.
struct TestScratch {
  std::vector<float> rows;
  std::vector<uint8_t> xq, panel_act, wbuf;
  std::vector<uint16_t> xbf;
  AlignedVector<float> xr, xlanes, wlanes;
  MatmulScratch s;

  TestScratch(const ThreadPool& pool, int64_t n, int64_t cols, bool int8, size_t max_row_bytes)
      : rows(static_cast<size_t>(pool.size()) * kLaneRowBlock * cols),
        xq(static_cast<size_t>(n) * xq_row_bytes(cols)),
        panel_act(kMaxSharedOutputs * kernels::panel_act_bytes(cols)),
        wbuf(static_cast<size_t>(pool.size()) * matmul_wbuf_bytes(max_row_bytes)),
        xbf(kernels::bf16_packed_x_elems(n, cols)),
        xr(static_cast<size_t>(n) * float_input_ld(cols)),
        xlanes(kernels::lanes_x_floats(n, cols)),
        wlanes(static_cast<size_t>(pool.size()) * kernels::lanes_w_floats(kLaneRowBlock, cols)) {
    s.rows = rows.data();
    s.max_cols = cols;
    s.xq = xq.data();
    s.panel_act = panel_act.data();
    s.int8_activations = int8;
    s.bf16 = int8 ? kernels::bf16_gemm_amx() : nullptr;
    s.xbf = xbf.data();
    s.xr = xr.data();
    s.wbuf = wbuf.data();
    s.wbuf_thread_bytes = matmul_wbuf_bytes(max_row_bytes);
    if (kernels::gemm_f32_lanes() != nullptr) {
      s.xlanes = xlanes.data();
      s.wlanes = wlanes.data();
    }
  }
};

size_t max_row_bytes(const std::vector<std::unique_ptr<TestWeight>>& w) {
  size_t n = 0;
  for (const auto& t : w) n = std::max(n, t->W.row_bytes);
  return n;
}

// y = W x in double from the reference dequantization (of the rows as stored: panels unpacked).
std::vector<double> reference_product(const WeightMatrix& W, const std::vector<float>& x, int64_t n) {
  std::vector<double> y(static_cast<size_t>(n * W.rows));
  std::vector<float> row(static_cast<size_t>(W.cols));
  std::vector<uint8_t> unpacked(W.row_bytes);  // row r of a panel-layout matrix
  for (int64_t r = 0; r < W.rows; ++r) {
    type_traits_ref(W.type)->to_float(W.row_in(r, unpacked.data()), row.data(), W.cols);
    for (int64_t t = 0; t < n; ++t) {
      double s = 0;
      for (int64_t i = 0; i < W.cols; ++i) s += static_cast<double>(row[i]) * x[t * W.cols + i];
      y[t * W.rows + r] = s;
    }
  }
  return y;
}

// panels: every weight that can take the decode panel layout is repacked into it (each product
// of a group then needs its own type's panel_act), and the row counts are multiples of 16.
void check_group(const std::vector<DType>& types, int64_t n, bool int8, std::mt19937& rng, bool panels = false) {
  const int64_t kCols = panels ? 512 : 256;  // Q6_K panels take two blocks per unit
  const int64_t row_counts[] = {96, 40, 33};
  const int64_t panel_row_counts[] = {96, 48, 32};
  ThreadPool pool(2);
  std::vector<std::unique_ptr<TestWeight>> w;
  for (size_t j = 0; j < types.size(); ++j) {
    w.push_back(random_weight(types[j], panels ? panel_row_counts[j] : row_counts[j], kCols, rng));
    WeightMatrix& W = w.back()->W;
    if (panels && type_traits(W.type)->dot_q_panels != nullptr && kernels::panel_layout_exists(W.type, W.rows, W.cols)) {
      kernels::panel_pack_matrix(W.type, w.back()->bytes.data(), W.rows, W.cols);
      W.panels = true;
    }
    if (panels && type_traits(W.type)->dot_q_panels != nullptr) {
      ASSERT_TRUE(W.panels) << dtype_name(W.type);
    }
  }
  const std::vector<float> x = test::random_normal(static_cast<size_t>(n * kCols), rng());
  const TestScratch ts(pool, n, kCols, int8, max_row_bytes(w));
  const MatmulScratch& s = ts.s;

  std::vector<std::vector<float>> alone(types.size()), shared(types.size());
  for (size_t j = 0; j < types.size(); ++j) {
    alone[j].assign(static_cast<size_t>(n * w[j]->W.rows), -1.0f);
    shared[j].assign(alone[j].size(), -2.0f);
    matmul(pool, w[j]->W, x.data(), alone[j].data(), n, s);
  }
  if (types.size() == 2) {
    matmul_shared(pool, {{&w[0]->W, shared[0].data()}, {&w[1]->W, shared[1].data()}}, x.data(), n, s);
  } else {
    matmul_shared(pool, {{&w[0]->W, shared[0].data()}, {&w[1]->W, shared[1].data()}, {&w[2]->W, shared[2].data()}},
                  x.data(), n, s);
  }
  for (size_t j = 0; j < types.size(); ++j) {
    EXPECT_EQ(shared[j], alone[j]) << "product " << j << " n=" << n << (int8 ? " int8" : " float");
    const std::vector<double> ref = reference_product(w[j]->W, x, n);
    double err = 0, norm = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      err += (alone[j][i] - ref[i]) * (alone[j][i] - ref[i]);
      norm += ref[i] * ref[i];
    }
    EXPECT_LE(std::sqrt(err / norm), int8 ? 3e-2 : 1e-5) << "product " << j << " n=" << n;
  }
}

TEST(Matmul, SharedInputGroupEqualsSeparateProducts) {
  std::mt19937 rng(21);
  // decode, a short prompt, an AMX-sized prompt, one for the lane-major float GEMM
  for (int64_t n : {1, 5, 20, 30}) {
    for (bool int8 : {true, false}) {
      check_group({DType::Q4_K, DType::Q6_K, DType::Q4_K}, n, int8, rng);  // one pass (Q8_K activations)
      check_group({DType::Q4_K, DType::Q8_0}, n, int8, rng);               // mixed: separate passes
      check_group({DType::F16, DType::F16}, n, int8, rng);
      // Rows multiples of 16: the lane-major GEMM's packed input shared by the F16 products, and
      // packed again where the input is rounded again (in 8-bit mode, for BF16 and back).
      check_group({DType::F16, DType::F16}, n, int8, rng, true);
      check_group({DType::F16, DType::BF16, DType::F16}, n, int8, rng, true);
      check_group({DType::Q4_K, DType::Q6_K, DType::Q4_K}, n, int8, rng, true);  // Q4_K_M's Q, K, V in panels
      check_group({DType::Q8_0, DType::Q8_0}, n, int8, rng, true);
    }
  }
}

// A matrix repacked into decode panels multiplies like the row layout it came from: on the
// paths with panel kernels (decode; prompts of a type with dot_q_panel_rows) up to float
// rounding, on every other path (rows unpacked from the panels) exactly. Each type on its own,
// so that a missing kernel entry neither skips nor hides the others' checks.
class MatmulPanels : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulPanels, PanelLayoutGivesTheSameProducts) {
  constexpr int64_t kRows = 48, kCols = 512;
  const DType type = GetParam();
  // Q4_K, Q6_K and Q8_0 have panel decode kernels in the AVX2 set and in the AVX-512 set
  // (kernels/type_traits.cpp): an entry missing where the CPU (as LL3_CPU caps it) has the AVX2
  // set is a failure. Without it no matrix is packed into panels (LlamaModel::repack_panels).
  const bool expected = cpu_features().has_avx2_set();
  ASSERT_EQ(type_traits(type)->dot_q_panels != nullptr, expected) << dtype_name(type) << "'s dot_q_panels entry";
  if (!expected) GTEST_SKIP() << "no panel kernels without the AVX2 set (this CPU, or LL3_CPU caps it)";
  std::mt19937 rng(22 + static_cast<int>(type));
  ThreadPool pool(2);
  ASSERT_TRUE(kernels::panel_layout_exists(type, kRows, kCols));
  std::unique_ptr<TestWeight> w = random_weight(type, kRows, kCols, rng);
  TestWeight packed = {w->bytes, w->W};
  packed.W.data = packed.bytes.data();
  kernels::panel_pack_matrix(type, packed.bytes.data(), kRows, kCols);
  packed.W.panels = true;
  ASSERT_NE(packed.bytes, w->bytes);
  for (int64_t n : {1, 5, 20}) {
    for (bool int8 : {true, false}) {
      const std::vector<float> x = test::random_normal(static_cast<size_t>(n * kCols), rng());
      const TestScratch ts(pool, n, kCols, int8, w->W.row_bytes);
      const MatmulScratch& s = ts.s;
      std::vector<float> a(static_cast<size_t>(n * kRows)), b(a.size());
      matmul(pool, w->W, x.data(), a.data(), n, s);
      matmul(pool, packed.W, x.data(), b.data(), n, s);
      const std::string what = std::string(dtype_name(type)) + " n=" + std::to_string(n) + (int8 ? " int8" : " float");
      // Decode, and prompts where the type has a panel prompt kernel, run their own kernels.
      if (int8 && (n == 1 || type_traits(type)->dot_q_panel_rows != nullptr)) {
        for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-5 * std::fabs(a[i]) + 1e-5) << what << " row " << i;
      } else {
        EXPECT_EQ(a, b) << what;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulPanels, ::testing::Values(DType::Q4_K, DType::Q6_K, DType::Q8_0),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

}  // namespace
}  // namespace ll3

namespace ll3 {
namespace {

// The want of every integer-path product: the reference dot of each weight row (panels
// unpacked) with the reference activation quantization of each token.
std::vector<float> reference_int8(const WeightMatrix& W, const std::vector<float>& x, int64_t n) {
  const TypeTraits* ref = type_traits_ref(W.type);
  const TypeTraits* act = type_traits_ref(ref->vec_dot_type);
  std::vector<uint8_t> xq(dtype_row_bytes(ref->vec_dot_type, W.cols)), row(W.row_bytes);
  std::vector<float> y(static_cast<size_t>(n * W.rows));
  for (int64_t t = 0; t < n; ++t) {
    act->from_float_act(x.data() + t * W.cols, xq.data(), W.cols);
    for (int64_t r = 0; r < W.rows; ++r) y[t * W.rows + r] = ref->dot_q(W.row_in(r, row.data()), xq.data(), W.cols);
  }
  return y;
}

// One answer whatever the path (kernels/int_dot_order.h): every integer-path type, in the row
// layout and (where the type has it) the panel layout, for 1..24 tokens (decode, every
// remainder of the prompt kernels' passes of 4, runs of panels) on 1 and 2 threads, gives the
// reference's bits. Rows of 1, 2 and 3 K-quant blocks; heavy-tailed activations.
TEST(Matmul, EveryPathGivesTheReferenceBits) {
  std::mt19937 rng(23);
  const int64_t kTokens = 24;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (DType type : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                       DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
      for (auto [rows, cols] : {std::pair<int64_t, int64_t>{64, 256}, {48, 512}, {32, 768}}) {
        std::unique_ptr<TestWeight> w = random_weight(type, rows, cols, rng);
        std::vector<float> x = test::random_normal(static_cast<size_t>(kTokens * cols), rng());
        for (float& v : x) v = v * v * v;  // heavy tails: some blocks dominated by one value
        const std::vector<float> want = reference_int8(w->W, x, kTokens);
        TestWeight packed = {w->bytes, w->W};
        packed.W.data = packed.bytes.data();
        const bool panels = type_traits(type)->dot_q_panels != nullptr && kernels::panel_layout_exists(type, rows, cols);
        if (panels) {
          kernels::panel_pack_matrix(type, packed.bytes.data(), rows, cols);
          packed.W.panels = true;
        }
        const TestScratch ts(pool, kTokens, cols, true, w->W.row_bytes);
        MatmulScratch s = ts.s;
        s.bf16 = nullptr;  // the AMX path is opt-in (--amx-bf16) and rounds otherwise
        for (int64_t n = 1; n <= kTokens; ++n) {
          for (const WeightMatrix* W : {&w->W, &packed.W}) {
            std::vector<float> y(static_cast<size_t>(n * rows), -1.0f);
            matmul(pool, *W, x.data(), y.data(), n, s);
            ASSERT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float)))
                << dtype_name(type) << " " << rows << "x" << cols << " n=" << n << " threads=" << threads
                << (W->panels ? " panels" : " rows");
          }
        }
      }
    }
  }
}

// The float path likewise (kernels/float_dot_order.h): F32, F16 and BF16 weights, and a
// quantized type with float activations, decode and prompt (the dot-form GEMM, and from
// kLaneMinTokens tokens the lane-major one where rows are a multiple of 16: blocks of 32 and
// of 16 rows, tiles of 12 tokens and partial ones), the reference's bits; in 8-bit mode
// F16 / BF16 take activations rounded to their type. BF16 in its pair order: deinterleaved
// where the columns are a multiple of 32 (in 8-bit mode the lane-major GEMM then runs
// `vdpbf16ps`), one dot per output elsewhere.
TEST(Matmul, FloatPathGivesTheReferenceBits) {
  std::mt19937 rng(24);
  const int64_t kTokens = 38;
  ThreadPool pool(2);
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q4_K}) {
    for (bool int8 : {false, true}) {
      if (int8 && type == DType::Q4_K) continue;  // the integer path: above
      for (auto [rows, cols] :
           {std::pair<int64_t, int64_t>{40, 256}, {48, 256}, {48, 200}, {33, 200}, {17, 777}, {64, 9}}) {
        if (type == DType::Q4_K && cols % 256 != 0) continue;
        std::unique_ptr<TestWeight> w = random_weight(type, rows, cols, rng);
        const std::vector<float> x = test::random_normal(static_cast<size_t>(kTokens * cols), rng());
        const TypeTraits* f32 = type_traits_ref(DType::F32);
        std::vector<float> want(static_cast<size_t>(kTokens * rows)), wf(cols), xa(cols);
        for (int64_t t = 0; t < kTokens; ++t) {
          for (int64_t i = 0; i < cols; ++i) {
            const float v = x[t * cols + i];
            xa[i] = !int8 || type == DType::F32 ? v
                    : type == DType::F16        ? f16_to_f32(f32_to_f16(v))
                                                : bf16_to_f32(f32_to_bf16(v));
          }
          for (int64_t r = 0; r < rows; ++r) {
            if (type == DType::BF16) {  // the pair order (kernels/float_dot_order.h)
              want[t * rows + r] = type_traits_ref(type)->dot_f32(w->W.row(r), xa.data(), cols);
              continue;
            }
            type_traits_ref(type)->to_float(w->W.row(r), wf.data(), cols);
            want[t * rows + r] = f32->dot_f32(wf.data(), xa.data(), cols);
          }
        }
        const TestScratch ts(pool, kTokens, cols, int8, w->W.row_bytes);
        MatmulScratch s = ts.s;
        s.bf16 = nullptr;
        for (int64_t n = 1; n <= kTokens; ++n) {
          std::vector<float> y(static_cast<size_t>(n * rows), -1.0f);
          matmul(pool, w->W, x.data(), y.data(), n, s);
          ASSERT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float)))
              << dtype_name(type) << " " << rows << "x" << cols << " n=" << n << (int8 ? " int8" : " float");
        }
      }
    }
  }
}

}  // namespace
}  // namespace ll3
