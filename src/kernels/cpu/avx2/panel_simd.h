// Loads shared by the AVX2 panel kernels (quant_panels.cpp: decode; quant_panel_rows.cpp:
// prompts). Include only from files compiled with the avx2 directory's flags.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/prefetch.h"

namespace ll3::kernels::avx2 {

// Half h (rows 8h .. 8h+7) of the 64-byte group at p.
inline __m256i load_half(const uint8_t* p, int h) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * h));
}

// 8 f16 fields (rows 8h .. 8h+7) of the 16 at p, as floats.
inline __m256 load_f16x8(const uint8_t* p, int h) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * h)));
}

// 4 activation bytes at p in every dword: the vpmaddubsw operand of 8 rows at once.
inline __m256i bcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Q6_K group scale g of 8 rows, from their scale line at scales (dword per row: scales 4 (g / 4)
// .. +3), sign-extended into both int16 halves of each dword: the vpmaddwd factor.
inline __m256i q6_k_scale_pair16(__m256i scales, int g) {
  const __m256i s = _mm256_srai_epi32(_mm256_slli_epi32(scales, 24 - 8 * (g % 4)), 24);
  return _mm256_or_si256(_mm256_and_si256(s, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(s, 16));
}

// One line of both halves of a panel group against one token: lo[hf] += w[hf] x al, hi[hf] +=
// w[2 + hf] x ah (vpmaddubsw, int16 sums). Each sum stays in its own chain, in order: left
// free, the compiler re-associated them into longer trees and spilled (gemm_panels Q4_K 2048 x
// 512 x 16: 114-126 -> 135-142 GOPS).
inline void madd_line_both_halves(const __m256i* w, __m256i al, __m256i ah, __m256i* lo, __m256i* hi) {
  lo[0] = _mm256_add_epi16(lo[0], _mm256_maddubs_epi16(_mm256_load_si256(w + 0), al));
  lo[1] = _mm256_add_epi16(lo[1], _mm256_maddubs_epi16(_mm256_load_si256(w + 1), al));
  hi[0] = _mm256_add_epi16(hi[0], _mm256_maddubs_epi16(_mm256_load_si256(w + 2), ah));
  hi[1] = _mm256_add_epi16(hi[1], _mm256_maddubs_epi16(_mm256_load_si256(w + 3), ah));
  __asm__("" : "+x"(lo[0]), "+x"(lo[1]), "+x"(hi[0]), "+x"(hi[1]));
}

// One Q6_K line of a half block h, group q = kk / 4 (kernels/panels.h): ql holds the low 4 bits
// of 4 weights per row in each nibble, hb the qh line with their high bits (bit pairs 0..3:
// weights 4mm, 32 + 4mm, 64 + 4mm, 96 + 4mm). lo gets the 6-bit values of group 8h + q, hi
// those of group 8h + 4 + q, as unsigned bytes.
inline void q6_k_assemble(__m256i ql, __m256i hb, int q, __m256i& lo, __m256i& hi) {
  const __m256i m0f = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
  const __m256i hl = q < 2 ? _mm256_slli_epi16(hb, 4) : _mm256_slli_epi16(hb, 2);
  const __m256i hh = q < 2 ? hb : _mm256_srli_epi16(hb, 2);
  lo = _mm256_or_si256(_mm256_and_si256(ql, m0f), _mm256_and_si256(hl, m30));
  hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql, 4), m0f), _mm256_and_si256(hh, m30));
}

// Line kk of the Q6_K half block at `half` (qh lines at +0, ql lines at +512) for rows 8 hf ..
// 8 hf + 7, assembled (q6_k_assemble, group kk / 4). With hf == 0 its lines are prefetched too
// (prefetch.h; a qh line serves two ql lines, so it is prefetched once): by prefetch_line in
// decode, by prefetch_line_always in the batched kernels (kBatch).
template <bool kBatch>
inline void q6_k_line(const uint8_t* half, int kk, int hf, __m256i& lo, __m256i& hi) {
  if (hf == 0) {
    const auto pf = kBatch ? prefetch_line_always : prefetch_line<>;
    if (kk < 8) pf(half + 64 * kk);
    pf(half + 512 + 64 * kk);
  }
  q6_k_assemble(load_half(half + 512 + 64 * kk, hf), load_half(half + 64 * (kk % 8), hf), kk / 4, lo, hi);
}

}  // namespace ll3::kernels::avx2
