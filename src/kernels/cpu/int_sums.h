// Horizontal sums of int32 lanes, for the kernels that keep one row's products in a vector and
// hand each block's exact sum to the scalar float step of kernels/int_dot_order.h. Included
// only by files compiled for AVX2 or AVX-512 (the 512-bit ones for AVX-512 only).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace ll3::kernels {

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

#if defined(__AVX512F__)
inline int32_t hsum_i32(__m512i v) {
  return hsum_i32(_mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)));
}
#endif

}  // namespace ll3::kernels
