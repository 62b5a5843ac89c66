// AVX2 float GEMM tile kernel (see kernels/gemm_f32.h), every output in the order of
// kernels/float_dot_order.h: the prompt path of F32 / F16 / BF16 weights (and of quantized
// ones with float activations) on CPUs without AVX-512.
//
// An output's 16 lanes are two 8-lane halves, lanes 0-7 and 8-15, whose fma chains never meet
// until the final tree (hsum8(lo + hi)). So each half of a tile is its own GEMM: a 2-row x
// 6-token tile of one half keeps 12 accumulators, 2 weight vectors and 1 activation vector in
// the 16 ymm registers, 8 loads per 12 FMAs (one dot product per output would load 2 per FMA).
// k runs in blocks of kKc columns for a group of kGroup tokens, the tiles' accumulators parked
// between blocks, so that a block's weight rows and activations stay in L1 while both halves
// of every tile pass over them.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/vec_f32.h"
#include "kernels/float_kernels.h"
#include "kernels/gemm_f32.h"
#include "kernels/quant_simd_unpack.h"  // LL3_UNROLL

namespace ll3::kernels::avx2 {

namespace {

constexpr int kR = 2;  // weight rows per tile
constexpr int kT = 6;  // activation rows per tile
constexpr int64_t kKc = 256;
constexpr int kGroup = 4 * kT;
constexpr int kMaxRows = 16;

// The lanes of the 8 columns from i that lie before k, as a maskload mask.
inline __m256i half_mask(int64_t i, int64_t k) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(k - i, 8))), idx);
}

// Half h of a kR x kT tile over columns [i0, i1) of k, its accumulators taken from and left
// in park (park[r * kT + t]); a last partial group of 16 only when i1 == k.
void half_kc(const float* w, size_t ldw, const float* x, size_t ldx, __m256* park, int h, int64_t i0, int64_t i1,
             int64_t k) {
  __m256 acc[kR][kT];
  float* pk = reinterpret_cast<float*>(park);
  LL3_UNROLL for (int r = 0; r < kR; ++r)
    LL3_UNROLL for (int t = 0; t < kT; ++t) acc[r][t] = _mm256_load_ps(pk + 8 * (r * kT + t));
  int64_t g = i0;  // groups of 16 columns; this half's 8 start at g + 8 h
  for (; g + 16 <= i1; g += 16) {
    const int64_t i = g + 8 * h;
    __m256 wv[kR];
    LL3_UNROLL for (int r = 0; r < kR; ++r) wv[r] = _mm256_loadu_ps(w + r * ldw + i);
    LL3_UNROLL for (int t = 0; t < kT; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * ldx + i);
      LL3_UNROLL for (int r = 0; r < kR; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (const int64_t i = g + 8 * h; i < i1) {
    // The row's last partial group (i1 == k): zeros past k leave the lanes as they are.
    const __m256i m = half_mask(i, k);
    __m256 wv[kR];
    LL3_UNROLL for (int r = 0; r < kR; ++r) wv[r] = _mm256_maskload_ps(w + r * ldw + i, m);
    LL3_UNROLL for (int t = 0; t < kT; ++t) {
      const __m256 xv = _mm256_maskload_ps(x + t * ldx + i, m);
      LL3_UNROLL for (int r = 0; r < kR; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  LL3_UNROLL for (int r = 0; r < kR; ++r)
    LL3_UNROLL for (int t = 0; t < kT; ++t) _mm256_store_ps(pk + 8 * (r * kT + t), acc[r][t]);
}

// Rows: a multiple of kR, at most kMaxRows; tokens [0, n_full), a multiple of kT.
void gemm_blocked(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, int64_t rows,
                  int64_t n_full, int64_t k) {
  // park[((rt * (kGroup / kT) + tt) * 2 + h) * kR * kT + r * kT + t]: half h of the
  // accumulators of row tile rt, token tile tt of the group.
  constexpr int kTile = kR * kT;
  alignas(32) __m256 park[(kMaxRows / kR) * (kGroup / kT) * 2 * kTile];
  for (int64_t g0 = 0; g0 < n_full; g0 += kGroup) {
    const int tiles = static_cast<int>(std::min<int64_t>(kGroup, n_full - g0) / kT);
    std::fill(park, park + (rows / kR) * (kGroup / kT) * 2 * kTile, _mm256_setzero_ps());
    for (int64_t i0 = 0; i0 < k; i0 += kKc) {
      const int64_t i1 = std::min(k, i0 + kKc);
      for (int tt = 0; tt < tiles; ++tt) {
        const float* xt = x + (g0 + tt * kT) * ldx;
        for (int64_t rt = 0; rt < rows / kR; ++rt) {
          __m256* p = park + (rt * (kGroup / kT) + tt) * 2 * kTile;
          for (int h = 0; h < 2; ++h) half_kc(w + rt * kR * ldw, ldw, xt, ldx, p + h * kTile, h, i0, i1, k);
        }
      }
    }
    for (int tt = 0; tt < tiles; ++tt) {
      for (int64_t rt = 0; rt < rows / kR; ++rt) {
        const __m256* p = park + (rt * (kGroup / kT) + tt) * 2 * kTile;
        for (int t = 0; t < kT; ++t)
          for (int r = 0; r < kR; ++r)
            y[(g0 + tt * kT + t) * ldy + rt * kR + r] = hsum8(_mm256_add_ps(p[r * kT + t], p[kTile + r * kT + t]));
      }
    }
  }
}

}  // namespace

void gemm_f32(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, int64_t rows,
              int64_t n, int64_t k) {
  const int64_t n_full = rows <= kMaxRows && rows % kR == 0 ? n - n % kT : 0;
  if (n_full > 0) gemm_blocked(w, ldw, x, ldx, y, ldy, rows, n_full, k);
  for (int64_t t = n_full; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) y[t * ldy + r] = f32_dot(w + r * ldw, x + t * ldx, k);
}

}  // namespace ll3::kernels::avx2
