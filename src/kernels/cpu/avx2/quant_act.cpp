// AVX2 activation quantizers (Q8_K for the K-quants, Q8_0 for the legacy types), bit for bit the
// scalar references, as the AVX-512 ones (avx512/quant_act.cpp): the same float operations, the
// reference's tie-breaking for the extreme value, and its rounding (Q8_K: nearest-even, which
// vcvtps2dq does under the default MXCSR; Q8_0: roundf's half-away-from-zero, rebuilt from a
// truncation).
#include <immintrin.h>

#include <cstring>

#include "core/half.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_kernels.h"

namespace ll3::kernels::avx2 {

using namespace ll3::quant;

namespace {

inline __m256 abs_mask() { return _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)); }
inline __m256 vabs(__m256 v) { return _mm256_and_ps(v, abs_mask()); }

// Largest |x| over n (a multiple of 8) values.
inline float absmax(const float* x, int n) {
  __m256 m = _mm256_setzero_ps();
  for (int j = 0; j < n; j += 8) m = _mm256_max_ps(m, vabs(_mm256_loadu_ps(x + j)));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
}

// The first x[j] with |x[j]| == amax (the reference keeps the first one it meets).
inline float first_with_abs(const float* x, int n, float amax) {
  const __m256 va = _mm256_set1_ps(amax);
  for (int j = 0; j < n; j += 8) {
    const int m = _mm256_movemask_ps(_mm256_cmp_ps(vabs(_mm256_loadu_ps(x + j)), va, _CMP_EQ_OQ));
    if (m != 0) return x[j + __builtin_ctz(static_cast<unsigned>(m))];
  }
  return 0.0f;
}

// 32 int32 in the int8 range (four vectors, in order) to 32 bytes. The two packs work within
// 128-bit lanes, leaving dwords in the order a0 b0 c0 d0 a1 b1 c1 d1 (x0: the low 4 of x).
inline void store_bytes32(int8_t* dst, __m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
  const __m256i inorder = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), inorder);
}

inline int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

void q8_k_from_float(const float* src, void* dst, int64_t n) {
  BlockQ8_K* y = static_cast<BlockQ8_K*>(dst);
  const __m256i max_q = _mm256_set1_epi32(127);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float* x = src + i * kQKK;
    const float amax = absmax(x, kQKK);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.f / first_with_abs(x, kQKK, amax);
    const __m256 vs = _mm256_set1_ps(iscale);
    for (int g = 0; g < 8; ++g) {  // 32 values: the sums of 16 of them are bsums 2g and 2g+1
      __m256i q[4];
      for (int h = 0; h < 4; ++h) {
        q[h] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + 32 * g + 8 * h))), max_q);
      }
      store_bytes32(y[i].qs + 32 * g, q[0], q[1], q[2], q[3]);
      y[i].bsums[2 * g] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[0], q[1])));
      y[i].bsums[2 * g + 1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[2], q[3])));
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
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int h = 0; h < 4; ++h) q[h] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * h), vid));  // ties to even
    store_bytes32(y[i].qs, q[0], q[1], q[2], q[3]);
  }
}

}  // namespace ll3::kernels::avx2
