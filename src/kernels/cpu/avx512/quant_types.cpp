// AVX-512 kernels of the quantized types with float activations: each block is unpacked to bytes
// (quant_simd_unpack.h), widened to 16 floats at a time, scaled, and multiplied into the
// activations with FMAs. to_float is exact (multiply, then subtract: never fused), so it gives
// ggml's bits like the scalar reference.
#include <immintrin.h>

#include "kernels/quant_kernels.h"
#include "kernels/quant_simd_unpack.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace ll3::kernels::avx512 {

using namespace ll3::quant;
using simd::KUnpacked;

namespace {

inline __m512 widen_u8(const uint8_t* p) {  // 16 bytes -> 16 floats
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p))));
}
inline __m512 widen_i8(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)); }

// sum_j w_j x_j over one unpacked super-block, w = s * (u - off) - mn per 16.
inline __m512 k_block_dot(const KUnpacked& k, const float* x, __m512 acc) {
  const __m512 off = _mm512_set1_ps(static_cast<float>(k.off));
  for (int g = 0; g < 16; ++g) {
    const __m512 q = _mm512_sub_ps(widen_u8(k.u + 16 * g), off);
    const __m512 w = _mm512_fmsub_ps(q, _mm512_set1_ps(k.s[g]), _mm512_set1_ps(k.mn[g]));
    acc = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + 16 * g), acc);
  }
  return acc;
}

// Stores 32 dequantized values as floats, or rounded to bf16 (nearest even) for the AMX path.
inline void store32_out(__m512 lo, __m512 hi, float* y) {
  _mm512_storeu_ps(y, lo);
  _mm512_storeu_ps(y + 16, hi);
}
inline void store32_out(__m512 lo, __m512 hi, uint16_t* y) {
  _mm512_storeu_si512(y, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
}

// Exact dequantization of one unpacked super-block (ggml's order: s * q, then - mn).
template <class Out>
inline void k_block_to_out(const KUnpacked& k, Out* y) {
  const __m512 off = _mm512_set1_ps(static_cast<float>(k.off));
  __m512 w[2];
  for (int g = 0; g < 16; ++g) {
    const __m512 q = _mm512_sub_ps(widen_u8(k.u + 16 * g), off);
    w[g & 1] = _mm512_mul_ps(_mm512_set1_ps(k.s[g]), q);
    if (k.has_min) w[g & 1] = _mm512_sub_ps(w[g & 1], _mm512_set1_ps(k.mn[g]));
    if (g & 1) store32_out(w[0], w[1], y + 16 * (g - 1));
  }
}

template <class Block, void (*Unpack)(const Block&, KUnpacked&)>
float k_dot(const void* row, const float* x, int64_t n) {
  const Block* b = static_cast<const Block*>(row);
  KUnpacked k;
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    Unpack(b[i], k);
    acc = k_block_dot(k, x + i * kQKK, acc);
  }
  return _mm512_reduce_add_ps(acc);
}

template <class Block, void (*Unpack)(const Block&, KUnpacked&), class Out>
void k_to_out(const void* src, Out* dst, int64_t n) {
  const Block* b = static_cast<const Block*>(src);
  KUnpacked k;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    Unpack(b[i], k);
    k_block_to_out(k, dst + i * kQKK);
  }
}

// Legacy blocks: 32 signed or unsigned byte values -> sum q_j x_j as 16 lanes.
inline __m512 dot32_i8(__m256i q, const float* x) {
  const __m512 lo = widen_i8(_mm256_castsi256_si128(q));
  const __m512 hi = widen_i8(_mm256_extracti128_si256(q, 1));
  return _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + 16), _mm512_mul_ps(lo, _mm512_loadu_ps(x)));
}
inline __m512 xsum32(const float* x) { return _mm512_add_ps(_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16)); }

// y = d * q (+ m): exact, as ggml computes q*d (+ m) with one rounding each.
template <class Out>
inline void store32(__m256i q, float d, float m, bool has_m, Out* y) {
  const __m512 vd = _mm512_set1_ps(d), vm = _mm512_set1_ps(m);
  __m512 lo = _mm512_mul_ps(widen_i8(_mm256_castsi256_si128(q)), vd);
  __m512 hi = _mm512_mul_ps(widen_i8(_mm256_extracti128_si256(q, 1)), vd);
  if (has_m) {
    lo = _mm512_add_ps(lo, vm);
    hi = _mm512_add_ps(hi, vm);
  }
  store32_out(lo, hi, y);
}

inline __m256i q4_0_vals(const BlockQ4_0& b) {
  return _mm256_sub_epi8(simd::unpack_q4_32(b.qs), _mm256_set1_epi8(8));
}
inline __m256i q5_0_vals(const BlockQ5_0& b) {
  return _mm256_sub_epi8(simd::unpack_q5_32(b.qs, b.qh), _mm256_set1_epi8(16));
}

}  // namespace

float q4_0_dot(const void* row, const float* x, int64_t n) {
  const BlockQ4_0* b = static_cast<const BlockQ4_0*>(row);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    acc = _mm512_fmadd_ps(_mm512_set1_ps(simd::h2f(b[i].d)), dot32_i8(q4_0_vals(b[i]), x + i * kQK), acc);
  }
  return _mm512_reduce_add_ps(acc);
}
template <class Out>
void q4_0_to_out(const void* src, Out* dst, int64_t n) {
  const BlockQ4_0* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) store32(q4_0_vals(b[i]), simd::h2f(b[i].d), 0, false, dst + i * kQK);
}

float q4_1_dot(const void* row, const float* x, int64_t n) {
  const BlockQ4_1* b = static_cast<const BlockQ4_1*>(row);
  __m512 acc = _mm512_setzero_ps(), accm = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* xb = x + i * kQK;
    acc = _mm512_fmadd_ps(_mm512_set1_ps(simd::h2f(b[i].d)), dot32_i8(simd::unpack_q4_32(b[i].qs), xb), acc);
    accm = _mm512_fmadd_ps(_mm512_set1_ps(simd::h2f(b[i].m)), xsum32(xb), accm);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc, accm));
}
template <class Out>
void q4_1_to_out(const void* src, Out* dst, int64_t n) {
  const BlockQ4_1* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    store32(simd::unpack_q4_32(b[i].qs), simd::h2f(b[i].d), simd::h2f(b[i].m), true, dst + i * kQK);
  }
}

float q5_0_dot(const void* row, const float* x, int64_t n) {
  const BlockQ5_0* b = static_cast<const BlockQ5_0*>(row);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    acc = _mm512_fmadd_ps(_mm512_set1_ps(simd::h2f(b[i].d)), dot32_i8(q5_0_vals(b[i]), x + i * kQK), acc);
  }
  return _mm512_reduce_add_ps(acc);
}
template <class Out>
void q5_0_to_out(const void* src, Out* dst, int64_t n) {
  const BlockQ5_0* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) store32(q5_0_vals(b[i]), simd::h2f(b[i].d), 0, false, dst + i * kQK);
}

float q5_1_dot(const void* row, const float* x, int64_t n) {
  const BlockQ5_1* b = static_cast<const BlockQ5_1*>(row);
  __m512 acc = _mm512_setzero_ps(), accm = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* xb = x + i * kQK;
    acc = _mm512_fmadd_ps(_mm512_set1_ps(simd::h2f(b[i].d)),
                          dot32_i8(simd::unpack_q5_32(b[i].qs, b[i].qh), xb), acc);
    accm = _mm512_fmadd_ps(_mm512_set1_ps(simd::h2f(b[i].m)), xsum32(xb), accm);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc, accm));
}
template <class Out>
void q5_1_to_out(const void* src, Out* dst, int64_t n) {
  const BlockQ5_1* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    store32(simd::unpack_q5_32(b[i].qs, b[i].qh), simd::h2f(b[i].d), simd::h2f(b[i].m), true,
            dst + i * kQK);
  }
}

float q8_0_dot(const void* row, const float* x, int64_t n) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(row);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs));
    acc = _mm512_fmadd_ps(_mm512_set1_ps(simd::h2f(b[i].d)), dot32_i8(q, x + i * kQK), acc);
  }
  return _mm512_reduce_add_ps(acc);
}
template <class Out>
void q8_0_to_out(const void* src, Out* dst, int64_t n) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs));
    store32(q, simd::h2f(b[i].d), 0, false, dst + i * kQK);
  }
}

#define LL3_K_KERNELS(T, Block)                                                    \
  float T##_dot(const void* row, const float* x, int64_t n) {                      \
    return k_dot<Block, simd::unpack_##T>(row, x, n);                              \
  }                                                                                \
  void T##_to_float(const void* src, float* dst, int64_t n) {                      \
    k_to_out<Block, simd::unpack_##T>(src, dst, n);                                \
  }                                                                                \
  void T##_to_bf16(const void* src, uint16_t* dst, int64_t n) {                    \
    k_to_out<Block, simd::unpack_##T>(src, dst, n);                                \
  }

LL3_K_KERNELS(q2_k, BlockQ2_K)
LL3_K_KERNELS(q3_k, BlockQ3_K)
LL3_K_KERNELS(q4_k, BlockQ4_K)
LL3_K_KERNELS(q5_k, BlockQ5_K)
LL3_K_KERNELS(q6_k, BlockQ6_K)

#undef LL3_K_KERNELS

#define LL3_LEGACY_OUT(T)                                                          \
  void T##_to_float(const void* src, float* dst, int64_t n) { T##_to_out(src, dst, n); } \
  void T##_to_bf16(const void* src, uint16_t* dst, int64_t n) { T##_to_out(src, dst, n); }

LL3_LEGACY_OUT(q4_0)
LL3_LEGACY_OUT(q4_1)
LL3_LEGACY_OUT(q5_0)
LL3_LEGACY_OUT(q5_1)
LL3_LEGACY_OUT(q8_0)

#undef LL3_LEGACY_OUT

}  // namespace ll3::kernels::avx512
