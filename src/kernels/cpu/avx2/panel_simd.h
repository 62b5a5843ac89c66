// Loads shared by the AVX2 panel kernels (quant_panels.cpp: decode; quant_panel_rows.cpp:
// prompts). Include only from files compiled with the avx2 directory's flags.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

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

}  // namespace ll3::kernels::avx2
