// AVX-512 VNNI integer dots of the less common legacy types (Q5_0, Q4_1, Q5_1): weight blocks
// times int8 activation blocks, products summed exactly in int32 by vpdpbusd (unsigned weight
// bytes x signed activation bytes), then scaled in float once per block. Signed weights use the sign trick:
// |w| x (a * sign(w)). The K-quants, Q4_0 and Q8_0 have their kernels in quant_vnni_rows.cpp.
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/int_sums.h"
#include "kernels/cpu/vec_f32.h"
#include "kernels/int_dot_order.h"
#include "kernels/quant_kernels.h"
#include "kernels/quant_simd_unpack.h"

namespace ll3::kernels::avx512 {

using namespace ll3::quant;

namespace {

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// sum of w * a over 32 signed weight bytes, as 8 int32 lanes.
inline __m256i dot_signed(__m256i w, __m256i a) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(a, w));
}
inline __m256i dot_unsigned(__m256i u, __m256i a) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, a);
}

// Legacy types, in the order of kernels/int_dot_order.h: per 32-weight block the exact sum(w a)
// times d_w * d_a. Vals(block) gives the weight bytes (signed when Signed), Offset(block, act,
// acc) adds an extra per-block term (the "_1" types' m * s).
template <class W, class A, bool Signed, __m256i (*Vals)(const W&),
          float (*Offset)(const W&, const A&, float) = nullptr>
float legacy_dot(const void* row, const void* xq, int64_t n) {
  const W* w = static_cast<const W*>(row);
  const A* a = static_cast<const A*>(xq);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i v = Vals(w[i]);
    const __m256i qa = load32(a[i].qs);
    const __m256i p = Signed ? dot_signed(v, qa) : dot_unsigned(v, qa);
    acc = int_dot_step(acc, hsum_i32(p), simd::h2f(w[i].d) * simd::h2f(a[i].d));
    if constexpr (Offset != nullptr) acc = Offset(w[i], a[i], acc);
  }
  return acc;
}

__m256i q5_0_vals(const BlockQ5_0& b) {
  return _mm256_sub_epi8(simd::unpack_q5_32(b.qs, b.qh), _mm256_set1_epi8(16));
}
__m256i q4_1_vals(const BlockQ4_1& b) { return simd::unpack_q4_32(b.qs); }
__m256i q5_1_vals(const BlockQ5_1& b) { return simd::unpack_q5_32(b.qs, b.qh); }
float q4_1_offset(const BlockQ4_1& w, const BlockQ8_1& a, float acc) { return std::fma(simd::h2f(w.m), simd::h2f(a.s), acc); }
float q5_1_offset(const BlockQ5_1& w, const BlockQ8_1& a, float acc) { return std::fma(simd::h2f(w.m), simd::h2f(a.s), acc); }

}  // namespace

float q5_0_dot_q8_0(const void* row, const void* xq, int64_t n) {
  return legacy_dot<BlockQ5_0, BlockQ8_0, true, q5_0_vals>(row, xq, n);
}
float q4_1_dot_q8_1(const void* row, const void* xq, int64_t n) {
  return legacy_dot<BlockQ4_1, BlockQ8_1, false, q4_1_vals, q4_1_offset>(row, xq, n);
}
float q5_1_dot_q8_1(const void* row, const void* xq, int64_t n) {
  return legacy_dot<BlockQ5_1, BlockQ8_1, false, q5_1_vals, q5_1_offset>(row, xq, n);
}

}  // namespace ll3::kernels::avx512
