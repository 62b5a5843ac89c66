// AVX2 W8A8 (kernels/w8a8.h), no VNNI: a packed line (w + 128 for 4 columns of 16 rows) is read as
// two ymm halves (rows 0-7, 8-15), made signed again (xor 0x80), and multiplied by the sign
// trick: vpmaddubsw(|w|, sign(x, w)) sums two products |w| * (+-x) = w * x into int16, which
// cannot saturate since |w|, |x| <= 127 (2 * 127 * 127 = 32258), then vpmaddwd by ones makes each
// row's 4 products one int32 lane. No offset to subtract (the weights are signed by then).
// Register tiles of one panel x 4 activation rows (8 accumulators of 16 ymm), two panels x one
// row for decode. Bit for bit the scalar reference.
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "kernels/quant_simd_unpack.h"  // LL3_UNROLL
#include "kernels/w8a8.h"

namespace ll3::kernels::avx2 {

namespace {

constexpr int R = static_cast<int>(kW8A8PanelRows);
constexpr int kMaxNX = 4;        // activation rows of a prompt tile
constexpr int kBlockPanels = 4;  // panels every activation tile passes over while it is in L1

inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// sum of 4 products per int32 lane: w (signed), aw = |w|, xb the activation's broadcast dword.
inline __m256i dot4(__m256i acc, __m256i w, __m256i aw, __m256i xb, __m256i ones16) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xb, w)), ones16));
}

inline void store_scaled(__m256i sum, const float* ws, float xs, float* y) {
  const __m256 scale = _mm256_mul_ps(_mm256_loadu_ps(ws), _mm256_set1_ps(xs));  // w_scale[r] * x_scale[t]
  _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(sum), scale));
}

// NP panels (at w, panel_bytes apart) x NX activation rows over the whole row.
template <int NP, int NX>
void tile(const uint8_t* w, size_t panel_bytes, const int8_t* x, size_t x_stride, const float* w_scale,
          const float* x_scale, int64_t k, float* y, size_t y_stride) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones16 = _mm256_set1_epi16(1);
  __m256i acc[NP][2][NX];
  LL3_UNROLL for (int p = 0; p < NP; ++p) {
    LL3_UNROLL for (int h = 0; h < 2; ++h) {
      LL3_UNROLL for (int t = 0; t < NX; ++t) acc[p][h][t] = _mm256_setzero_si256();
    }
  }
  for (int64_t g = 0; g < k / 4; ++g) {
    __m256i ws[NP][2], aw[NP][2];
    LL3_UNROLL for (int p = 0; p < NP; ++p) {
      LL3_UNROLL for (int h = 0; h < 2; ++h) {
        const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + p * panel_bytes + 64 * g + 32 * h));
        ws[p][h] = _mm256_xor_si256(u, flip);
        aw[p][h] = _mm256_abs_epi8(ws[p][h]);
      }
    }
    LL3_UNROLL for (int t = 0; t < NX; ++t) {
      const __m256i xb = bcast4(x + t * x_stride + 4 * g);
      LL3_UNROLL for (int p = 0; p < NP; ++p) {
        LL3_UNROLL for (int h = 0; h < 2; ++h) acc[p][h][t] = dot4(acc[p][h][t], ws[p][h], aw[p][h], xb, ones16);
      }
    }
  }
  LL3_UNROLL for (int p = 0; p < NP; ++p) {
    LL3_UNROLL for (int h = 0; h < 2; ++h) {
      LL3_UNROLL for (int t = 0; t < NX; ++t) {
        store_scaled(acc[p][h][t], w_scale + p * R + 8 * h, x_scale[t], y + t * y_stride + p * R + 8 * h);
      }
    }
  }
}

inline __m256 clamp127(__m256 v) {
  // vminps / vmaxps return the second operand when unordered: a NaN becomes +127 (the reference's rule).
  v = _mm256_min_ps(v, _mm256_set1_ps(127.0f));
  return _mm256_max_ps(v, _mm256_set1_ps(-127.0f));
}

// The reference's rule for one value (the tail).
inline int8_t quantize_one(float x, float inv) {
  float v = x * inv;
  v = v < 127.0f ? v : 127.0f;
  v = v > -127.0f ? v : -127.0f;
  return static_cast<int8_t>(std::nearbyint(v));
}

}  // namespace

void w8a8_quantize_static(const float* x, int64_t k, float scale, int8_t* xq) {
  const float inv_s = 1.0f / scale;
  const __m256 inv = _mm256_set1_ps(inv_s);
  // The dwords of packs(packs(a, b), packs(c, d)) are a0-3 b0-3 c0-3 d0-3 a4-7 b4-7 c4-7 d4-7.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    __m256i q[4];
    for (int j = 0; j < 4; ++j) {
      // vcvtps2dq rounds by MXCSR: nearest, ties to even (as nearbyint under the default mode).
      q[j] = _mm256_cvtps_epi32(clamp127(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * j), inv)));
    }
    const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(xq + i), _mm256_permutevar8x32_epi32(b, order));
  }
  for (; i < k; ++i) xq[i] = quantize_one(x[i], inv_s);
}

float w8a8_quantize_dynamic(const float* x, int64_t k, int8_t* xq) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 mx = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) mx = _mm256_max_ps(mx, _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
  for (; i < k; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = amax / 127.0f;
  if (!(scale >= FLT_MIN)) {
    std::memset(xq, 0, static_cast<size_t>(k));
    return 1.0f;
  }
  w8a8_quantize_static(x, k, scale, xq);
  return scale;
}

void w8a8_gemm(const void* packed, const float* w_scale, int64_t row0, int64_t n_rows, const int8_t* x,
               size_t x_stride, const float* x_scale, int64_t n_x, int64_t k, float* y, size_t y_stride) {
  LL3_CHECK(row0 % R == 0 && n_rows % R == 0 && k % kW8A8KAlign == 0 && k <= kW8A8MaxK);
  const uint8_t* base = static_cast<const uint8_t*>(packed);
  const size_t pb = static_cast<size_t>(R * k);
  const int64_t end = row0 + n_rows;
  if (n_x == 1) {  // decode: two panels at a time, their four halves' chains in flight
    int64_t r = row0;
    for (; r + 2 * R <= end; r += 2 * R) tile<2, 1>(base + r * k, pb, x, x_stride, w_scale + r, x_scale, k, y + r, y_stride);
    if (r < end) tile<1, 1>(base + r * k, pb, x, x_stride, w_scale + r, x_scale, k, y + r, y_stride);
    return;
  }
  for (int64_t r0 = row0; r0 < end; r0 += kBlockPanels * R) {
    const int64_t r1 = std::min(end, r0 + kBlockPanels * R);
    for (int64_t t = 0; t < n_x; t += kMaxNX) {
      const int8_t* xt = x + t * x_stride;
      for (int64_t r = r0; r < r1; r += R) {
        const uint8_t* w = base + r * k;
        float* yt = y + t * y_stride + r;
        switch (std::min<int64_t>(kMaxNX, n_x - t)) {
          case 4: tile<1, 4>(w, pb, xt, x_stride, w_scale + r, x_scale + t, k, yt, y_stride); break;
          case 3: tile<1, 3>(w, pb, xt, x_stride, w_scale + r, x_scale + t, k, yt, y_stride); break;
          case 2: tile<1, 2>(w, pb, xt, x_stride, w_scale + r, x_scale + t, k, yt, y_stride); break;
          default: tile<1, 1>(w, pb, xt, x_stride, w_scale + r, x_scale + t, k, yt, y_stride); break;
        }
      }
    }
  }
}

}  // namespace ll3::kernels::avx2
