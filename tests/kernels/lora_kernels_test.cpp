// The LoRA expansion (kernels/lora_kernels.h) against its scalar reference: every version the
// CPU has gives the reference's bits, for row counts around its blocks of 4, ranks from 1 to
// 512, column ranges that end inside a panel and ranges inside wider outputs; and the
// reference itself against the definition in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/lora_kernels.h"

namespace ll3 {
namespace {

struct Case {
  int64_t rows, rank, out, j0, j1;  // j0 a multiple of the panel
};

struct Data {
  std::vector<float> b, panels, u, y;  // b: (out, rank)
  std::vector<float*> y_rows;
};

Data make(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Data d;
  d.b.resize(static_cast<size_t>(c.out * c.rank));
  d.u.resize(static_cast<size_t>(c.rows * c.rank));
  d.y.resize(static_cast<size_t>(c.rows * c.out));
  for (float& v : d.b) v = nd(rng);
  for (float& v : d.u) v = nd(rng);
  for (float& v : d.y) v = nd(rng);
  d.panels.assign(static_cast<size_t>(kernels::lora_panel_floats(c.out, c.rank)), 0.0f);
  for (int64_t j = 0; j < c.out; ++j) {
    for (int64_t k = 0; k < c.rank; ++k) d.panels[static_cast<size_t>(kernels::lora_panel_at(j, k, c.rank))] = d.b[static_cast<size_t>(j * c.rank + k)];
  }
  // Rows of y in another order than u's, as the runner's gathered rows are.
  for (int64_t r = 0; r < c.rows; ++r) d.y_rows.push_back(&d.y[static_cast<size_t>((c.rows - 1 - r) * c.out)]);
  return d;
}

const Case kCases[] = {{1, 16, 2048, 0, 2048}, {4, 16, 512, 0, 512},  {5, 8, 100, 16, 97},  {9, 1, 64, 0, 64},
                       {3, 33, 300, 32, 300},  {16, 64, 1024, 256, 512}, {7, 16, 40, 0, 40}, {2, 512, 48, 16, 37}};

void expect_reference_bits(kernels::LoraExpandFn fn, const char* what) {
  uint32_t seed = 1;
  for (const Case& c : kCases) {
    Data want = make(c, seed), got = make(c, seed);
    ++seed;
    kernels::ref::lora_expand(want.panels.data(), c.rank, want.u.data(), c.rows, 0.37f, want.y_rows.data(), c.j0, c.j1);
    fn(got.panels.data(), c.rank, got.u.data(), c.rows, 0.37f, got.y_rows.data(), c.j0, c.j1);
    EXPECT_EQ(std::memcmp(want.y.data(), got.y.data(), want.y.size() * sizeof(float)), 0)
        << what << ": rows " << c.rows << " rank " << c.rank << " columns [" << c.j0 << ", " << c.j1 << ")";
  }
}

TEST(LoraKernels, ReferenceIsTheDefinitionAndLeavesOtherColumns) {
  const Case c{5, 16, 100, 16, 97};
  Data d = make(c, 9);
  const std::vector<float> y0 = d.y;
  kernels::ref::lora_expand(d.panels.data(), c.rank, d.u.data(), c.rows, -1.5f, d.y_rows.data(), c.j0, c.j1);
  for (int64_t r = 0; r < c.rows; ++r) {
    const int64_t row = c.rows - 1 - r;  // y_rows' order
    for (int64_t j = 0; j < c.out; ++j) {
      const size_t at = static_cast<size_t>(row * c.out + j);
      if (j < c.j0 || j >= c.j1) {
        EXPECT_EQ(d.y[at], y0[at]) << "column " << j << " is outside the range";
        continue;
      }
      double sum = 0;
      for (int64_t k = 0; k < c.rank; ++k) sum += double(d.u[static_cast<size_t>(r * c.rank + k)]) * d.b[static_cast<size_t>(j * c.rank + k)];
      EXPECT_NEAR(d.y[at], y0[at] - 1.5 * sum, 1e-4) << "row " << r << " column " << j;
    }
  }
}

TEST(LoraKernels, Avx2GivesTheReferenceBits) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2 set on this CPU (or LL3_CPU caps it)";
  expect_reference_bits(kernels::avx2::lora_expand, "avx2");
}

TEST(LoraKernels, Avx512GivesTheReferenceBits) {
  if (!cpu_features().has_avx512_set()) GTEST_SKIP() << "no AVX-512 on this CPU (or LL3_CPU caps it)";
  expect_reference_bits(kernels::avx512::lora_expand, "avx512");
}

TEST(LoraKernels, DispatchedGivesTheReferenceBits) { expect_reference_bits(kernels::lora_expand(), "dispatched"); }

}  // namespace
}  // namespace ll3
