// A float vector type per instruction set, with the few operations the element-wise kernels
// (activations, attention) need, so that one template serves AVX2 (8 lanes) and AVX-512 (16
// lanes). Included only from files compiled for that instruction set.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/exp_arm.h"

namespace ll3::kernels {

#if defined(__AVX__)
// The sum of the 8 lanes (the kernels' final horizontal sum).
inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#endif

// exp of every lane (see exp_poly below), shared by both widths: k = round(x / ln 2),
// r = x - k ln 2 with ln 2 in two parts (r exact), exp(r) by the Cephes minimax polynomial,
// 2^k applied as 2^(k/2) * 2^(k - k/2) so that overflow gives inf and underflow goes through
// the subnormals. Within 1 ulp of std::exp where the result is normal; NaN stays NaN.
template <class V>
inline typename V::T exp_poly(typename V::T x) {
  using T = typename V::T;
  x = V::max(V::set1(-104.0f), x);  // exp(-104) is 0 in float; keeps k in range
  x = V::min(V::set1(89.0f), x);    // exp(89) is inf in float
  const T k = V::round(V::mul(x, V::set1(1.44269504088896341f)));
  T r = V::fnmadd(k, V::set1(0.693359375f), x);
  r = V::fnmadd(k, V::set1(-2.12194440e-4f), r);
  T p = V::set1(1.9875691500e-4f);
  p = V::fmadd(p, r, V::set1(1.3981999507e-3f));
  p = V::fmadd(p, r, V::set1(8.3334519073e-3f));
  p = V::fmadd(p, r, V::set1(4.1665795894e-2f));
  p = V::fmadd(p, r, V::set1(1.6666665459e-1f));
  p = V::fmadd(p, r, V::set1(5.0000001201e-1f));
  p = V::fmadd(p, V::mul(r, r), V::add(r, V::set1(1.0f)));
  return V::scale_pow2(p, k);
}

// exp by kernels/exp_arm.h's algorithm, lane by lane bit-identical to exp_arm::scalar.
template <class V>
inline typename V::T exp_arm_v(typename V::T x) {
  using T = typename V::T;
  namespace e = exp_arm;
  const T z = V::fmadd(x, V::set1(e::kLog2e), V::set1(e::kShift));
  const T n = V::sub(z, V::set1(e::kShift));
  const T b = V::fnmadd(n, V::set1(e::kLn2Lo), V::fnmadd(n, V::set1(e::kLn2Hi), x));
  const T u = V::mul(b, b);
  const T j = V::fmadd(V::fmadd(V::fmadd(V::set1(e::kC4), b, V::set1(e::kC3)), u,
                                V::fmadd(V::set1(e::kC2), b, V::set1(e::kC1))),
                       u, V::fmadd(V::set1(e::kC0), b, V::set1(1.0f)));
  return V::scale_pow2_big(j, n);
}

#if defined(__AVX512F__)
// The lanes of v summed in the tree of kernels/float_dot_order.h.
inline float reduce16(__m512 v) {
  return hsum8(_mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

// Lanes of the group of 16 at i that lie before n.
inline __mmask16 lanes_before(int64_t i, int64_t n) {
  return static_cast<__mmask16>(i + 16 <= n ? 0xffff : (1u << (n - i)) - 1);
}

// 16 elements of an F32 / F16 / BF16 row from p as floats (exact), the lanes outside m zero
// (and not read).
inline __m512 load16_f32(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16_f16(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
inline __m512 load16_bf16(const uint16_t* p, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

struct F32x16 {
  using T = __m512;
  static constexpr int kWidth = 16;
  static T zero() { return _mm512_setzero_ps(); }
  static T set1(float x) { return _mm512_set1_ps(x); }
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static T load(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static T load_i8(const int8_t* p) {  // 16 signed bytes as floats (exact)
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
  static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T div(T a, T b) { return _mm512_div_ps(a, b); }
  static T max(T a, T b) { return _mm512_max_ps(a, b); }  // b where either is NaN
  static T min(T a, T b) { return _mm512_min_ps(a, b); }
  static T fmadd(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static T fnmadd(T a, T b, T c) { return _mm512_fnmadd_ps(a, b, c); }
  static T round(T x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static T scale_pow2(T p, T k) { return _mm512_scalef_ps(p, k); }
  // p * 2^k rounded once, 0 or inf where |k| > 192 (exp_arm's range test).
  static T scale_pow2_big(T p, T k) {
    const __m512 res = _mm512_scalef_ps(p, k);
    const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(k), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
    if (big == 0) return res;
    const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(k, _mm512_setzero_ps(), _CMP_LE_OQ),
                                            _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
    return _mm512_mask_blend_ps(big, res, alt);
  }
  static float reduce_add(T v) { return _mm512_reduce_add_ps(v); }
  // Lane p of the result = the sum of a[p]'s lanes, for 16 vectors (45 operations instead of
  // 16 separate reductions).
  static T transpose_reduce(const T* a) {
    T x[8], y[4], z[2];
    for (int i = 0; i < 8; ++i) x[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    for (int j = 0; j < 4; ++j) {
      const __m512d u = _mm512_castps_pd(x[2 * j]), v = _mm512_castps_pd(x[2 * j + 1]);
      y[j] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(u, v)), _mm512_castpd_ps(_mm512_unpackhi_pd(u, v)));
    }
    for (int k = 0; k < 2; ++k) {
      z[k] = _mm512_add_ps(_mm512_shuffle_f32x4(y[2 * k], y[2 * k + 1], 0x88), _mm512_shuffle_f32x4(y[2 * k], y[2 * k + 1], 0xdd));
    }
    return _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], 0x88), _mm512_shuffle_f32x4(z[0], z[1], 0xdd));
  }
  // Lane sums in double (long sums of exponentials round as the scalar code does): the low
  // and high halves of v added to two double accumulators, reduced at the end.
  using D = __m512d;
  static D zero_double() { return _mm512_setzero_pd(); }
  static void add_double(T v, D& lo, D& hi) {
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  }
  static double reduce_double(D lo, D hi) { return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi)); }
};
#endif

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
struct F32x8 {
  using T = __m256;
  static constexpr int kWidth = 8;
  static T zero() { return _mm256_setzero_ps(); }
  static T set1(float x) { return _mm256_set1_ps(x); }
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static T load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static T load_i8(const int8_t* p) {  // 8 signed bytes as floats (exact)
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static void store(float* p, T v) { _mm256_storeu_ps(p, v); }
  static T add(T a, T b) { return _mm256_add_ps(a, b); }
  static T sub(T a, T b) { return _mm256_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T div(T a, T b) { return _mm256_div_ps(a, b); }
  static T max(T a, T b) { return _mm256_max_ps(a, b); }  // b where either is NaN
  static T min(T a, T b) { return _mm256_min_ps(a, b); }
  static T fmadd(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  static T fnmadd(T a, T b, T c) { return _mm256_fnmadd_ps(a, b, c); }
  static T round(T x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // p * 2^k in two steps, each factor a normal float (k in [-150, 129]).
  static T scale_pow2(T p, T k) {
    const __m256i ki = _mm256_cvtps_epi32(k);
    const __m256i k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
    const __m256i bias = _mm256_set1_epi32(127);
    const T f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    const T f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
  }
  // p * 2^k rounded once (as vscalefps: in double, exact, then one conversion), 0 or inf where
  // |k| > 192 (exp_arm's range test).
  static T scale_pow2_big(T p, T k) {
    const __m256 kc = _mm256_max_ps(_mm256_set1_ps(-1000.0f), _mm256_min_ps(_mm256_set1_ps(1000.0f), k));
    const __m256i ki = _mm256_cvtps_epi32(kc);
    auto half = [](__m128 ph, __m128i kh) {
      // 2^k as a double (k in [-1000, 1000]: always a normal double).
      const __m256i e = _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(kh), _mm256_set1_epi64x(1023)), 52);
      return _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(ph), _mm256_castsi256_pd(e)));
    };
    const __m256 res = _mm256_set_m128(half(_mm256_extractf128_ps(p, 1), _mm256_extracti128_si256(ki, 1)),
                                       half(_mm256_castps256_ps128(p), _mm256_castsi256_si128(ki)));
    const __m256 big = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), k), _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 alt = _mm256_blendv_ps(_mm256_set1_ps(INFINITY), _mm256_setzero_ps(),
                                        _mm256_cmp_ps(k, _mm256_setzero_ps(), _CMP_LE_OQ));
    const __m256 nan = _mm256_cmp_ps(k, k, _CMP_UNORD_Q);
    return _mm256_blendv_ps(_mm256_blendv_ps(res, alt, big), _mm256_add_ps(p, k), nan);
  }
  // Lane p of the result = the sum of a[p]'s lanes, for 8 vectors.
  static T transpose_reduce(const T* a) {
    T x[4], y[2];
    for (int i = 0; i < 4; ++i) x[i] = _mm256_add_ps(_mm256_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm256_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    for (int j = 0; j < 2; ++j) {
      const __m256d u = _mm256_castps_pd(x[2 * j]), v = _mm256_castps_pd(x[2 * j + 1]);
      y[j] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(u, v)), _mm256_castpd_ps(_mm256_unpackhi_pd(u, v)));
    }
    return _mm256_add_ps(_mm256_permute2f128_ps(y[0], y[1], 0x20), _mm256_permute2f128_ps(y[0], y[1], 0x31));
  }
  static float reduce_add(T v) { return hsum8(v); }
  using D = __m256d;
  static D zero_double() { return _mm256_setzero_pd(); }
  static void add_double(T v, D& lo, D& hi) {
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  static double reduce_double(D lo, D hi) {
    const __m256d d = _mm256_add_pd(lo, hi);
    const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(d), _mm256_extractf128_pd(d, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
  }
};
#endif

}  // namespace ll3::kernels
