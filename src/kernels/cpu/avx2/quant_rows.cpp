// AVX2 kernels of one weight row against several activation rows (TypeTraits::dot_q_rows, the
// prompt path on CPUs without AMX or AVX-512): each weight block is unpacked once and multiplied
// into up to four activation rows, as in avx512/quant_vnni_rows.cpp. vpmaddubsw takes the place
// of vpdpbusd, and the vpmaddwd that widens its int16 pairs also applies the sub-block scale.
// Each block's exact sum is scaled in float in the order of kernels/int_dot_order.h.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/int_sums.h"
#include "kernels/cpu/row_passes.h"
#include "kernels/cpu/vec_f32.h"
#include "kernels/int_dot_order.h"
#include "kernels/quant_kernels.h"
#include "kernels/quant_simd_unpack.h"

namespace ll3::kernels::avx2 {

using namespace ll3::quant;

namespace {

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// ---- Q4_K x Q8_K ----------------------------------------------------------------------------
// Sub-block 2k is the low nibbles of qs[32k ..], 2k+1 the high ones. vpmaddubsw pairs of
// 4-bit weights and activations (|a| <= 127) stay below 2 * 15 * 127.
template <int NX>
void q4_k_rows(const void* row, const void* xq, size_t stride, int64_t n, float* y, size_t y_stride) {
  const BlockQ4_K* w = static_cast<const BlockQ4_K*>(row);
  const __m256i m0f = _mm256_set1_epi8(0x0f);
  float acc[NX] = {}, accm[NX] = {};
  for (int64_t i = 0; i < n / kQKK; ++i) {
    uint32_t s32[3];
    std::memcpy(s32, w[i].scales, 12);
    const uint32_t sc_lo = s32[0] & 0x3f3f3f3f, m_lo = s32[1] & 0x3f3f3f3f;
    const uint32_t sc_hi = (s32[2] & 0x0f0f0f0f) | (((s32[0] >> 6) & 0x03030303) << 4);
    const uint32_t m_hi = ((s32[2] >> 4) & 0x0f0f0f0f) | (((s32[1] >> 6) & 0x03030303) << 4);
    uint8_t sc[8];
    std::memcpy(sc, &sc_lo, 4);
    std::memcpy(sc + 4, &sc_hi, 4);
    // Min j twice (for the activation's 16-value sums 2j and 2j+1), as int16.
    const __m128i m8 = _mm_cvtsi64_si128(static_cast<long long>(uint64_t(m_hi) << 32 | m_lo));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    const float d = simd::h2f(w[i].d), dmin = simd::h2f(w[i].dmin);
    __m256i isum[NX];
    for (int x = 0; x < NX; ++x) isum[x] = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      const __m256i q = load32(w[i].qs + 32 * k);
      const __m256i lo = _mm256_and_si256(q, m0f), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m0f);
      const __m256i s_lo = _mm256_set1_epi16(sc[2 * k]), s_hi = _mm256_set1_epi16(sc[2 * k + 1]);
      for (int x = 0; x < NX; ++x) {
        const BlockQ8_K& a = act_row<BlockQ8_K>(xq, stride, x)[i];
        isum[x] = _mm256_add_epi32(isum[x], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load32(a.qs + 64 * k)), s_lo));
        isum[x] = _mm256_add_epi32(isum[x], _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load32(a.qs + 64 * k + 32)), s_hi));
      }
    }
    for (int x = 0; x < NX; ++x) {
      const BlockQ8_K& a = act_row<BlockQ8_K>(xq, stride, x)[i];
      const __m256i pm = _mm256_madd_epi16(load32(a.bsums), mins);  // sum_j m_j * (bsum 2j + 2j+1)
      acc[x] = int_dot_step(acc[x], hsum_i32(isum[x]), d * a.d);
      accm[x] = int_dot_min_step(accm[x], hsum_i32(pm), dmin * a.d);
    }
  }
  for (int x = 0; x < NX; ++x) y[x * y_stride] = acc[x] - accm[x];
}

// ---- Q6_K x Q8_K ----------------------------------------------------------------------------
// w = d * sc_g * (u - 32): sum w a = d * d_a * (sum_g sc_g * U_g - 32 * sum_g sc_g * bsum_g).
// Half h: vector c holds weights 128h + 32c .. + 31 (groups 8h + 2c and 8h + 2c + 1), its low 4
// bits from ql (c even: low nibbles of ql[64h ..], odd: of ql[64h + 32 ..]; c >= 2: the high
// nibbles), its 2 high bits from bit pair c of qh[32h ..]. Pairs below 2 * 63 * 127.
template <int NX>
void q6_k_rows(const void* row, const void* xq, size_t stride, int64_t n, float* y, size_t y_stride) {
  const BlockQ6_K* w = static_cast<const BlockQ6_K*>(row);
  const __m256i m0f = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
  float acc[NX] = {};
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales)));
    const float d = simd::h2f(w[i].d);
    __m256i isum[NX];
    for (int x = 0; x < NX; ++x) isum[x] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = load32(w[i].ql + 64 * h), l1 = load32(w[i].ql + 64 * h + 32), q = load32(w[i].qh + 32 * h);
      const __m256i u[4] = {
          _mm256_or_si256(_mm256_and_si256(l0, m0f), _mm256_and_si256(_mm256_slli_epi16(q, 4), m30)),
          _mm256_or_si256(_mm256_and_si256(l1, m0f), _mm256_and_si256(_mm256_slli_epi16(q, 2), m30)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m0f), _mm256_and_si256(q, m30)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m0f), _mm256_and_si256(_mm256_srli_epi16(q, 2), m30))};
      for (int c = 0; c < 4; ++c) {
        const int g = 8 * h + 2 * c;
        const __m256i s = _mm256_set_m128i(_mm_set1_epi16(w[i].scales[g + 1]), _mm_set1_epi16(w[i].scales[g]));
        for (int x = 0; x < NX; ++x) {
          const BlockQ8_K& a = act_row<BlockQ8_K>(xq, stride, x)[i];
          isum[x] = _mm256_add_epi32(isum[x], _mm256_madd_epi16(_mm256_maddubs_epi16(u[c], load32(a.qs + 128 * h + 32 * c)), s));
        }
      }
    }
    for (int x = 0; x < NX; ++x) {
      const BlockQ8_K& a = act_row<BlockQ8_K>(xq, stride, x)[i];
      const __m256i off = _mm256_madd_epi16(load32(a.bsums), sc16);
      acc[x] = int_dot_step(acc[x], hsum_i32(_mm256_sub_epi32(isum[x], _mm256_slli_epi32(off, 5))), d * a.d);
    }
  }
  for (int x = 0; x < NX; ++x) y[x * y_stride] = acc[x];
}

// ---- Q8_0 x Q8_0 ----------------------------------------------------------------------------
// The sign trick: |w| (unsigned, right for -128) times a * sign(w) (|a| <= 127): pairs fit int16.
template <int NX>
void q8_0_rows(const void* row, const void* xq, size_t stride, int64_t n, float* y, size_t y_stride) {
  const BlockQ8_0* w = static_cast<const BlockQ8_0*>(row);
  const __m256i ones16 = _mm256_set1_epi16(1);
  float acc[NX] = {};
  const int64_t nb = n / kQK;
  // Two blocks per step: their products are independent, and the f16 scales of a step (2 weight
  // blocks, up to 4 activation rows each) are converted together.
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const __m256i q0 = load32(w[i].qs), q1 = load32(w[i + 1].qs);
    const __m256i aq0 = _mm256_sign_epi8(q0, q0), aq1 = _mm256_sign_epi8(q1, q1);
    // h[0], h[1]: the weight blocks' scales; h[8 + x], h[12 + x]: activation row x's.
    alignas(16) uint16_t h[16] = {w[i].d, w[i + 1].d};
    for (int x = 0; x < NX; ++x) {
      const BlockQ8_0* a = act_row<BlockQ8_0>(xq, stride, x) + i;
      h[8 + x] = a[0].d;
      h[12 + x] = a[1].d;
    }
    // All 2 x NX scale products in one multiply: f[x] = d_w0 * d_a0(x), f[4 + x] = d_w1 * d_a1(x),
    // each then broadcast straight from memory.
    const __m256 fw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
    const __m256 fa = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h + 8)));
    const __m256 w01 = _mm256_permutevar8x32_ps(fw, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
    alignas(32) float f[8];
    _mm256_store_ps(f, _mm256_mul_ps(w01, fa));
    for (int x = 0; x < NX; ++x) {
      const BlockQ8_0* a = act_row<BlockQ8_0>(xq, stride, x) + i;
      const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(aq0, _mm256_sign_epi8(load32(a[0].qs), q0)), ones16);
      const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(aq1, _mm256_sign_epi8(load32(a[1].qs), q1)), ones16);
      acc[x] = int_dot_step(acc[x], hsum_i32(p0), f[x]);
      acc[x] = int_dot_step(acc[x], hsum_i32(p1), f[4 + x]);
    }
  }
  for (; i < nb; ++i) {
    const __m256i q = load32(w[i].qs);
    const __m256i aq = _mm256_sign_epi8(q, q);
    const float d = simd::h2f(w[i].d);
    for (int x = 0; x < NX; ++x) {
      const BlockQ8_0& a = act_row<BlockQ8_0>(xq, stride, x)[i];
      const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aq, _mm256_sign_epi8(load32(a.qs), q)), ones16);
      acc[x] = int_dot_step(acc[x], hsum_i32(p), d * simd::h2f(a.d));
    }
  }
  for (int x = 0; x < NX; ++x) y[x * y_stride] = acc[x];
}

template <int NX> struct Q4K { static void run(const void* r, const void* a, size_t s, int64_t n, float* y, size_t ys) { q4_k_rows<NX>(r, a, s, n, y, ys); } };
template <int NX> struct Q6K { static void run(const void* r, const void* a, size_t s, int64_t n, float* y, size_t ys) { q6_k_rows<NX>(r, a, s, n, y, ys); } };
template <int NX> struct Q80 { static void run(const void* r, const void* a, size_t s, int64_t n, float* y, size_t ys) { q8_0_rows<NX>(r, a, s, n, y, ys); } };

}  // namespace

void q4_k_dot_q8_k_rows(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y, size_t y_stride) {
  run_row_passes<Q4K>(row, xq, stride, nx, n, y, y_stride);
}
void q6_k_dot_q8_k_rows(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y, size_t y_stride) {
  run_row_passes<Q6K>(row, xq, stride, nx, n, y, y_stride);
}
void q8_0_dot_q8_0_rows(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y, size_t y_stride) {
  run_row_passes<Q80>(row, xq, stride, nx, n, y, y_stride);
}

}  // namespace ll3::kernels::avx2
