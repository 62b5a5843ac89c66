// AVX2 float GEMM tile kernel (see kernels/gemm_f32.h), every output in the order of
// kernels/float_dot_order.h: the prompt path of F32 / F16 / BF16 weights (and of quantized
// ones with float activations) on CPUs without AVX-512.
//
// An output's 16 lanes are two 8-lane halves, lanes 0-7 and 8-15, whose fma chains never meet
// until the final tree (hsum8(lo + hi)). So each half of a tile is its own GEMM: a 2-row x
// 6-token tile of one half keeps 12 accumulators, 2 weight vectors and 1 activation vector in
// the 16 ymm registers, 8 loads per 12 FMAs (one dot product per output would load 2 per FMA).
// k runs in blocks of kKc columns for a group of kGroup tokens, the tiles' accumulators parked
// between blocks, so that a block's activations and the rows of one tile stay in L1 while both
// halves of every tile pass over them. One Zen 4 core, LL3_CPU=avx2 `gemm_f32_bench
// --benchmark_filter='gemm_f32_block/(2048|8192)/128/16/16'`, 3 alternated runs: kKc 256
// 56-82 / 73-80 GFLOP/s, 512 83-85 / 75-80, 1024 62-77 / 70-74 (106 peak).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/vec_f32.h"
#include "kernels/float_kernels.h"
#include "kernels/gemm_f32.h"
#include "kernels/quant_simd_unpack.h"  // LL3_UNROLL

namespace ll3::kernels::avx2 {

namespace {

constexpr int kR = 2;  // weight rows per tile
constexpr int kT = 6;  // activation rows per tile
constexpr int64_t kKc = 512;
constexpr int kGroup = 4 * kT;
constexpr int kMaxRows = 16;
constexpr int64_t kLd = kKc + 16;  // floats between the copied rows of a block

// Half h of a kR x kT tile over the kc columns of a block (a multiple of 16), its
// accumulators taken from and left in park (park[r * kT + t]); weight rows ldw apart,
// activation rows ldx apart.
void half_kc(const float* w, int64_t ldw, const float* x, int64_t ldx, __m256* park, int h, int64_t kc) {
  __m256 acc[kR][kT];
  float* pk = reinterpret_cast<float*>(park);
  LL3_UNROLL for (int r = 0; r < kR; ++r)
    LL3_UNROLL for (int t = 0; t < kT; ++t) acc[r][t] = _mm256_load_ps(pk + 8 * (r * kT + t));
  for (int64_t i = 8 * h; i < kc; i += 16) {  // this half's 8 columns of each group of 16
    __m256 wv[kR];
    LL3_UNROLL for (int r = 0; r < kR; ++r) wv[r] = _mm256_load_ps(w + r * ldw + i);
    LL3_UNROLL for (int t = 0; t < kT; ++t) {
      const __m256 xv = _mm256_load_ps(x + t * ldx + i);
      LL3_UNROLL for (int r = 0; r < kR; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  LL3_UNROLL for (int r = 0; r < kR; ++r)
    LL3_UNROLL for (int t = 0; t < kT; ++t) _mm256_store_ps(pk + 8 * (r * kT + t), acc[r][t]);
}

// Columns [i0, i1) of m rows (ld apart) into b (kLd apart), zero up to the next multiple of 16:
// zeros leave the lanes as they are (fma(0, 0, a) = a; the lanes are never -0).
void copy_block(const float* src, size_t ld, int64_t m, int64_t i0, int64_t i1, float* b) {
  const int64_t kc = i1 - i0, padded = (kc + 15) / 16 * 16;
  for (int64_t r = 0; r < m; ++r) {
    std::memcpy(b + r * kLd, src + r * ld + i0, static_cast<size_t>(kc) * sizeof(float));
    std::fill(b + r * kLd + kc, b + r * kLd + padded, 0.0f);
  }
}

// Whether rows ld floats apart can be read in place: aligned for the loads, k whole vectors,
// and not 4 KB apart (rows of 4 KB multiples all map to the same L1 sets). The matmul hands
// rows padded to that (kernels/matmul.h, float_input_ld), saving a copy of every block per
// row block: the x copy alone was a fifth of an F16 prompt's time.
bool in_place(const float* p, size_t ld, int64_t k) {
  return reinterpret_cast<uintptr_t>(p) % 32 == 0 && ld % 8 == 0 && ld % 1024 != 0 && k % 16 == 0;
}

// Rows: a multiple of kR, at most kMaxRows; tokens [0, n_full), a multiple of kT.
void gemm_blocked(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, int64_t rows,
                  int64_t n_full, int64_t k) {
  const bool w_in_place = in_place(w, ldw, k), x_in_place = in_place(x, ldx, k);
  // park[((rt * (kGroup / kT) + tt) * 2 + h) * kR * kT + r * kT + t]: half h of the
  // accumulators of row tile rt, token tile tt of the group.
  constexpr int kTile = kR * kT;
  alignas(32) __m256 park[(kMaxRows / kR) * (kGroup / kT) * 2 * kTile];
  // The block's weights and activations where they cannot be read in place, copied so that
  // their rows do not share L1 sets: 50 -> 64 GFLOP/s on one Zen 4 core at k = 2048.
  alignas(32) float wb[kMaxRows * kLd], xb[kGroup * kLd];
  for (int64_t g0 = 0; g0 < n_full; g0 += kGroup) {
    const int tiles = static_cast<int>(std::min<int64_t>(kGroup, n_full - g0) / kT);
    std::fill(park, park + (rows / kR) * (kGroup / kT) * 2 * kTile, _mm256_setzero_ps());
    for (int64_t i0 = 0; i0 < k; i0 += kKc) {
      const int64_t i1 = std::min(k, i0 + kKc), kc = (i1 - i0 + 15) / 16 * 16;
      if (!w_in_place) copy_block(w, ldw, rows, i0, i1, wb);
      if (!x_in_place) copy_block(x + g0 * ldx, ldx, tiles * kT, i0, i1, xb);
      const float* wk = w_in_place ? w + i0 : wb;
      const float* xk = x_in_place ? x + g0 * ldx + i0 : xb;
      const int64_t lw = w_in_place ? static_cast<int64_t>(ldw) : kLd, lx = x_in_place ? static_cast<int64_t>(ldx) : kLd;
      for (int tt = 0; tt < tiles; ++tt) {
        for (int64_t rt = 0; rt < rows / kR; ++rt) {
          __m256* p = park + (rt * (kGroup / kT) + tt) * 2 * kTile;
          for (int h = 0; h < 2; ++h) half_kc(wk + rt * kR * lw, lw, xk + tt * kT * lx, lx, p + h * kTile, h, kc);
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
