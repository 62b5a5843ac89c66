// Loads shared by the AVX-512 panel kernels (quant_panels.cpp: decode; quant_panel_rows.cpp:
// prompts). Include only from files compiled with the avx512 directory's flags.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

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

}  // namespace ll3::kernels::avx512
