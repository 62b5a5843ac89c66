// AVX-512 kernels of F32 / F16 / BF16 rows (compiled with the avx512 directory's flags only).
#include <immintrin.h>

#include "core/half.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/float_kernels.h"

namespace ll3::kernels::avx512 {

namespace {
inline __m512 load_bf16(const uint16_t* p) {
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
}  // namespace

float f32_dot(const void* row, const float* x, int64_t n) {
  const float* w = static_cast<const float*>(row);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch_ahead<2>(w + i);
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
  }
  if (i + 16 <= n) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
    i += 16;
  }
  if (i < n) {  // masked tail
    __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, x + i), a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

float f16_dot(const void* row, const float* x, int64_t n) {
  const uint16_t* w = static_cast<const uint16_t*>(row);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch_ahead<1>(w + i);
    __m512 w0 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i)));
    __m512 w1 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i + 16)));
    a0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i + 16), a1);
  }
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
  for (; i < n; ++i) sum += f16_to_f32(w[i]) * x[i];
  return sum;
}

float bf16_dot(const void* row, const float* x, int64_t n) {
  const uint16_t* w = static_cast<const uint16_t*>(row);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch_ahead<1>(w + i);
    a0 = _mm512_fmadd_ps(load_bf16(w + i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(load_bf16(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
  }
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
  for (; i < n; ++i) sum += bf16_to_f32(w[i]) * x[i];
  return sum;
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
