// AVX2 integer dots (no VNNI): u8 x s8 products by vpmaddubsw, pairs summed into int16, then
// vpmaddwd into int32, summed exactly per block and scaled in float once per block. The int16 pair sums cannot saturate: unsigned weight bytes
// are at most 128 (|w| after the sign trick) and activations at most 127 in magnitude, so a pair
// is at most 2 * 128 * 127 = 32512. Same scheme as the AVX-512 file.
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/int_sums.h"
#include "kernels/cpu/vec_f32.h"
#include "kernels/int_dot_order.h"
#include "kernels/quant_kernels.h"
#include "kernels/quant_simd_unpack.h"

namespace ll3::kernels::avx2 {

using namespace ll3::quant;
using simd::KUnpacked;

namespace {

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline __m256i dot_unsigned(__m256i u, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1));
}
inline __m256i dot_signed(__m256i w, __m256i a) {
  return dot_unsigned(_mm256_abs_epi8(w), _mm256_sign_epi8(a, w));
}

// Per 32-weight block the exact sum(w a), then the float step of kernels/int_dot_order.h.
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

__m256i q4_0_vals(const BlockQ4_0& b) { return _mm256_sub_epi8(simd::unpack_q4_32(b.qs), _mm256_set1_epi8(8)); }
__m256i q5_0_vals(const BlockQ5_0& b) {
  return _mm256_sub_epi8(simd::unpack_q5_32(b.qs, b.qh), _mm256_set1_epi8(16));
}
__m256i q8_0_vals(const BlockQ8_0& b) { return load32(b.qs); }
__m256i q4_1_vals(const BlockQ4_1& b) { return simd::unpack_q4_32(b.qs); }
__m256i q5_1_vals(const BlockQ5_1& b) { return simd::unpack_q5_32(b.qs, b.qh); }
float q4_1_offset(const BlockQ4_1& w, const BlockQ8_1& a, float acc) { return std::fma(simd::h2f(w.m), simd::h2f(a.s), acc); }
float q5_1_offset(const BlockQ5_1& w, const BlockQ8_1& a, float acc) { return std::fma(simd::h2f(w.m), simd::h2f(a.s), acc); }

// K-quants: 32 bytes per step, lanes 0-3 of the int32 products belong to group 2c, lanes 4-7 to
// group 2c + 1; scaled per group in int32, the offset and the mins from the activation's group
// sums, then the block's exact sums go through the float steps of kernels/int_dot_order.h.
template <class Block, void (*Unpack)(const Block&, KUnpacked&)>
float k_dot_q8k(const void* row, const void* xq, int64_t n) {
  const Block* w = static_cast<const Block*>(row);
  const BlockQ8_K* a = static_cast<const BlockQ8_K*>(xq);
  KUnpacked k;
  float acc = 0.0f, accm = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    Unpack(w[i], k);
    __m256i isum = _mm256_setzero_si256();
    LL3_UNROLL for (int c = 0; c < 8; ++c) {
      const __m256i p = dot_unsigned(load32(k.u + 32 * c), load32(a[i].qs + 32 * c));
      const __m256i sc = _mm256_set_m128i(_mm_set1_epi32(k.isc[2 * c + 1]), _mm_set1_epi32(k.isc[2 * c]));
      isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(p, sc));
    }
    const __m256i bs = load32(a[i].bsums);
    int32_t s = hsum_i32(isum);
    if (k.off != 0) s -= k.off * hsum_i32(_mm256_madd_epi16(bs, load32(k.isc)));
    acc = int_dot_step(acc, s, simd::h2f(w[i].d) * a[i].d);
    if constexpr (requires { w[i].dmin; }) {
      accm = int_dot_min_step(accm, hsum_i32(_mm256_madd_epi16(bs, load32(k.imn))), simd::h2f(w[i].dmin) * a[i].d);
    }
  }
  return acc - accm;
}

}  // namespace

float q4_0_dot_q8_0(const void* row, const void* xq, int64_t n) {
  return legacy_dot<BlockQ4_0, BlockQ8_0, true, q4_0_vals>(row, xq, n);
}
float q5_0_dot_q8_0(const void* row, const void* xq, int64_t n) {
  return legacy_dot<BlockQ5_0, BlockQ8_0, true, q5_0_vals>(row, xq, n);
}
float q8_0_dot_q8_0(const void* row, const void* xq, int64_t n) {
  return legacy_dot<BlockQ8_0, BlockQ8_0, true, q8_0_vals>(row, xq, n);
}
float q4_1_dot_q8_1(const void* row, const void* xq, int64_t n) {
  return legacy_dot<BlockQ4_1, BlockQ8_1, false, q4_1_vals, q4_1_offset>(row, xq, n);
}
float q5_1_dot_q8_1(const void* row, const void* xq, int64_t n) {
  return legacy_dot<BlockQ5_1, BlockQ8_1, false, q5_1_vals, q5_1_offset>(row, xq, n);
}

float q2_k_dot_q8_k(const void* row, const void* xq, int64_t n) { return k_dot_q8k<BlockQ2_K, simd::unpack_q2_k>(row, xq, n); }
float q3_k_dot_q8_k(const void* row, const void* xq, int64_t n) { return k_dot_q8k<BlockQ3_K, simd::unpack_q3_k>(row, xq, n); }
float q4_k_dot_q8_k(const void* row, const void* xq, int64_t n) { return k_dot_q8k<BlockQ4_K, simd::unpack_q4_k>(row, xq, n); }
float q5_k_dot_q8_k(const void* row, const void* xq, int64_t n) { return k_dot_q8k<BlockQ5_K, simd::unpack_q5_k>(row, xq, n); }
float q6_k_dot_q8_k(const void* row, const void* xq, int64_t n) { return k_dot_q8k<BlockQ6_K, simd::unpack_q6_k>(row, xq, n); }

}  // namespace ll3::kernels::avx2
