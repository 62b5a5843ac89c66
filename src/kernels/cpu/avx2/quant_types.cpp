// AVX2 kernels of the quantized types with float activations (the same scheme as the AVX-512
// file, 8 lanes wide): unpack each block to bytes, widen 8 at a time, scale, FMA into the
// activations. to_float is exact (separate multiply and subtract, never fused).
#include <immintrin.h>

#include "kernels/cpu/vec_f32.h"
#include "kernels/quant_kernels.h"
#include "kernels/quant_simd_unpack.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace ll3::kernels::avx2 {

using namespace ll3::quant;
using simd::KUnpacked;

namespace {

inline __m256 widen_u8(const uint8_t* p) {  // 8 bytes -> 8 floats
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline __m256 widen_i8(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

inline __m256 k_block_dot(const KUnpacked& k, const float* x, __m256 acc0, __m256* acc1) {
  const __m256 off = _mm256_set1_ps(static_cast<float>(k.off));
  __m256 a1 = *acc1;
  for (int g = 0; g < 16; ++g) {
    const __m256 s = _mm256_set1_ps(k.s[g]), m = _mm256_set1_ps(k.mn[g]);
    const __m256 q0 = _mm256_sub_ps(widen_u8(k.u + 16 * g), off);
    const __m256 q1 = _mm256_sub_ps(widen_u8(k.u + 16 * g + 8), off);
    acc0 = _mm256_fmadd_ps(_mm256_fmsub_ps(q0, s, m), _mm256_loadu_ps(x + 16 * g), acc0);
    a1 = _mm256_fmadd_ps(_mm256_fmsub_ps(q1, s, m), _mm256_loadu_ps(x + 16 * g + 8), a1);
  }
  *acc1 = a1;
  return acc0;
}

inline void k_block_to_float(const KUnpacked& k, float* y) {
  const __m256 off = _mm256_set1_ps(static_cast<float>(k.off));
  for (int j = 0; j < kQKK; j += 8) {
    const __m256 q = _mm256_sub_ps(widen_u8(k.u + j), off);
    __m256 w = _mm256_mul_ps(_mm256_set1_ps(k.s[j / 16]), q);
    if (k.has_min) w = _mm256_sub_ps(w, _mm256_set1_ps(k.mn[j / 16]));
    _mm256_storeu_ps(y + j, w);
  }
}

template <class Block, void (*Unpack)(const Block&, KUnpacked&)>
float k_dot(const void* row, const float* x, int64_t n) {
  const Block* b = static_cast<const Block*>(row);
  KUnpacked k;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    Unpack(b[i], k);
    acc0 = k_block_dot(k, x + i * kQKK, acc0, &acc1);
  }
  return hsum8(_mm256_add_ps(acc0, acc1));
}

template <class Block, void (*Unpack)(const Block&, KUnpacked&)>
void k_to_float(const void* src, float* dst, int64_t n) {
  const Block* b = static_cast<const Block*>(src);
  KUnpacked k;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    Unpack(b[i], k);
    k_block_to_float(k, dst + i * kQKK);
  }
}

// sum q_j x_j of 32 byte values as 8 lanes.
inline __m256 dot32_i8(__m256i q, const float* x) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  __m256 a = _mm256_mul_ps(widen_i8(lo), _mm256_loadu_ps(x));
  a = _mm256_fmadd_ps(widen_i8(_mm_srli_si128(lo, 8)), _mm256_loadu_ps(x + 8), a);
  a = _mm256_fmadd_ps(widen_i8(hi), _mm256_loadu_ps(x + 16), a);
  return _mm256_fmadd_ps(widen_i8(_mm_srli_si128(hi, 8)), _mm256_loadu_ps(x + 24), a);
}
inline __m256 xsum32(const float* x) {
  return _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8)),
                       _mm256_add_ps(_mm256_loadu_ps(x + 16), _mm256_loadu_ps(x + 24)));
}

inline void store32(__m256i q, float d, float m, bool has_m, float* y) {
  const __m256 vd = _mm256_set1_ps(d), vm = _mm256_set1_ps(m);
  const __m128i half[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
  for (int k = 0; k < 4; ++k) {
    const __m128i bytes = (k & 1) ? _mm_srli_si128(half[k / 2], 8) : half[k / 2];
    __m256 w = _mm256_mul_ps(widen_i8(bytes), vd);
    if (has_m) w = _mm256_add_ps(w, vm);
    _mm256_storeu_ps(y + 8 * k, w);
  }
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
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    acc = _mm256_fmadd_ps(_mm256_set1_ps(simd::h2f(b[i].d)), dot32_i8(q4_0_vals(b[i]), x + i * kQK), acc);
  }
  return hsum8(acc);
}
void q4_0_to_float(const void* src, float* dst, int64_t n) {
  const BlockQ4_0* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) store32(q4_0_vals(b[i]), simd::h2f(b[i].d), 0, false, dst + i * kQK);
}

float q4_1_dot(const void* row, const float* x, int64_t n) {
  const BlockQ4_1* b = static_cast<const BlockQ4_1*>(row);
  __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* xb = x + i * kQK;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(simd::h2f(b[i].d)), dot32_i8(simd::unpack_q4_32(b[i].qs), xb), acc);
    accm = _mm256_fmadd_ps(_mm256_set1_ps(simd::h2f(b[i].m)), xsum32(xb), accm);
  }
  return hsum8(_mm256_add_ps(acc, accm));
}
void q4_1_to_float(const void* src, float* dst, int64_t n) {
  const BlockQ4_1* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    store32(simd::unpack_q4_32(b[i].qs), simd::h2f(b[i].d), simd::h2f(b[i].m), true, dst + i * kQK);
  }
}

float q5_0_dot(const void* row, const float* x, int64_t n) {
  const BlockQ5_0* b = static_cast<const BlockQ5_0*>(row);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    acc = _mm256_fmadd_ps(_mm256_set1_ps(simd::h2f(b[i].d)), dot32_i8(q5_0_vals(b[i]), x + i * kQK), acc);
  }
  return hsum8(acc);
}
void q5_0_to_float(const void* src, float* dst, int64_t n) {
  const BlockQ5_0* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) store32(q5_0_vals(b[i]), simd::h2f(b[i].d), 0, false, dst + i * kQK);
}

float q5_1_dot(const void* row, const float* x, int64_t n) {
  const BlockQ5_1* b = static_cast<const BlockQ5_1*>(row);
  __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* xb = x + i * kQK;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(simd::h2f(b[i].d)),
                          dot32_i8(simd::unpack_q5_32(b[i].qs, b[i].qh), xb), acc);
    accm = _mm256_fmadd_ps(_mm256_set1_ps(simd::h2f(b[i].m)), xsum32(xb), accm);
  }
  return hsum8(_mm256_add_ps(acc, accm));
}
void q5_1_to_float(const void* src, float* dst, int64_t n) {
  const BlockQ5_1* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    store32(simd::unpack_q5_32(b[i].qs, b[i].qh), simd::h2f(b[i].d), simd::h2f(b[i].m), true,
            dst + i * kQK);
  }
}

float q8_0_dot(const void* row, const float* x, int64_t n) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(row);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(simd::h2f(b[i].d)), dot32_i8(q, x + i * kQK), acc);
  }
  return hsum8(acc);
}
void q8_0_to_float(const void* src, float* dst, int64_t n) {
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
    k_to_float<Block, simd::unpack_##T>(src, dst, n);                              \
  }

LL3_K_KERNELS(q2_k, BlockQ2_K)
LL3_K_KERNELS(q3_k, BlockQ3_K)
LL3_K_KERNELS(q4_k, BlockQ4_K)
LL3_K_KERNELS(q5_k, BlockQ5_K)
LL3_K_KERNELS(q6_k, BlockQ6_K)

#undef LL3_K_KERNELS

}  // namespace ll3::kernels::avx2
