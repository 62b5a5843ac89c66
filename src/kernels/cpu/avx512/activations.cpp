#include <immintrin.h>

#include "kernels/activation_kernels.h"

namespace ll3::kernels::avx512 {

namespace {

// exp(x) = 2^k * exp(r), k = round(x / ln 2), r = x - k ln 2 in [-ln2/2, ln2/2] (ln 2 in two
// parts so r is exact), exp(r) by the classic minimax polynomial for that interval (the
// Cephes expf coefficients), and 2^k applied by vscalefps, which also gives inf past 88.72
// and 0 (through the subnormals) below -103.97. NaN stays NaN; -inf is clamped to give 0.
inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // this operand order keeps NaN
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, k);
}

// Lanes [0, n) of a 16-float tail.
inline __mmask16 tail_mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }

inline __m512 silu_mul(__m512 g, __m512 u) {
  const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

}  // namespace

void swiglu(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(gate + i, silu_mul(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(gate + i, m, silu_mul(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i)));
  }
}

double exp_sub(float* x, int64_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  // The sum in double, as the scalar version (long rows of scores round the same way).
  __m512d lo = _mm512_setzero_pd(), hi = lo;
  auto add = [&](__m512 e) {
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s));
    _mm512_storeu_ps(x + i, e);
    add(e);
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s)));
    _mm512_mask_storeu_ps(x + i, m, e);
    add(e);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}

}  // namespace ll3::kernels::avx512
