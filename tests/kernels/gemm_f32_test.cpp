// The float GEMM tile kernel against its scalar reference, at sizes that exercise full tiles,
// edge rows/tokens and partial 16-float steps.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <random>

#include "core/aligned.h"
#include "core/cpu_features.h"
#include "kernels/gemm_f32.h"

namespace ll3 {
namespace {

// pad_w / pad_x: the floats between rows past k. 3 and 5 (the default) leave rows unaligned,
// so the kernels copy them; 16 with k a multiple of 16 is how the matmul hands them
// (float_input_ld), read in place by the AVX2 kernel.
void check(kernels::GemmF32Fn fn, int64_t rows, int64_t n, int64_t k, std::mt19937& rng, int64_t pad_w = 3,
           int64_t pad_x = 5) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t ldw = static_cast<size_t>(k + pad_w), ldx = static_cast<size_t>(k + pad_x), ldy = static_cast<size_t>(rows + 2);
  AlignedVector<float> w(rows * ldw), x(n * ldx), y(n * ldy, -7.0f), yr(n * ldy, -7.0f);
  for (float& v : w) v = nd(rng);
  for (float& v : x) v = nd(rng);
  fn(w.data(), ldw, x.data(), ldx, y.data(), ldy, rows, n, k);
  kernels::ref::gemm_f32(w.data(), ldw, x.data(), ldx, yr.data(), ldy, rows, n, k);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < static_cast<int64_t>(ldy); ++r) {
      const float a = y[t * ldy + r], b = yr[t * ldy + r];
      if (r >= rows) {
        ASSERT_EQ(a, -7.0f) << "wrote outside the block";  // padding untouched
      } else {
        // The order of kernels/float_dot_order.h, so the reference's bits.
        ASSERT_EQ(a, b) << rows << "x" << n << "x" << k << " at " << t << "," << r;
      }
    }
  }
}

TEST(GemmF32, Avx512MatchesReference) {
  if (!cpu_features().has_avx512_set()) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(3);
  for (int64_t rows : {1, 3, 4, 5, 16, 17})
    for (int64_t n : {1, 2, 6, 7, 13})
      for (int64_t k : {1, 15, 16, 17, 64, 100, 256}) check(kernels::avx512::gemm_f32, rows, n, k, rng);
  // The k-blocked form: long rows, groups of tokens with partial tiles, a partial last group.
  for (int64_t rows : {4, 16})
    for (int64_t n : {6, 25, 31})
      for (int64_t k : {512, 777}) check(kernels::avx512::gemm_f32, rows, n, k, rng);
}

TEST(GemmF32, Avx2MatchesReference) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(5);
  for (int64_t rows : {1, 2, 3, 16, 17})
    for (int64_t n : {1, 6, 7, 13, 25, 31})
      for (int64_t k : {1, 7, 8, 9, 15, 16, 17, 100, 256, 600, 777}) check(kernels::avx2::gemm_f32, rows, n, k, rng);
  // Rows read in place (padded by a cache line): both operands, or one of them copied; k over
  // several blocks, and a 4 KB row stride, which is copied.
  for (int64_t k : {512, 1040, 2048})
    for (auto [pw, px] : {std::pair{16, 16}, {16, 5}, {3, 16}, {0, 16}}) check(kernels::avx2::gemm_f32, 16, 31, k, rng, pw, px);
}

TEST(GemmF32, DispatchedMatchesReference) {
  std::mt19937 rng(4);
  for (int64_t rows : {4, 9})
    for (int64_t n : {6, 11}) check(kernels::gemm_f32(), rows, n, 96, rng);
}

}  // namespace
}  // namespace ll3
