// AVX-512 activation quantizers (Q8_K for the K-quants, Q8_0 for the legacy types), bit for bit
// the scalar references: the same float operations, the reference's tie-breaking for the extreme
// value, and its rounding (Q8_K: nearest-even, which vcvtps2dq does under the default MXCSR;
// Q8_0: roundf's half-away-from-zero, rebuilt from a truncation).
#include <immintrin.h>

#include <cmath>

#include "kernels/quant_kernels.h"
#include "kernels/quant_simd_unpack.h"

namespace ll3::kernels::avx512 {

using namespace ll3::quant;

namespace {

// (No namespace-scope vector constants: their initializers would run AVX-512 code at start-up
// on every CPU.)
inline __m512 abs_mask() { return _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff)); }
inline __m512 vabs(__m512 v) { return _mm512_and_ps(v, abs_mask()); }

// Largest |x| over n (a multiple of 16) values.
inline float absmax(const float* x, int n) {
  __m512 m = _mm512_setzero_ps();
  for (int j = 0; j < n; j += 16) m = _mm512_max_ps(m, vabs(_mm512_loadu_ps(x + j)));
  return _mm512_reduce_max_ps(m);
}

// The first x[j] with |x[j]| == amax: the reference keeps the first one it meets, so with +a
// and -a both present the sign is that of the earlier.
inline float first_with_abs(const float* x, int n, float amax) {
  const __m512 va = _mm512_set1_ps(amax);
  for (int j = 0; j < n; j += 16) {
    const __mmask16 m = _mm512_cmp_ps_mask(vabs(_mm512_loadu_ps(x + j)), va, _CMP_EQ_OQ);
    if (m != 0) return x[j + __builtin_ctz(m)];
  }
  return 0.0f;
}

}  // namespace

void q8_k_from_float(const float* src, void* dst, int64_t n) {
  BlockQ8_K* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float* x = src + i * kQKK;
    const float amax = absmax(x, kQKK);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float max = first_with_abs(x, kQKK, amax);
    const float iscale = -127.f / max;
    const __m512 vs = _mm512_set1_ps(iscale);
    for (int g = 0; g < 16; ++g) {
      __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(x + 16 * g)));  // nearest-even
      q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + 16 * g), _mm512_cvtepi32_epi8(q));
      y[i].bsums[g] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    y[i].d = 1 / iscale;
  }
}

void q8_0_from_float_act(const float* src, void* dst, int64_t n) {
  BlockQ8_0* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    const float amax = absmax(x, kQK);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[i].d = f32_to_f16(d);
    const __m512 vid = _mm512_set1_ps(id);
    for (int h = 0; h < 2; ++h) {
      const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * h), vid));  // ties to even
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + 16 * h), _mm512_cvtepi32_epi8(q));
    }
  }
}

}  // namespace ll3::kernels::avx512
