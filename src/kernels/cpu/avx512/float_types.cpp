// AVX-512 kernels of F32 / F16 / BF16 rows (compiled with the avx512 directory's flags only).
#include <immintrin.h>

#include "core/half.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/vec_f32.h"
#include "kernels/float_kernels.h"

namespace ll3::kernels::avx512 {

namespace {
// Lanes of the group of 16 at i that lie before n.
inline __mmask16 lanes_before(int64_t i, int64_t n) {
  return static_cast<__mmask16>(i + 16 <= n ? 0xffff : (1u << (n - i)) - 1);
}

inline __m512 load_bf16(const uint16_t* p) {
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
}  // namespace

// One 16-lane accumulator in the order of kernels/float_dot_order.h: weight groups of 16
// converted by Load, a masked last group, the lanes summed by reduce16.
template <class Load>
inline float dot16(Load load, const float* x, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = _mm512_fmadd_ps(load(i), _mm512_loadu_ps(x + i), acc);
  if (i < n) {
    const __mmask16 m = lanes_before(i, n);
    acc = _mm512_mask3_fmadd_ps(load(i), _mm512_maskz_loadu_ps(m, x + i), acc, m);
  }
  return reduce16(acc);
}

float f32_dot(const void* row, const float* x, int64_t n) {
  const float* w = static_cast<const float*>(row);
  return dot16(
      [&](int64_t i) {
        if ((i & 31) == 0) prefetch_ahead<2>(w + i);
        return _mm512_maskz_loadu_ps(lanes_before(i, n), w + i);
      },
      x, n);
}

float f16_dot(const void* row, const float* x, int64_t n) {
  const uint16_t* w = static_cast<const uint16_t*>(row);
  return dot16(
      [&](int64_t i) {
        if ((i & 31) == 0) prefetch_ahead<1>(w + i);
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes_before(i, n), w + i));
      },
      x, n);
}

float bf16_dot(const void* row, const float* x, int64_t n) {
  const uint16_t* w = static_cast<const uint16_t*>(row);
  return dot16(
      [&](int64_t i) {
        if ((i & 31) == 0) prefetch_ahead<1>(w + i);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(lanes_before(i, n), w + i)), 16));
      },
      x, n);
}

void f16_to_float(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
  }
  for (; i < n; ++i) dst[i] = f16_to_f32(s[i]);
}

void f16_to_bf16(const void* src, uint16_t* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
    const __m512 hi = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 16)));
    _mm512_storeu_si512(dst + i, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
  }
  for (; i < n; ++i) dst[i] = f32_to_bf16(f16_to_f32(s[i]));
}

void bf16_to_float(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load_bf16(s + i));
  for (; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
}

}  // namespace ll3::kernels::avx512
