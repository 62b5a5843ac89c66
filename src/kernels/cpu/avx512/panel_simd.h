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

}  // namespace ll3::kernels::avx512
