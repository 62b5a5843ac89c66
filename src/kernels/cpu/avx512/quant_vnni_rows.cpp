// AVX-512 VNNI kernels of the K-quants, Q8_0 and Q4_0, for one activation row
// (dot_q, decoding) and for several (dot_q_rows, prompt processing). A weight block is unpacked
// into registers once and then multiplied into up to four activation rows, so the unpacking cost
// is shared across the batch. Products are summed exactly in int32 (vpdpbusd), scaled per
// sub-block in int32 (vpdpwssd: the sub-block sums are below 2^15 and the scale sits in the low
// int16 of each lane), reduced to the block's exact sum and scaled in float once per block, in
// the order of kernels/int_dot_order.h (bit-identical to the reference and the panel kernels).
#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cpu/int_sums.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/row_passes.h"
#include "kernels/cpu/vec_f32.h"
#include "kernels/int_dot_order.h"
#include "kernels/quant_kernels.h"
#include "kernels/quant_simd_unpack.h"

namespace ll3::kernels::avx512 {

using namespace ll3::quant;

namespace {

// vpermd indices: chunk k of a Q4_K block takes scale 2k in lanes 0-7 and 2k+1 in lanes 8-15.
alignas(64) constexpr int32_t kQ4KScaleIdx[4][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
    {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7}};
// Chunk c of a Q6_K block: lane l takes the scale of group 4c + l / 4.
alignas(64) constexpr int32_t kQ6KScaleIdx[4][16] = {
    {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3},
    {4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7},
    {8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11},
    {12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15}};

inline __m512i load_idx(const int32_t* p) { return _mm512_load_si512(p); }

// ---- Q4_K / Q5_K x Q8_K ---------------------------------------------------------------------
// Q5_K is Q4_K plus a fifth bit per weight (qh): chunk k's low half takes bit 2k of qh[l], its
// high half bit 2k+1, added as 16 through a byte mask.

template <class Block, int NX>
void q45_k_rows(const void* row, const void* xq, size_t stride, int64_t n, float* y, size_t y_stride) {
  constexpr bool kQ5 = std::is_same_v<Block, BlockQ5_K>;
  const Block* w = static_cast<const Block*>(row);
  const __m512i nib = _mm512_set1_epi8(0x0F);
  const __m512i shifts = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
  float acc[NX] = {}, accm[NX] = {};
  for (int64_t i = 0; i < n / kQKK; ++i) {
    if constexpr (NX == 1) prefetch_ahead<3>(w + i);
    // 6-bit scales and mins of the 8 sub-blocks, 4 per u32 (the layout of quant::k4_scale_min).
    uint32_t s32[3];
    std::memcpy(s32, w[i].scales, 12);
    const uint32_t sc_lo = s32[0] & 0x3f3f3f3f;
    const uint32_t m_lo = s32[1] & 0x3f3f3f3f;
    const uint32_t sc_hi = (s32[2] & 0x0f0f0f0f) | (((s32[0] >> 6) & 0x03030303) << 4);
    const uint32_t m_hi = ((s32[2] >> 4) & 0x0f0f0f0f) | (((s32[1] >> 6) & 0x03030303) << 4);
    const __m512i sc = _mm512_castsi256_si512(
        _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(uint64_t(sc_hi) << 32 | sc_lo))));
    // Min j twice (for the activation's 16-value sums 2j and 2j+1), as int16.
    const __m128i m8 = _mm_cvtsi64_si128(static_cast<long long>(uint64_t(m_hi) << 32 | m_lo));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    // Chunk k holds sub-blocks 2k (low nibbles) and 2k+1 (high nibbles), 64 weights in order.
    __m512i u[4], sck[4];
    LL3_UNROLL for (int k = 0; k < 4; ++k) {
      const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs + 32 * k)));
      u[k] = _mm512_and_si512(_mm512_srlv_epi64(q, shifts), nib);
      if constexpr (kQ5) {
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh)));
        const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * k))),
                                                _mm256_set1_epi8(static_cast<char>(2 << (2 * k))), 1);
        u[k] = _mm512_mask_add_epi8(u[k], _mm512_test_epi8_mask(qh, bits), u[k], _mm512_set1_epi8(16));
      }
      sck[k] = _mm512_permutexvar_epi32(load_idx(kQ4KScaleIdx[k]), sc);
    }
    const float d = simd::h2f(w[i].d), dmin = simd::h2f(w[i].dmin);
    for (int x = 0; x < NX; ++x) {
      const BlockQ8_K& a = act_row<BlockQ8_K>(xq, stride, x)[i];
      __m512i isum = _mm512_setzero_si512();
      LL3_UNROLL for (int k = 0; k < 4; ++k) {
        const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[k], _mm512_loadu_si512(a.qs + 64 * k));
        isum = _mm512_dpwssd_epi32(isum, p, sck[k]);
      }
      acc[x] = int_dot_step(acc[x], hsum_i32(isum), d * a.d);
      // Mins: sum_j m_j * (bsum[2j] + bsum[2j+1]).
      const __m256i pm = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)), mins);
      accm[x] = int_dot_min_step(accm[x], hsum_i32(pm), dmin * a.d);
    }
  }
  for (int x = 0; x < NX; ++x) y[x * y_stride] = acc[x] - accm[x];
}

// ---- Q6_K x Q8_K ----------------------------------------------------------------------------
// w = d * sc_g * (u - 32): sum w a = d * d_a * (sum_g sc_g * U_g - 32 * sum_g sc_g * bsum_g).

template <int NX>
void q6_k_rows(const void* row, const void* xq, size_t stride, int64_t n, float* y, size_t y_stride) {
  const BlockQ6_K* w = static_cast<const BlockQ6_K*>(row);
  const __m512i nib = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  const __m512i shl = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2);
  const __m512i shr = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  float acc[NX] = {};
  for (int64_t i = 0; i < n / kQKK; ++i) {
    if constexpr (NX == 1) prefetch_ahead<4>(w + i);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales));
    // Signed scale in the low int16 of each lane, 0 above (vpdpwssd multiplies both halves).
    const __m512i sc = _mm512_and_si512(_mm512_cvtepi8_epi32(sc8), low16);
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    __m512i u[4], sck[4];
    LL3_UNROLL for (int h = 0; h < 2; ++h) {
      const __m512i l = _mm512_loadu_si512(w[i].ql + 64 * h);
      const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qh + 32 * h)));
      u[2 * h] = _mm512_or_si512(_mm512_and_si512(l, nib), _mm512_and_si512(_mm512_sllv_epi64(q, shl), m30));
      u[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), nib),
                                     _mm512_and_si512(_mm512_srlv_epi64(q, shr), m30));
    }
    LL3_UNROLL for (int c = 0; c < 4; ++c) sck[c] = _mm512_permutexvar_epi32(load_idx(kQ6KScaleIdx[c]), sc);
    const float d = simd::h2f(w[i].d);
    for (int x = 0; x < NX; ++x) {
      const BlockQ8_K& a = act_row<BlockQ8_K>(xq, stride, x)[i];
      __m512i isum = _mm512_setzero_si512();
      LL3_UNROLL for (int c = 0; c < 4; ++c) {
        const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[c], _mm512_loadu_si512(a.qs + 64 * c));
        isum = _mm512_dpwssd_epi32(isum, p, sck[c]);
      }
      const __m256i off = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)), sc16);
      isum = _mm512_sub_epi32(isum, _mm512_zextsi256_si512(_mm256_slli_epi32(off, 5)));
      acc[x] = int_dot_step(acc[x], hsum_i32(isum), d * a.d);
    }
  }
  for (int x = 0; x < NX; ++x) y[x * y_stride] = acc[x];
}

// ---- Q2_K / Q3_K x Q8_K ---------------------------------------------------------------------
// Both hold 2-bit planes: chunk c (weights 64c..64c+63) is half c/2, bit planes 2(c%2) and
// 2(c%2)+1 of its 32 bytes. Groups of 16 with their own scale, as in Q6_K.
//   Q3_K: u = low 2 bits + 4 * hmask bit, w = d * sc * (u - 4), sc signed 6-bit;
//   Q2_K: w = d * sc * u - dmin * m, sc and m 4-bit.

// Q3_K's 16 scales (6 bits, biased by 32) unpacked from 12 bytes to 16 signed bytes.
inline __m128i q3_k_scales(const uint8_t* packed) {
  uint32_t a[3];
  std::memcpy(a, packed, 12);
  const uint32_t lo4 = 0x0f0f0f0f, hi2 = 0x03030303;
  alignas(16) uint32_t s[4];
  s[0] = (a[0] & lo4) | ((a[2] & hi2) << 4);
  s[1] = (a[1] & lo4) | (((a[2] >> 2) & hi2) << 4);
  s[2] = ((a[0] >> 4) & lo4) | (((a[2] >> 4) & hi2) << 4);
  s[3] = ((a[1] >> 4) & lo4) | (((a[2] >> 6) & hi2) << 4);
  return _mm_sub_epi8(_mm_load_si128(reinterpret_cast<const __m128i*>(s)), _mm_set1_epi8(32));
}

template <class Block, int NX>
void q23_k_rows(const void* row, const void* xq, size_t stride, int64_t n, float* y, size_t y_stride) {
  constexpr bool kQ3 = std::is_same_v<Block, BlockQ3_K>;
  const Block* w = static_cast<const Block*>(row);
  const __m512i three = _mm512_set1_epi8(3);
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  const __m512i shifts[2] = {_mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2), _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6)};
  float acc[NX] = {}, accm[NX] = {};
  for (int64_t i = 0; i < n / kQKK; ++i) {
    __m512i sc;      // scale of each group in the low int16 of its int32 lane
    __m256i side16;  // Q3_K: the scales (for the -4 offset); Q2_K: the mins; as int16
    if constexpr (kQ3) {
      const __m128i sc8 = q3_k_scales(w[i].scales);
      sc = _mm512_and_si512(_mm512_cvtepi8_epi32(sc8), low16);
      side16 = _mm256_cvtepi8_epi16(sc8);
    } else {
      const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales));
      sc = _mm512_cvtepu8_epi32(_mm_and_si128(s8, _mm_set1_epi8(0x0F)));
      side16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(0x0F)));
    }
    __m512i u[4], sck[4];
    LL3_UNROLL for (int c = 0; c < 4; ++c) {
      const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs + 32 * (c / 2))));
      u[c] = _mm512_and_si512(_mm512_srlv_epi64(q, shifts[c % 2]), three);
      if constexpr (kQ3) {
        const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].hmask)));
        const int bit = 4 * (c / 2) + 2 * (c % 2);
        const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << bit)),
                                                _mm256_set1_epi8(static_cast<char>(1 << (bit + 1))), 1);
        u[c] = _mm512_mask_add_epi8(u[c], _mm512_test_epi8_mask(hm, bits), u[c], _mm512_set1_epi8(4));
      }
      sck[c] = _mm512_permutexvar_epi32(load_idx(kQ6KScaleIdx[c]), sc);
    }
    const float d = simd::h2f(w[i].d);
    float dmin = 0.0f;
    if constexpr (!kQ3) dmin = simd::h2f(w[i].dmin);
    for (int x = 0; x < NX; ++x) {
      const BlockQ8_K& a = act_row<BlockQ8_K>(xq, stride, x)[i];
      __m512i isum = _mm512_setzero_si512();
      LL3_UNROLL for (int c = 0; c < 4; ++c) {
        const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[c], _mm512_loadu_si512(a.qs + 64 * c));
        isum = _mm512_dpwssd_epi32(isum, p, sck[c]);
      }
      const __m256i side = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)), side16);
      if constexpr (kQ3) isum = _mm512_sub_epi32(isum, _mm512_zextsi256_si512(_mm256_slli_epi32(side, 2)));
      acc[x] = int_dot_step(acc[x], hsum_i32(isum), d * a.d);
      if constexpr (!kQ3) accm[x] = int_dot_min_step(accm[x], hsum_i32(side), dmin * a.d);
    }
  }
  for (int x = 0; x < NX; ++x) y[x * y_stride] = acc[x] - accm[x];
}

// ---- Q4_0 x Q8_0 ----------------------------------------------------------------------------
// Two blocks per step: the nibbles of blocks i and i+1 fill one 512-bit vector in element order,
// products of the unsigned nibbles u come from vpdpbusd, and the bias uses sum (u - 8) a =
// sum u a - sum 8 a (a second vpdpbusd against a vector of 8s).

// The products d_w * d_a of a run of blocks, for each activation row: the f16 scales are copied
// out with plain loads and stores and converted 16 at a time, which keeps the per-block f16
// conversions (shuffle-port work) out of the inner loop.
constexpr int kSegBlocks = 256;

template <int NX>
void legacy_scale_products(const BlockQ4_0* w, const void* xq, size_t stride, int64_t i0, int nblk,
                           float (*prod)[kSegBlocks]) {
  alignas(64) uint16_t hw[kSegBlocks], ha[kSegBlocks];
  const int padded = (nblk + 15) & ~15;
  for (int b = 0; b < nblk; ++b) hw[b] = w[i0 + b].d;
  for (int b = nblk; b < padded; ++b) hw[b] = ha[b] = 0;
  for (int x = 0; x < NX; ++x) {
    const BlockQ8_0* a = act_row<BlockQ8_0>(xq, stride, x) + i0;
    for (int b = 0; b < nblk; ++b) ha[b] = a[b].d;
    for (int b = 0; b < padded; b += 16) {
      const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(hw + b)));
      const __m512 da = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(ha + b)));
      _mm512_storeu_ps(prod[x] + b, _mm512_mul_ps(dw, da));
    }
  }
}

template <int NX>
void q4_0_rows(const void* row, const void* xq, size_t stride, int64_t n, float* y, size_t y_stride) {
  const BlockQ4_0* w = static_cast<const BlockQ4_0*>(row);
  const int64_t nb = n / kQK;
  const __m512i nib = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
  const __m512i dup = _mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3);
  const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
  alignas(64) float prod[NX][kSegBlocks];  // d_w * d_a per block of the current segment
  float acc[NX] = {};
  for (int64_t i0 = 0; i0 < nb; i0 += kSegBlocks) {
    const int nblk = static_cast<int>(std::min<int64_t>(kSegBlocks, nb - i0));
    legacy_scale_products<NX>(w, xq, stride, i0, nblk, prod);
    int b = 0;
    for (; b + 2 <= nblk; b += 2) {
      const int64_t i = i0 + b;
      const __m256i pair = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i + 1].qs)),
                                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].qs)));
      // [b0 lo | b0 hi | b1 lo | b1 hi] = elements 0..31 of block i, then of block i+1.
      const __m512i u = _mm512_and_si512(
          _mm512_srlv_epi64(_mm512_permutexvar_epi64(dup, _mm512_castsi256_si512(pair)), shifts), nib);
      for (int x = 0; x < NX; ++x) {
        const BlockQ8_0* a = act_row<BlockQ8_0>(xq, stride, x) + i;
        const __m512i av = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[0].qs))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[1].qs)), 1);
        const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u, av),
                                           _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, av));
        acc[x] = int_dot_step(acc[x], hsum_i32(_mm512_castsi512_si256(p)), prod[x][b]);
        acc[x] = int_dot_step(acc[x], hsum_i32(_mm512_extracti64x4_epi64(p, 1)), prod[x][b + 1]);
      }
    }
    if (b < nblk) {  // an odd last block (only at the end of the row), with 256-bit vectors
      const int64_t i = i0 + b;
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].qs));
      const __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
      for (int x = 0; x < NX; ++x) {
        const BlockQ8_0& a = act_row<BlockQ8_0>(xq, stride, x)[i];
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
        const __m256i p = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u, av),
                                           _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), av));
        acc[x] = int_dot_step(acc[x], hsum_i32(p), prod[x][b]);
      }
    }
  }
  for (int x = 0; x < NX; ++x) y[x * y_stride] = acc[x];
}

// ---- Q8_0 x Q8_0 ----------------------------------------------------------------------------
// One block per step with 256-bit vectors. (Converting the scales ahead in runs, as Q4_0 does,
// measured slower here: the per-block work is already small.)

template <int NX>
void q8_0_rows(const void* row, const void* xq, size_t stride, int64_t n, float* y, size_t y_stride) {
  const BlockQ8_0* w = static_cast<const BlockQ8_0*>(row);
  float acc[NX] = {};
  for (int64_t i = 0; i < n / kQK; ++i) {
    if constexpr (NX == 1) {
      if (i % 2 == 0) prefetch_ahead<2>(w + i);
    }
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs));
    const __m256i aq = _mm256_abs_epi8(q);  // sign trick: |w| x (a * sign(w))
    const float d = simd::h2f(w[i].d);
    for (int x = 0; x < NX; ++x) {
      const BlockQ8_0& a = act_row<BlockQ8_0>(xq, stride, x)[i];
      const __m256i sa = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs)), q);
      const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aq, sa);
      acc[x] = int_dot_step(acc[x], hsum_i32(p), d * simd::h2f(a.d));
    }
  }
  for (int x = 0; x < NX; ++x) y[x * y_stride] = acc[x];
}

// ---- Decode: several weight rows against one activation row (dot_q_wrows) -------------------
// The K-quant kernels can take R weight rows per pass (each activation load shared by R rows).
// Measured on weights outside L2, R = 2 or 4 was slower than R = 1 (again with huge pages, 1B
// preset, 2 threads: Q4_K_M 28.4 / 28.0 t/s against 30.4; Q8_0 likewise): interleaved row
// streams cost more than the shared loads save. What pays is a software prefetch ahead in the
// (contiguous) weight stream and less work per block. All give bit-identical results to dot_q.

template <class Block>
inline const Block* wrow(const void* rows, size_t row_stride, int r) {
  return reinterpret_cast<const Block*>(static_cast<const uint8_t*>(rows) + r * row_stride);
}

// The 8 scales and 8 mins of a Q4_K / Q5_K block (12 packed bytes at p; 16 bytes are read) as
// bytes: sc_0..sc_7 in bytes 0-7, m_0..m_7 in bytes 8-15. SIMD form of quant::k4_scale_min:
//   j < 4: sc_j = s[j] & 63,                       m_j = s[j+4] & 63
//   j >= 4: sc_j = s[j+4] & 15 | (s[j-4] >> 6) << 4, m_j = s[j+4] >> 4 | (s[j] >> 6) << 4
inline __m128i k4_scales_mins(const uint8_t* p) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i a = _mm_shuffle_epi8(x, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i b = _mm_shuffle_epi8(x, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  const __m128i lo = _mm_blend_epi32(_mm_and_si128(a, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0)),
                                     _mm_and_si128(_mm_srli_epi16(a, 4), _mm_set1_epi8(0x0F)), 0b1000);
  return _mm_or_si128(lo, _mm_and_si128(_mm_srli_epi16(b, 2), _mm_set1_epi8(0x30)));
}

// Q4_K decode. A 64-byte load of qs holds two chunks: its low nibbles are sub-blocks 4j and
// 4j+2, its high nibbles 4j+1 and 4j+3 (j = 0, 1). The activation is copied once per segment
// into that order (kPermLo / kPermHi halves), 64-byte aligned, for all the rows of the call.
// The two vpdpbusd results of a load are narrowed into one vector by vpackssdw (each int32 is a
// sum of four u4 x s8 products, |p| < 2^13) and scaled by one vpdpwssd: per 128-bit lane L the
// pack holds 4 words of the low-nibble product, then 4 of the high-nibble one, so its scales
// are words [s_lo x4, s_hi x4] with s_lo = sub-block 4j + 2 (L >= 2), s_hi = s_lo + 1.
#define LL3_Z 0x80
#define LL3_Q(a, b) a, LL3_Z, a, LL3_Z, a, LL3_Z, a, LL3_Z, b, LL3_Z, b, LL3_Z, b, LL3_Z, b, LL3_Z
alignas(64) constexpr uint8_t kQ4KPackScaleShuf[2][64] = {
    {LL3_Q(0, 1), LL3_Q(0, 1), LL3_Q(2, 3), LL3_Q(2, 3)},
    {LL3_Q(4, 5), LL3_Q(4, 5), LL3_Q(6, 7), LL3_Q(6, 7)}};
#undef LL3_Q
// Min j twice as int16 (for the activation's 16-value sums 2j and 2j+1): byte 8 + j.
alignas(32) constexpr uint8_t kQ4KMinShuf[32] = {
    8,  LL3_Z, 8,  LL3_Z, 9,  LL3_Z, 9,  LL3_Z, 10, LL3_Z, 10, LL3_Z, 11, LL3_Z, 11, LL3_Z,
    12, LL3_Z, 12, LL3_Z, 13, LL3_Z, 13, LL3_Z, 14, LL3_Z, 14, LL3_Z, 15, LL3_Z, 15, LL3_Z};
#undef LL3_Z

constexpr int kSegBlocksK = 32;  // activation blocks per prepared segment (8 KB)
// Weight rows per pass of the Q4_K decode kernel. 2 and 4 (sharing each activation load) were
// slower on weights outside L2: interleaved row streams defeat the hardware prefetcher.
constexpr int kQ4KRows = 1;

// a.qs of nblk blocks into the nibble order above: per block and j, 64 bytes for the low
// nibbles (values 128j + 0..31, 128j + 64..95), then 64 for the high ones (+32..63, +96..127).
inline void q4_k_prep_act(const BlockQ8_K* a, int nblk, int8_t* out) {
  for (int b = 0; b < nblk; ++b) {
    LL3_UNROLL for (int j = 0; j < 2; ++j) {
      const __m512i v0 = _mm512_loadu_si512(a[b].qs + 128 * j);
      const __m512i v1 = _mm512_loadu_si512(a[b].qs + 128 * j + 64);
      _mm512_store_si512(out + 256 * b + 128 * j, _mm512_shuffle_i64x2(v0, v1, 0x44));
      _mm512_store_si512(out + 256 * b + 128 * j + 64, _mm512_shuffle_i64x2(v0, v1, 0xEE));
    }
  }
}

// R rows over blocks [i0, i0 + nblk), accumulating into acc and accm.
template <int R>
void q4_k_seg(const uint8_t* rows, size_t rs, const BlockQ8_K* a, const int8_t* ap, int64_t i0, int nblk,
              float* acc, float* accm) {
  const __m512i nib = _mm512_set1_epi8(0x0F);
  const __m256i min_idx = _mm256_load_si256(reinterpret_cast<const __m256i*>(kQ4KMinShuf));
  float ac[R], am[R];
  for (int r = 0; r < R; ++r) {
    ac[r] = acc[r];
    am[r] = accm[r];
  }
  for (int b = 0; b < nblk; ++b) {
    const int64_t i = i0 + b;
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].bsums));
    const __m128 ad = _mm_set1_ps(a[i].d);
    const int8_t* apb = ap + 256 * b;
    LL3_UNROLL for (int r = 0; r < R; ++r) {
      const BlockQ4_K& w = reinterpret_cast<const BlockQ4_K*>(rows + r * rs)[i];
      prefetch_ahead<3>(&w);
      const __m128i sm = k4_scales_mins(w.scales);
      const __m512i sm512 = _mm512_broadcast_i32x4(sm);
      __m512i isum = _mm512_setzero_si512();
      LL3_UNROLL for (int j = 0; j < 2; ++j) {
        const __m512i v = _mm512_loadu_si512(w.qs + 64 * j);
        const __m512i lo = _mm512_and_si512(v, nib);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
        const __m512i plo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_load_si512(apb + 128 * j));
        const __m512i phi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi, _mm512_load_si512(apb + 128 * j + 64));
        const __m512i sc = _mm512_shuffle_epi8(sm512, _mm512_load_si512(kQ4KPackScaleShuf[j]));
        isum = _mm512_dpwssd_epi32(isum, _mm512_packs_epi32(plo, phi), sc);
      }
      // [d, dmin] * d_a in one conversion and one multiply.
      uint32_t dd;
      std::memcpy(&dd, &w.d, 4);
      const __m128 sd = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dd))), ad);
      ac[r] = int_dot_step(ac[r], hsum_i32(isum), _mm_cvtss_f32(sd));
      const __m256i pm = _mm256_madd_epi16(bsums, _mm256_shuffle_epi8(_mm512_castsi512_si256(sm512), min_idx));
      am[r] = int_dot_min_step(am[r], hsum_i32(pm), _mm_cvtss_f32(_mm_movehdup_ps(sd)));
    }
  }
  for (int r = 0; r < R; ++r) {
    acc[r] = ac[r];
    accm[r] = am[r];
  }
}

template <int R>
void q6_k_wrows(const void* rows, size_t rs, const void* xq, int64_t n, float* y) {
  const BlockQ8_K* a = static_cast<const BlockQ8_K*>(xq);
  const __m512i nib = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  const __m512i shl = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2);
  const __m512i shr = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  float acc[R] = {};
  for (int64_t i = 0; i < n / kQKK; ++i) {
    __m512i av[4];
    LL3_UNROLL for (int k = 0; k < 4; ++k) av[k] = _mm512_loadu_si512(a[i].qs + 64 * k);
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].bsums));
    const float ad = a[i].d;
    LL3_UNROLL for (int r = 0; r < R; ++r) {
      const BlockQ6_K& w = wrow<BlockQ6_K>(rows, rs, r)[i];
      prefetch_ahead<4>(&w);
      const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales));
      const __m512i sc = _mm512_and_si512(_mm512_cvtepi8_epi32(sc8), low16);
      const __m256i off = _mm256_madd_epi16(bsums, _mm256_cvtepi8_epi16(sc8));
      __m512i isum = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(_mm256_slli_epi32(off, 5)));
      LL3_UNROLL for (int h = 0; h < 2; ++h) {
        const __m512i l = _mm512_loadu_si512(w.ql + 64 * h);
        const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh + 32 * h)));
        const __m512i u0 = _mm512_or_si512(_mm512_and_si512(l, nib), _mm512_and_si512(_mm512_sllv_epi64(q, shl), m30));
        const __m512i u1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), nib),
                                           _mm512_and_si512(_mm512_srlv_epi64(q, shr), m30));
        const __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u0, av[2 * h]);
        isum = _mm512_dpwssd_epi32(isum, p0, _mm512_permutexvar_epi32(load_idx(kQ6KScaleIdx[2 * h]), sc));
        const __m512i p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u1, av[2 * h + 1]);
        isum = _mm512_dpwssd_epi32(isum, p1, _mm512_permutexvar_epi32(load_idx(kQ6KScaleIdx[2 * h + 1]), sc));
      }
      acc[r] = int_dot_step(acc[r], hsum_i32(isum), simd::h2f(w.d) * ad);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = acc[r];
}

template <int NX> struct Q4K { static void run(const void* r, const void* a, size_t s, int64_t n, float* y, size_t ys) { q45_k_rows<BlockQ4_K, NX>(r, a, s, n, y, ys); } };
template <int NX> struct Q5K { static void run(const void* r, const void* a, size_t s, int64_t n, float* y, size_t ys) { q45_k_rows<BlockQ5_K, NX>(r, a, s, n, y, ys); } };
template <int NX> struct Q6K { static void run(const void* r, const void* a, size_t s, int64_t n, float* y, size_t ys) { q6_k_rows<NX>(r, a, s, n, y, ys); } };
template <int NX> struct Q2K { static void run(const void* r, const void* a, size_t s, int64_t n, float* y, size_t ys) { q23_k_rows<BlockQ2_K, NX>(r, a, s, n, y, ys); } };
template <int NX> struct Q3K { static void run(const void* r, const void* a, size_t s, int64_t n, float* y, size_t ys) { q23_k_rows<BlockQ3_K, NX>(r, a, s, n, y, ys); } };
template <int NX> struct Q40 { static void run(const void* r, const void* a, size_t s, int64_t n, float* y, size_t ys) { q4_0_rows<NX>(r, a, s, n, y, ys); } };
template <int NX> struct Q80 { static void run(const void* r, const void* a, size_t s, int64_t n, float* y, size_t ys) { q8_0_rows<NX>(r, a, s, n, y, ys); } };

// One weight row against one activation row: the rows kernels with a batch of one.
template <void (*Rows)(const void*, const void*, size_t, int64_t, float*, size_t)>
float one_row(const void* row, const void* xq, int64_t n) {
  float y;
  Rows(row, xq, 0, n, &y, 0);
  return y;
}

}  // namespace

float q4_k_dot_q8_k(const void* row, const void* xq, int64_t n) { return one_row<q45_k_rows<BlockQ4_K, 1>>(row, xq, n); }
float q5_k_dot_q8_k(const void* row, const void* xq, int64_t n) { return one_row<q45_k_rows<BlockQ5_K, 1>>(row, xq, n); }
float q6_k_dot_q8_k(const void* row, const void* xq, int64_t n) { return one_row<q6_k_rows<1>>(row, xq, n); }
float q2_k_dot_q8_k(const void* row, const void* xq, int64_t n) { return one_row<q23_k_rows<BlockQ2_K, 1>>(row, xq, n); }
float q3_k_dot_q8_k(const void* row, const void* xq, int64_t n) { return one_row<q23_k_rows<BlockQ3_K, 1>>(row, xq, n); }
float q4_0_dot_q8_0(const void* row, const void* xq, int64_t n) { return one_row<q4_0_rows<1>>(row, xq, n); }
float q8_0_dot_q8_0(const void* row, const void* xq, int64_t n) { return one_row<q8_0_rows<1>>(row, xq, n); }

void q4_k_dot_q8_k_rows(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y, size_t y_stride) {
  run_row_passes<Q4K>(row, xq, stride, nx, n, y, y_stride);
}
void q5_k_dot_q8_k_rows(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y, size_t y_stride) {
  run_row_passes<Q5K>(row, xq, stride, nx, n, y, y_stride);
}
void q6_k_dot_q8_k_rows(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y, size_t y_stride) {
  run_row_passes<Q6K>(row, xq, stride, nx, n, y, y_stride);
}
void q2_k_dot_q8_k_rows(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y, size_t y_stride) {
  run_row_passes<Q2K>(row, xq, stride, nx, n, y, y_stride);
}
void q3_k_dot_q8_k_rows(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y, size_t y_stride) {
  run_row_passes<Q3K>(row, xq, stride, nx, n, y, y_stride);
}
void q4_0_dot_q8_0_rows(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y, size_t y_stride) {
  run_row_passes<Q40>(row, xq, stride, nx, n, y, y_stride);
}
void q8_0_dot_q8_0_rows(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y, size_t y_stride) {
  run_row_passes<Q80>(row, xq, stride, nx, n, y, y_stride);
}

void q4_k_dot_q8_k_wrows(const void* rows, size_t row_stride, int64_t nrows, const void* xq, int64_t n, float* y) {
  constexpr int kRowChunk = 16;  // rows whose accumulators stay live across the segments
  const BlockQ8_K* a = static_cast<const BlockQ8_K*>(xq);
  const uint8_t* w = static_cast<const uint8_t*>(rows);
  const int64_t nb = n / kQKK;
  alignas(64) int8_t ap[kSegBlocksK * kQKK];  // prepared activation segment
  float acc[kRowChunk], accm[kRowChunk];
  for (int64_t r0 = 0; r0 < nrows; r0 += kRowChunk) {
    const int nr = static_cast<int>(std::min<int64_t>(kRowChunk, nrows - r0));
    for (int r = 0; r < nr; ++r) acc[r] = accm[r] = 0.0f;
    for (int64_t i0 = 0; i0 < nb; i0 += kSegBlocksK) {
      const int nblk = static_cast<int>(std::min<int64_t>(kSegBlocksK, nb - i0));
      q4_k_prep_act(a + i0, nblk, ap);
      int r = 0;
      for (; r + kQ4KRows <= nr; r += kQ4KRows) {
        q4_k_seg<kQ4KRows>(w + (r0 + r) * row_stride, row_stride, a, ap, i0, nblk, acc + r, accm + r);
      }
      for (; r < nr; ++r) q4_k_seg<1>(w + (r0 + r) * row_stride, row_stride, a, ap, i0, nblk, acc + r, accm + r);
    }
    for (int r = 0; r < nr; ++r) y[r0 + r] = acc[r] - accm[r];
  }
}
void q6_k_dot_q8_k_wrows(const void* rows, size_t row_stride, int64_t nrows, const void* xq, int64_t n, float* y) {
  const uint8_t* w = static_cast<const uint8_t*>(rows);
  for (int64_t r = 0; r < nrows; ++r) q6_k_wrows<1>(w + r * row_stride, row_stride, xq, n, y + r);
}
// Q8_0 decode: the activation's scales become floats once per segment of kSegBlocks blocks;
// each block's exact sum (256-bit, sign trick) is reduced and scaled in one chain per row (the
// order of kernels/int_dot_order.h). Rows longer than one segment (n > 32768: no Llama shape)
// carry their accumulator through y.
void q8_0_dot_q8_0_wrows(const void* rows, size_t row_stride, int64_t nrows, const void* xq, int64_t n, float* y) {
  constexpr int64_t kSegBlocks = 1024;
  const BlockQ8_0* a = static_cast<const BlockQ8_0*>(xq);
  const int64_t nb = n / kQK;
  alignas(64) float ad[kSegBlocks];
  for (int64_t s0 = 0; s0 < nb; s0 += kSegBlocks) {
    const int64_t s1 = std::min(nb, s0 + kSegBlocks);
    for (int64_t i = s0; i < s1; ++i) ad[i - s0] = simd::h2f(a[i].d);
    for (int64_t r = 0; r < nrows; ++r) {
      const BlockQ8_0* w = wrow<BlockQ8_0>(rows, row_stride, static_cast<int>(r));
      float acc = s0 == 0 ? 0.0f : y[r];
      for (int64_t i = s0; i < s1; ++i) {
        if (i % 2 == 0) prefetch_ahead<2>(w + i);
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs));
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].qs));
        const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(q), _mm256_sign_epi8(av, q));
        acc = int_dot_step(acc, hsum_i32(p), simd::h2f(w[i].d) * ad[i - s0]);
      }
      y[r] = acc;
    }
  }
}

// Q4_0 decode (Q4_0 has no panels): 16 rows per pass, two blocks per step. Each row's two
// block sums (512-bit, as in q4_0_rows) are reduced across the 16 rows at once into two
// vectors, lane r for row r, so that the chain of kernels/int_dot_order.h runs for 16 rows in
// the lanes of one fma, where q4_0_rows<1> ran one scalar chain per row, latency-bound: the
// same operations per row, so the same bits. The next pass's rows are prefetched into L2 in
// address order as the pass reads this one's. 1B Q4_0, 2 threads, decode 24.2-25.8 -> 53.3-54.2
// t/s (alternated, fast minutes); one core, in L2 (`quant_gemv_bench gemv_wrows/Q4_0_.*/2048/512`)
// 7.1 -> 23 GB/s. What bounds it now is the gather of the 16 rows' scales (perf: a quarter of the
// samples wait on it); a later step could take the scales from wider loads of the rows.
void q4_0_dot_q8_0_wrows(const void* rows, size_t row_stride, int64_t nrows, const void* xq, int64_t n, float* y) {
  constexpr int R = 16;
  const BlockQ8_0* a = static_cast<const BlockQ8_0*>(xq);
  const uint8_t* w = static_cast<const uint8_t*>(rows);
  const int64_t nb = n / kQK;
  int64_t r0 = 0;
  if (row_stride <= (size_t{1} << 26)) {  // the gather's offsets are int32
    const __m512i offs = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(static_cast<int>(row_stride)));
    // Where the reduction below leaves (row r, first block) and (row r, second block).
    const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    const __m512i second = _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    const __m512i nib = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    const __m512i dup = _mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3);
    const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    const size_t pass_bytes = R * row_stride, step_bytes = 2 * R * sizeof(BlockQ4_0);
    // One block's step for the 16 lanes: the exact sums, less 8 * sum(a), times d_w * d_a.
    const auto step = [&](__m512 acc, __m512i sums, int32_t a8, const uint8_t* blk, uint16_t da) {
      const __m512i dw = _mm512_i32gather_epi32(offs, blk, 1);  // d: the low half of 4 bytes
      const __m512 prod = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(dw)), _mm512_set1_ps(simd::h2f(da)));
      return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sums, _mm512_set1_epi32(a8))), prod, acc);
    };
    for (; r0 + R <= nrows; r0 += R) {
      const uint8_t* g = w + r0 * row_stride;
      const uint8_t* next = g + pass_bytes;
      size_t pf = 0;
      __m512 acc = _mm512_setzero_ps();
      int64_t i = 0;
      for (; i + 2 <= nb; i += 2) {
        for (const size_t end = std::min(pass_bytes, static_cast<size_t>(i / 2 + 1) * step_bytes); pf < end; pf += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(next + pf), _MM_HINT_T1);
        }
        const __m512i av = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].qs))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i + 1].qs)), 1);
        const __m512i a8v = _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, av);
        const uint8_t* blk = g + i * sizeof(BlockQ4_0);
        __m512i p[R];  // row r: 8 partial sums of block i, then 8 of block i + 1
        LL3_UNROLL for (int r = 0; r < R; ++r) {
          const BlockQ4_0* b = reinterpret_cast<const BlockQ4_0*>(blk + r * row_stride);
          const __m256i pair = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[1].qs)),
                                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[0].qs)));
          const __m512i u = _mm512_and_si512(
              _mm512_srlv_epi64(_mm512_permutexvar_epi64(dup, _mm512_castsi256_si512(pair)), shifts), nib);
          p[r] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, av);
        }
        __m512i s[8], t[4], v[2];
        LL3_UNROLL for (int k = 0; k < 8; ++k) {
          s[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2 * k], p[2 * k + 1]), _mm512_unpackhi_epi32(p[2 * k], p[2 * k + 1]));
        }
        LL3_UNROLL for (int k = 0; k < 4; ++k) {
          t[k] = _mm512_add_epi32(_mm512_unpacklo_epi64(s[2 * k], s[2 * k + 1]), _mm512_unpackhi_epi64(s[2 * k], s[2 * k + 1]));
        }
        LL3_UNROLL for (int k = 0; k < 2; ++k) {
          v[k] = _mm512_add_epi32(_mm512_shuffle_i32x4(t[2 * k], t[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_i32x4(t[2 * k], t[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
        }
        const int32_t a8_0 = hsum_i32(_mm512_castsi512_si256(a8v)), a8_1 = hsum_i32(_mm512_extracti64x4_epi64(a8v, 1));
        acc = step(acc, _mm512_permutex2var_epi32(v[0], first, v[1]), a8_0, blk, a[i].d);
        acc = step(acc, _mm512_permutex2var_epi32(v[0], second, v[1]), a8_1, blk + sizeof(BlockQ4_0), a[i + 1].d);
      }
      if (i < nb) {  // an odd last block: one row at a time, reduced per row
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].qs));
        const int32_t a8 = hsum_i32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), av));
        const uint8_t* blk = g + i * sizeof(BlockQ4_0);
        alignas(64) int32_t sums[R];
        for (int r = 0; r < R; ++r) {
          const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const BlockQ4_0*>(blk + r * row_stride)->qs));
          const __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
          sums[r] = hsum_i32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u, av));
        }
        acc = step(acc, _mm512_load_si512(sums), a8, blk, a[i].d);
      }
      _mm512_storeu_ps(y + r0, acc);
    }
  }
  for (; r0 < nrows; ++r0) y[r0] = q4_0_dot_q8_0(w + r0 * row_stride, xq, n);
}

}  // namespace ll3::kernels::avx512
