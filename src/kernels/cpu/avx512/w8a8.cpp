// AVX-512 VNNI W8A8 (kernels/w8a8.h): `vpdpbusd` of the packed weights (w + 128, unsigned, one
// 64-byte line = 4 columns of 16 rows) by a broadcast dword of an activation row (signed), the
// sum - 128 * sum(x) folded into the accumulator's start. Register tiles of up to 4 panels (64
// rows) x 6 activation rows: 24 accumulators fed by 4 weight loads and 6 broadcasts per k-group,
// no horizontal sums anywhere in the k loop; the lanes are the 16 rows of a panel, stored as they
// are. Results are bit for bit the scalar reference's (exact int32 sums, then the same two float
// multiplies).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cstring>
#include <utility>

#include "core/check.h"
#include "kernels/quant_simd_unpack.h"  // LL3_UNROLL
#include "kernels/w8a8.h"

namespace ll3::kernels::avx512 {

namespace {

constexpr int R = static_cast<int>(kW8A8PanelRows);
constexpr int kMaxNP = 4;   // panels of a register tile
constexpr int kMaxNX = 6;   // activation rows of a register tile
// Activation rows whose corrections (-128 * sum x) are made at once, on the stack; the weights
// are read once per chunk.
constexpr int64_t kXChunk = 1020;  // a multiple of kMaxNX

// (No namespace-scope vector constants: their initializers would run AVX-512 code at start-up
// on every CPU.)
inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// -128 * sum_i x[i] over k (a multiple of 64) values: vpdpbusd of ones by x.
inline int32_t neg_offset(const int8_t* x, int64_t k) {
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
  int64_t i = 0;
  for (; i + 128 <= k; i += 128) {
    a0 = _mm512_dpbusd_epi32(a0, ones, _mm512_loadu_si512(x + i));
    a1 = _mm512_dpbusd_epi32(a1, ones, _mm512_loadu_si512(x + i + 64));
  }
  if (i < k) a0 = _mm512_dpbusd_epi32(a0, ones, _mm512_loadu_si512(x + i));
  return -128 * _mm512_reduce_add_epi32(_mm512_add_epi32(a0, a1));
}

struct TileArgs {
  const uint8_t* w;  // the tile's first panel
  size_t panel_bytes;  // 16 k
  const int8_t* x;   // the tile's first activation row
  size_t x_stride;
  const int32_t* offset;  // (NX) -128 * sum x of the tile's rows
  const float* w_scale;   // the tile's first row's scale
  const float* x_scale;   // the tile's first activation row's scale
  int64_t k;
  float* y;  // y[t * y_stride + r] for the tile's row r and activation row t
  size_t y_stride;
};

// NP panels x NX activation rows over the whole row; KU > 1 keeps KU accumulator sets over
// consecutive k-groups (independent chains where NP x NX alone are too few: decode).
template <int NP, int NX, int KU>
void tile(const TileArgs& a) {
  __m512i acc[KU][NP][NX];
  LL3_UNROLL for (int u = 0; u < KU; ++u) {
    LL3_UNROLL for (int p = 0; p < NP; ++p) {
      LL3_UNROLL for (int t = 0; t < NX; ++t) acc[u][p][t] = u == 0 ? _mm512_set1_epi32(a.offset[t]) : _mm512_setzero_si512();
    }
  }
  const uint8_t* w = a.w;
  const int8_t* xr[NX];
  LL3_UNROLL for (int t = 0; t < NX; ++t) xr[t] = a.x + t * a.x_stride;
  const int64_t groups = a.k / 4;
  for (int64_t g = 0; g < groups; g += KU) {
    LL3_UNROLL for (int u = 0; u < KU; ++u) {
      __m512i wv[NP];
      LL3_UNROLL for (int p = 0; p < NP; ++p) wv[p] = _mm512_loadu_si512(w + p * a.panel_bytes + 64 * (g + u));
      LL3_UNROLL for (int t = 0; t < NX; ++t) {
        const __m512i xb = bcast4(xr[t] + 4 * (g + u));
        LL3_UNROLL for (int p = 0; p < NP; ++p) acc[u][p][t] = _mm512_dpbusd_epi32(acc[u][p][t], wv[p], xb);
      }
    }
  }
  LL3_UNROLL for (int p = 0; p < NP; ++p) {
    const __m512 ws = _mm512_loadu_ps(a.w_scale + p * R);
    LL3_UNROLL for (int t = 0; t < NX; ++t) {
      __m512i s = acc[0][p][t];
      LL3_UNROLL for (int u = 1; u < KU; ++u) s = _mm512_add_epi32(s, acc[u][p][t]);
      const __m512 scale = _mm512_mul_ps(ws, _mm512_set1_ps(a.x_scale[t]));  // w_scale[r] * x_scale[t]
      _mm512_storeu_ps(a.y + t * a.y_stride + p * R, _mm512_mul_ps(_mm512_cvtepi32_ps(s), scale));
    }
  }
}

using TileFn = void (*)(const TileArgs&);

// kTiles[np - 1][nx - 1]: one activation row keeps two accumulator sets (4 panels x 2 chains).
template <int NP, int... I>
constexpr std::array<TileFn, kMaxNX> tiles_of(std::integer_sequence<int, I...>) {
  return {&tile<NP, I + 1, (I == 0 ? 2 : 1)>...};
}
constexpr std::array<std::array<TileFn, kMaxNX>, kMaxNP> kTiles = {
    tiles_of<1>(std::make_integer_sequence<int, kMaxNX>{}), tiles_of<2>(std::make_integer_sequence<int, kMaxNX>{}),
    tiles_of<3>(std::make_integer_sequence<int, kMaxNX>{}), tiles_of<4>(std::make_integer_sequence<int, kMaxNX>{})};
static_assert(kMaxNP == 4 && kXChunk % kMaxNX == 0);

inline __m512 clamp127(__m512 v) {
  // vminps / vmaxps return the second operand when unordered: a NaN becomes +127 (the reference's rule).
  v = _mm512_min_ps(v, _mm512_set1_ps(127.0f));
  return _mm512_max_ps(v, _mm512_set1_ps(-127.0f));
}

}  // namespace

void w8a8_quantize_static(const float* x, int64_t k, float scale, int8_t* xq) {
  const __m512 inv = _mm512_set1_ps(1.0f / scale);
  for (int64_t i = 0; i < k; i += 16) {
    const __mmask16 m = k - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (k - i)) - 1);
    const __m512 v = clamp127(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
    // vcvtps2dq rounds by MXCSR: nearest, ties to even (as nearbyint under the default mode).
    _mm512_mask_cvtepi32_storeu_epi8(xq + i, m, _mm512_cvtps_epi32(v));
  }
}

float w8a8_quantize_dynamic(const float* x, int64_t k, int8_t* xq) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  __m512 mx = _mm512_setzero_ps();
  for (int64_t i = 0; i < k; i += 16) {
    const __mmask16 m = k - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (k - i)) - 1);
    mx = _mm512_max_ps(mx, _mm512_and_ps(_mm512_maskz_loadu_ps(m, x + i), abs_mask));
  }
  const float scale = _mm512_reduce_max_ps(mx) / 127.0f;
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
  const size_t panel_bytes = static_cast<size_t>(R * k);
  int32_t offset[kXChunk];
  for (int64_t x0 = 0; x0 < n_x; x0 += kXChunk) {
    const int64_t nxc = std::min(kXChunk, n_x - x0);
    for (int64_t t = 0; t < nxc; ++t) offset[t] = neg_offset(x + (x0 + t) * x_stride, k);
    // Tiles of 4 panels (the weights of a tile stay in L2 while every activation tile of the
    // chunk passes over them; the activation tile, in L1).
    for (int64_t r = row0; r < row0 + n_rows; r += kMaxNP * R) {
      const int np = static_cast<int>(std::min<int64_t>(kMaxNP, (row0 + n_rows - r) / R));
      TileArgs a{base + r * k, panel_bytes, nullptr, x_stride, nullptr, w_scale + r, nullptr, k, nullptr, y_stride};
      for (int64_t t = 0; t < nxc; t += kMaxNX) {
        const int nt = static_cast<int>(std::min<int64_t>(kMaxNX, nxc - t));
        a.x = x + (x0 + t) * x_stride;
        a.offset = offset + t;
        a.x_scale = x_scale + x0 + t;
        a.y = y + (x0 + t) * y_stride + r;
        kTiles[np - 1][nt - 1](a);
      }
    }
  }
}

}  // namespace ll3::kernels::avx512
