// AVX-512 float GEMM tile kernel (see kernels/gemm_f32.h), every output in the order of
// kernels/float_dot_order.h.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/vec_f32.h"
#include "kernels/quant_simd_unpack.h"  // LL3_UNROLL
#include "kernels/gemm_f32.h"

namespace ll3::kernels::avx512 {

namespace {

constexpr int kR = 4;  // weight rows per tile
constexpr int kT = 6;  // activation rows per tile: 24 accumulators + 4 weights + 1 activation

// One row x one activation row, for the edges of the grid.
inline float dot(const float* a, const float* b, int64_t k) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  if (i < k) {
    const __mmask16 m = static_cast<__mmask16>((1u << (k - i)) - 1);
    acc = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc, m);
  }
  return reduce16(acc);
}

// The k-blocked version for long rows: groups of kGroup tokens, and k in blocks of kKc, so that a
// block's weight rows (up to 16 x kKc floats) and the group's activations (kGroup x kKc) stay in
// L1/L2 while every tile of the group passes over them; the tiles' 16-lane accumulators are
// parked in a buffer between k blocks. Each output still sums its lanes over k in order, so the
// result is the same bits as tile() (kernels/float_dot_order.h). Rows: a multiple of kR.
constexpr int64_t kKc = 256;
constexpr int kGroup = 4 * kT;
constexpr int kMaxRows = 16;

// A kR x kT tile over columns [i0, i1) of k, its accumulators taken from and left in park
// (park[r * kT + t]); a last partial group of 16 only when i1 == k.
void tile_kc(const float* w, size_t ldw, const float* x, size_t ldx, __m512* park, int64_t i0, int64_t i1,
             int64_t k) {
  // Every loop over the tile unrolled, so that acc lives in registers: otherwise clang keeps it
  // on the stack, copied in and out with memcpy calls (12% of the kernel's time).
  __m512 acc[kR][kT];
  float* pk = reinterpret_cast<float*>(park);
  LL3_UNROLL for (int r = 0; r < kR; ++r)
    LL3_UNROLL for (int t = 0; t < kT; ++t) acc[r][t] = _mm512_load_ps(pk + 16 * (r * kT + t));
  int64_t i = i0;
  for (; i + 16 <= i1; i += 16) {
    __m512 wv[kR];
    LL3_UNROLL for (int r = 0; r < kR; ++r) wv[r] = _mm512_loadu_ps(w + r * ldw + i);
    LL3_UNROLL for (int t = 0; t < kT; ++t) {
      const __m512 xv = _mm512_loadu_ps(x + t * ldx + i);
      LL3_UNROLL for (int r = 0; r < kR; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (i < i1) {  // the row's last partial group (i1 == k)
    const __mmask16 m = static_cast<__mmask16>((1u << (k - i)) - 1);
    __m512 wv[kR];
    LL3_UNROLL for (int r = 0; r < kR; ++r) wv[r] = _mm512_maskz_loadu_ps(m, w + r * ldw + i);
    LL3_UNROLL for (int t = 0; t < kT; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + t * ldx + i);
      LL3_UNROLL for (int r = 0; r < kR; ++r) acc[r][t] = _mm512_mask3_fmadd_ps(wv[r], xv, acc[r][t], m);
    }
  }
  LL3_UNROLL for (int r = 0; r < kR; ++r)
    LL3_UNROLL for (int t = 0; t < kT; ++t) _mm512_store_ps(pk + 16 * (r * kT + t), acc[r][t]);
}

// A full kR x kT tile over all of k.
inline void tile(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, int64_t k) {
  __m512 acc[kR * kT];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  tile_kc(w, ldw, x, ldx, acc, 0, k, k);
  for (int t = 0; t < kT; ++t)
    for (int r = 0; r < kR; ++r) y[t * ldy + r] = reduce16(acc[r * kT + t]);
}

void gemm_blocked(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, int64_t rows,
                  int64_t n_full, int64_t k) {
  // park[(rt * (kGroup / kT) + tt) * kR * kT + r * kT + t]: the accumulators of row tile rt,
  // token tile tt of the group.
  alignas(64) __m512 park[(kMaxRows / kR) * (kGroup / kT) * kR * kT];
  for (int64_t g0 = 0; g0 < n_full; g0 += kGroup) {
    const int tiles = static_cast<int>(std::min<int64_t>(kGroup, n_full - g0) / kT);
    for (int64_t j = 0; j < (rows / kR) * (kGroup / kT) * kR * kT; ++j) park[j] = _mm512_setzero_ps();
    for (int64_t i0 = 0; i0 < k; i0 += kKc) {
      const int64_t i1 = std::min(k, i0 + kKc);
      for (int tt = 0; tt < tiles; ++tt) {
        const float* xt = x + (g0 + tt * kT) * ldx;
        for (int64_t rt = 0; rt < rows / kR; ++rt) {
          tile_kc(w + rt * kR * ldw, ldw, xt, ldx, park + (rt * (kGroup / kT) + tt) * kR * kT, i0, i1, k);
        }
      }
    }
    for (int tt = 0; tt < tiles; ++tt) {
      for (int64_t rt = 0; rt < rows / kR; ++rt) {
        const __m512* p = park + (rt * (kGroup / kT) + tt) * kR * kT;
        for (int t = 0; t < kT; ++t)
          for (int r = 0; r < kR; ++r) y[(g0 + tt * kT + t) * ldy + rt * kR + r] = reduce16(p[r * kT + t]);
      }
    }
  }
}

}  // namespace

void gemm_f32(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, int64_t rows,
              int64_t n, int64_t k) {
  if (k >= 2 * kKc && rows <= kMaxRows && rows % kR == 0 && n >= kT) {
    const int64_t n_full = n - n % kT;
    gemm_blocked(w, ldw, x, ldx, y, ldy, rows, n_full, k);
    for (int64_t t0 = n_full; t0 < n; ++t0)
      for (int64_t r = 0; r < rows; ++r) y[t0 * ldy + r] = dot(w + r * ldw, x + t0 * ldx, k);
    return;
  }
  int64_t r0 = 0;
  for (; r0 + kR <= rows; r0 += kR) {
    int64_t t0 = 0;
    for (; t0 + kT <= n; t0 += kT) tile(w + r0 * ldw, ldw, x + t0 * ldx, ldx, y + t0 * ldy + r0, ldy, k);
    for (; t0 < n; ++t0)
      for (int64_t r = r0; r < r0 + kR; ++r) y[t0 * ldy + r] = dot(w + r * ldw, x + t0 * ldx, k);
  }
  for (; r0 < rows; ++r0)
    for (int64_t t = 0; t < n; ++t) y[t * ldy + r0] = dot(w + r0 * ldw, x + t * ldx, k);
}

}  // namespace ll3::kernels::avx512
