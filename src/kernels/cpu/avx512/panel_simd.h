// Loads shared by the AVX-512 panel kernels (quant_panels.cpp: decode; quant_panel_rows.cpp:
// prompts; amx/quant_panel_rows.cpp). Include only from files compiled with the avx512
// directory's flags (or the amx directory's, a superset).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/quant_simd_unpack.h"  // LL3_UNROLL

namespace ll3::kernels::avx512 {

// The 16 f16 fields at p (one per panel row), as floats.
inline __m512 load_f16x16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// 4 activation bytes at p in every dword: the vpdpbusd operand of 16 rows at once.
inline __m512i bcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// One Q6_K line of a half block h, group q = kk / 4 (kernels/panels.h): ql holds the low 4 bits
// of 4 weights per row in each nibble, hb the qh line with their high bits (bit pairs 0..3:
// weights 4mm, 32 + 4mm, 64 + 4mm, 96 + 4mm). lo gets the 6-bit values of group 8h + q, hi
// those of group 8h + 4 + q, as unsigned bytes.
inline void q6_k_assemble(__m512i ql, __m512i hb, int q, __m512i& lo, __m512i& hi) {
  const __m512i m0f = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
  const __m512i hl = q < 2 ? _mm512_slli_epi16(hb, 4) : _mm512_slli_epi16(hb, 2);
  const __m512i hh = q < 2 ? hb : _mm512_srli_epi16(hb, 2);
  lo = _mm512_or_si512(_mm512_and_si512(ql, m0f), _mm512_and_si512(hl, m30));
  hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m0f), _mm512_and_si512(hh, m30));
}

// acc = fma(isum, scale, acc) for block i, the chain of kernels/int_dot_order.h starting at 0.
inline void fma_block(float* acc, __m512i isum, __m512 scale, int64_t i) {
  const __m512 a0 = i == 0 ? _mm512_setzero_ps() : _mm512_load_ps(acc);
  _mm512_store_ps(acc, _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, a0));
}

// A Q4_K block of a panel (kernels/panels.h): its scales, mins and d / dmin per row.
struct Q4KScales {
  __m512i sa[4], sb[4];  // scales of sub-blocks 2j and 2j+1, one dword per row
  __m512i mn_lo, mn_hi;  // the 8 mins, 4 per dword
  __m512 d, dmin;
};

inline Q4KScales q4_k_scales(const uint8_t* blk) {
  const __m512i m3f = _mm512_set1_epi8(0x3f), m0f = _mm512_set1_epi8(0x0f),
                m03 = _mm512_set1_epi8(0x03);
  const __m512i ff = _mm512_set1_epi32(0xff);
  const __m512i sc0 = _mm512_loadu_si512(blk + 64), sc1 = _mm512_loadu_si512(blk + 128);
  const __m512i sc2 = _mm512_loadu_si512(blk + 192);
  Q4KScales s;
  const __m512i sc_lo = _mm512_and_si512(sc0, m3f);
  const __m512i sc_hi =
      _mm512_or_si512(_mm512_and_si512(sc2, m0f),
                      _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(sc0, 6), m03), 4));
  s.mn_lo = _mm512_and_si512(sc1, m3f);
  s.mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(sc2, 4), m0f),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(sc1, 6), m03), 4));
  LL3_UNROLL for (int j = 0; j < 4; ++j) {
    const __m512i scv = j < 2 ? sc_lo : sc_hi;
    const int sh = 16 * (j & 1);
    s.sa[j] = _mm512_and_si512(_mm512_srli_epi32(scv, sh), ff);
    s.sb[j] = _mm512_and_si512(_mm512_srli_epi32(scv, sh + 8), ff);
  }
  s.d = load_f16x16(blk);
  s.dmin = load_f16x16(blk + 32);
  return s;
}

// The mins term's integer sum per row, sum_t m_t * B_t, from B_t's two byte digits (broadcast:
// h0 / h1 the high digits of sub-blocks 0-3 / 4-7, l0 / l1 the low ones).
inline __m512i q4_k_min_sum(const Q4KScales& s, __m512i h0, __m512i h1, __m512i l0, __m512i l1) {
  const __m512i mh = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), s.mn_lo, h0), s.mn_hi, h1);
  const __m512i ml = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), s.mn_lo, l0), s.mn_hi, l1);
  return _mm512_add_epi32(_mm512_slli_epi32(mh, 6), ml);
}

}  // namespace ll3::kernels::avx512
