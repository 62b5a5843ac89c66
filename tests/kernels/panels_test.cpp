// The panel layout (kernels/panels.h): packing 16 rows and unpacking any one of them gives back
// its bytes exactly, and the decode kernels over panels equal the reference integer dot of each
// row (the int32 sums are exact; only the float steps may round differently), for every bit
// pattern of the quants (random bytes), over several panels and past one prepared activation
// segment.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/panels.h"
#include "quant_test_rows.h"
#include "test_support.h"

namespace ll3 {
namespace {

using kernels::kPanelRows;

struct Case {
  DType type;
  std::vector<int> f16_fields;  // byte offsets of the f16 fields of a block
};

const Case kCases[] = {
    {DType::Q4_K, {0, 2}},
    {DType::Q6_K, {208}},
    {DType::Q8_0, {0}},
};

std::vector<uint8_t> random_rows(const Case& c, int64_t rows, int64_t cols, std::mt19937& rng, bool quantized) {
  std::vector<uint8_t> out;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<uint8_t> row = test::random_quant_row(c.type, c.f16_fields, cols, rng, quantized);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

TEST(Panels, LayoutExistsOnlyForWholePanelsAndUnits) {
  EXPECT_TRUE(kernels::panel_layout_exists(DType::Q4_K, 32, 2048));
  EXPECT_FALSE(kernels::panel_layout_exists(DType::Q4_K, 24, 2048));   // not whole panels
  EXPECT_TRUE(kernels::panel_layout_exists(DType::Q6_K, 16, 512));
  EXPECT_FALSE(kernels::panel_layout_exists(DType::Q6_K, 16, 768));    // odd block count
  EXPECT_TRUE(kernels::panel_layout_exists(DType::Q8_0, 16, 64));
  EXPECT_FALSE(kernels::panel_layout_exists(DType::Q8_0, 16, 96));
  EXPECT_FALSE(kernels::panel_layout_exists(DType::Q4_0, 16, 256));    // no panel format
  EXPECT_FALSE(kernels::panel_layout_exists(DType::F16, 16, 256));
}

TEST(Panels, UnpackGivesBackEveryRow) {
  std::mt19937 rng(5);
  for (const Case& c : kCases) {
    const int64_t cols = 1024;
    const size_t rb = dtype_row_bytes(c.type, cols);
    const std::vector<uint8_t> rows = random_rows(c, kPanelRows, cols, rng, false);
    std::vector<uint8_t> panel(rows.size());
    kernels::panel_pack(c.type, rows.data(), panel.data(), cols);
    EXPECT_NE(panel, rows) << dtype_name(c.type);
    std::vector<uint8_t> row(rb);
    for (int r = 0; r < kPanelRows; ++r) {
      kernels::panel_unpack_row(c.type, panel.data(), r, row.data(), cols);
      EXPECT_TRUE(std::equal(row.begin(), row.end(), rows.begin() + r * rb)) << dtype_name(c.type) << " row " << r;
    }
    // All 16 at once (the transposing path on AVX-512), into rows with a gap between them.
    const size_t stride = rb + 64;
    std::vector<uint8_t> all(kPanelRows * stride, 0xAB);
    kernels::panel_unpack(c.type, panel.data(), all.data(), stride, cols);
    for (int r = 0; r < kPanelRows; ++r) {
      EXPECT_TRUE(std::equal(rows.begin() + r * rb, rows.begin() + (r + 1) * rb, all.begin() + r * stride))
          << dtype_name(c.type) << " row " << r << " (whole panel)";
      EXPECT_TRUE(std::all_of(all.begin() + r * stride + rb, all.begin() + (r + 1) * stride, [](uint8_t b) { return b == 0xAB; }))
          << dtype_name(c.type) << " wrote past row " << r;
    }
  }
}

TEST(Panels, DecodeKernelsEqualTheReferenceDot) {
  std::mt19937 rng(6);
  for (const Case& c : kCases) {
    const TypeTraits* tr = type_traits(c.type);
    if (tr->dot_q_panels == nullptr) {
      GTEST_SKIP() << "no panel kernels on this CPU (they need AVX-512 VNNI)";
    }
    const TypeTraits* act = type_traits(tr->vec_dot_type);
    // 2048: the 1B shapes; 17408 / 16448: past one prepared activation segment.
    for (int64_t cols : {int64_t{512}, int64_t{2048}, c.type == DType::Q8_0 ? int64_t{16448} : int64_t{17408}}) {
      for (bool quantized : {true, false}) {
        const int64_t rows = 3 * kPanelRows;
        const size_t rb = dtype_row_bytes(c.type, cols);
        const std::vector<uint8_t> w = random_rows(c, rows, cols, rng, quantized);
        std::vector<uint8_t> panels(w.size());
        for (int64_t p = 0; p < rows / kPanelRows; ++p) {
          kernels::panel_pack(c.type, w.data() + p * kPanelRows * rb, panels.data() + p * kPanelRows * rb, cols);
        }
        const std::vector<float> x = test::random_normal(static_cast<size_t>(cols), rng());
        std::vector<uint8_t> xq(dtype_row_bytes(tr->vec_dot_type, cols));
        act->from_float(x.data(), xq.data(), cols);
        std::vector<float> y(static_cast<size_t>(rows), NAN);
        tr->dot_q_panels(panels.data(), rows / kPanelRows, xq.data(), cols, y.data());
        for (int64_t r = 0; r < rows; ++r) {
          const float ref = type_traits_ref(c.type)->dot_q(w.data() + r * rb, xq.data(), cols);
          EXPECT_NEAR(y[r], ref, 2e-5 * std::fabs(ref) + 1e-4)
              << dtype_name(c.type) << " cols " << cols << " row " << r << (quantized ? " quantized" : " random bytes");
        }
      }
    }
  }
}

}  // namespace
}  // namespace ll3
