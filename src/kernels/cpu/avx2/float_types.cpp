// AVX2 + FMA + F16C kernels of F32 / F16 / BF16 rows (compiled with -mavx2 -mfma -mf16c only).
#include <immintrin.h>

#include "core/half.h"
#include "kernels/cpu/vec_f32.h"
#include "kernels/float_kernels.h"

namespace ll3::kernels::avx2 {

namespace {
inline __m256 load_bf16(const uint16_t* p) {
  __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
}  // namespace

// Lanes 0-7 and 8-15 of kernels/float_dot_order.h's 16 in two accumulators: weight groups of 8
// converted by Load (zero past n), the lanes summed as hsum8(lo + hi).
template <class Load>
inline float dot16(Load load, const float* x, int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    lo = _mm256_fmadd_ps(load(i), _mm256_loadu_ps(x + i), lo);
    hi = _mm256_fmadd_ps(load(i + 8), _mm256_loadu_ps(x + i + 8), hi);
  }
  // A last partial group: zero weights and activations past n leave those lanes as they are
  // (fma(0, 0, a) = a: the lanes are never -0).
  alignas(32) float xt[16] = {};
  for (int64_t j = i; j < n; ++j) xt[j - i] = x[j];
  if (i < n) {
    lo = _mm256_fmadd_ps(load(i), _mm256_load_ps(xt), lo);
    if (i + 8 < n) hi = _mm256_fmadd_ps(load(i + 8), _mm256_load_ps(xt + 8), hi);
  }
  return hsum8(_mm256_add_ps(lo, hi));
}

// Eight weights from i (zero past n) as floats.
template <class T, class Cvt>
inline __m256 load8(const T* w, int64_t i, int64_t n, Cvt cvt) {
  if (i + 8 <= n) return cvt(w + i);
  alignas(32) T t[8] = {};
  for (int64_t j = i; j < n; ++j) t[j - i] = w[j];
  return cvt(t);
}

float f32_dot(const void* row, const float* x, int64_t n) {
  const float* w = static_cast<const float*>(row);
  return dot16([&](int64_t i) { return load8(w, i, n, [](const float* p) { return _mm256_loadu_ps(p); }); }, x, n);
}

float f16_dot(const void* row, const float* x, int64_t n) {
  const uint16_t* w = static_cast<const uint16_t*>(row);
  return dot16([&](int64_t i) {
    return load8(w, i, n, [](const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); });
  }, x, n);
}

float bf16_dot(const void* row, const float* x, int64_t n) {
  const uint16_t* w = static_cast<const uint16_t*>(row);
  return dot16([&](int64_t i) { return load8(w, i, n, [](const uint16_t* p) { return load_bf16(p); }); }, x, n);
}

void f16_to_float(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  }
  for (; i < n; ++i) dst[i] = f16_to_f32(s[i]);
}

}  // namespace ll3::kernels::avx2
