// The float GEMM of prompts in broadcast form over lane-major packs (kernels/gemm_f32.h,
// GemmF32Lanes): the bits of gemm_f32, at a fifth of its loads per FMA.
//
// An output of kernels/float_dot_order.h is the tree sum of 16 lanes, lane l an fma chain over
// k = l, l + 16, l + 32, ... So for one lane, the product of 32 weight rows and 12 tokens is an
// ordinary GEMM with the chain in order of k: the lane's 32 weights of a k step are two vectors
// (rows in the SIMD lanes), each token's activation a broadcast, and 2 loads + 12 broadcasts feed
// 24 FMAs. The dot-form tile of gemm_f32 (4 rows x 6 tokens, 16 k steps in the SIMD lanes) loads
// 10 vectors per 24 FMAs, and its operands come from L2 whenever a block of them outgrows L1.
// After the 16 lanes, their sums are added as the tree, a vector of rows at a time.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/vec_f32.h"
#include "kernels/gemm_f32.h"
#include "kernels/quant_simd_unpack.h"  // LL3_UNROLL

namespace ll3::kernels::avx512 {

namespace {

constexpr int T = kLaneTokens;

// Groups of 16 in lane l of a row of k (the lanes past k % 16 have one fewer).
inline int64_t lane_len(int64_t k, int l) { return (k - l + 15) / 16; }

// r[0..15]: 16 rows of 16 floats; on return r[m] holds column m of them.
inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  LL3_UNROLL for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + c], 128-bit lane q: column 4q + c of rows 4i .. 4i + 3.
  LL3_UNROLL for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  // Column 4q + c = lane q of u[c], u[4 + c], u[8 + c], u[12 + c]: a 4 x 4 transpose of lanes.
  LL3_UNROLL for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44), v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xee);
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44), v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xee);
    r[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[4 + c] = _mm512_shuffle_f32x4(v0, v2, 0xdd);
    r[8 + c] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(v1, v3, 0xdd);
  }
}

// One tile: RV vectors of 16 rows x T tokens, the token tile packed at xt; nt of the tokens
// are real (the rest are padding, computed and dropped). kPairs: the BF16 pair order, each
// entry of the packs a pair of bf16 and each step one `vdpbf16ps` (two fmas of an f32 step).
template <int RV, bool kPairs>
void lanes_tile(const float* wp, const float* xt, int64_t k, float* y, size_t ldy, int nt) {
  constexpr int R = 16 * RV;
  const int64_t jn = kPairs ? k / 32 : lane_groups(k);
  alignas(64) float lane_sums[16][RV][T][16];
  for (int l = 0; l < 16; ++l) {
    __m512 acc[RV][T];
    LL3_UNROLL for (int v = 0; v < RV; ++v)
      LL3_UNROLL for (int t = 0; t < T; ++t) acc[v][t] = _mm512_setzero_ps();
    const float* wl = wp + l * jn * R;
    const float* xl = xt + l * jn * T;
    const int64_t len = kPairs ? jn : lane_len(k, l);
    for (int64_t j = 0; j < len; ++j) {
      __m512 w[RV];
      LL3_UNROLL for (int v = 0; v < RV; ++v) {
        // 8 steps ahead, across the end of the lane into the next one's (the lanes are adjacent).
        _mm_prefetch(reinterpret_cast<const char*>(wl + (j + 8) * R + 16 * v), _MM_HINT_T0);
        w[v] = _mm512_load_ps(wl + j * R + 16 * v);
      }
      LL3_UNROLL for (int t = 0; t < T; ++t) {
        const __m512 b = _mm512_set1_ps(xl[j * T + t]);
        LL3_UNROLL for (int v = 0; v < RV; ++v) {
          if constexpr (kPairs) {
            acc[v][t] = _mm512_dpbf16_ps(acc[v][t], reinterpret_cast<__m512bh>(w[v]), reinterpret_cast<__m512bh>(b));
          } else {
            acc[v][t] = _mm512_fmadd_ps(w[v], b, acc[v][t]);
          }
        }
      }
    }
    LL3_UNROLL for (int v = 0; v < RV; ++v)
      LL3_UNROLL for (int t = 0; t < T; ++t) _mm512_store_ps(lane_sums[l][v][t], acc[v][t]);
  }
  // The lanes' tree of kernels/float_dot_order.h, for 16 outputs at once.
  for (int t = 0; t < nt; ++t) {
    for (int v = 0; v < RV; ++v) {
      __m512 s8[8], s4[4];
      for (int l = 0; l < 8; ++l) s8[l] = _mm512_add_ps(_mm512_load_ps(lane_sums[l][v][t]), _mm512_load_ps(lane_sums[l + 8][v][t]));
      for (int l = 0; l < 4; ++l) s4[l] = _mm512_add_ps(s8[l], s8[l + 4]);
      _mm512_storeu_ps(y + t * ldy + 16 * v, _mm512_add_ps(_mm512_add_ps(s4[0], s4[2]), _mm512_add_ps(s4[1], s4[3])));
    }
  }
}

// Rows of row_bytes each packed: for each of jn groups, load(row, j) gives a row's 16 entries
// of group j, and each 16 x 16 block of a half of the rows is transposed in registers.
template <class Load>
void pack_w(const void* w, size_t row_bytes, int64_t rows, int64_t jn, Load load, float* wp) {
  const uint8_t* base = static_cast<const uint8_t*>(w);
  for (int64_t h = 0; h < rows / 16; ++h) {
    for (int64_t j = 0; j < jn; ++j) {
      __m512 r[16];
      for (int i = 0; i < 16; ++i) r[i] = load(base + (16 * h + i) * row_bytes, j);
      transpose16(r);
      for (int l = 0; l < 16; ++l) _mm512_store_ps(wp + (l * jn + j) * rows + 16 * h, r[l]);
    }
  }
}

// Groups of 16 columns converted exactly to float (as TypeTraits::to_float does).
template <class E, __m512 (*load16)(const E*, __mmask16)>
void pack_w_columns(const void* w, size_t row_bytes, int64_t rows, int64_t k, float* wp) {
  pack_w(w, row_bytes, rows, lane_groups(k), [k](const uint8_t* row, int64_t j) {
    return load16(reinterpret_cast<const E*>(row) + 16 * j, lanes_before(16 * j, k));
  }, wp);
}

// A 64-byte block of a BF16 row: 16 words, each a pair (even element low, odd high).
inline __m512i bf16_block(const uint8_t* row, int64_t b) { return _mm512_loadu_si512(row + 64 * b); }

}  // namespace

void pack_x_lanes(const float* x, size_t ldx, int64_t n, int64_t k, float* xp) {
  const int64_t jn = lane_groups(k);
  const size_t tile = lanes_x_tile_floats(k);
  for (int64_t t0 = 0; t0 < n; t0 += T) {
    float* xt = xp + static_cast<size_t>(t0 / T) * tile;
    const int64_t nt = std::min<int64_t>(T, n - t0);
    if (nt < T) std::memset(xt, 0, tile * sizeof(float));  // padding tokens: finite products
    for (int64_t t = 0; t < nt; ++t) {
      const float* row = x + (t0 + t) * ldx;
      for (int64_t i = 0; i < k; ++i) xt[((i % 16) * jn + i / 16) * T + t] = row[i];
    }
  }
}

void pack_w_lanes(DType type, const void* w, size_t row_bytes, int64_t rows, int64_t k, float* wp) {
  switch (type) {
    case DType::F16: pack_w_columns<uint16_t, load16_f16>(w, row_bytes, rows, k, wp); break;
    case DType::BF16:
      // The pair order as the 16-lane order of the deinterleaved row: group 2b holds block b's
      // odd elements, group 2b + 1 its even ones (k a multiple of 32).
      pack_w(w, row_bytes, rows, lane_groups(k), [](const uint8_t* row, int64_t j) {
        const __m512i v = bf16_block(row, j / 2);
        return _mm512_castsi512_ps(j % 2 == 0 ? _mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xffff0000u)))
                                              : _mm512_slli_epi32(v, 16));
      }, wp);
      break;
    default: pack_w_columns<float, load16_f32>(w, row_bytes, rows, k, wp); break;
  }
}

void pack_w_f16_panels(const void* panels, int64_t rows, int64_t k, float* wp) {
  const uint16_t* w = static_cast<const uint16_t*>(panels);
  const int64_t jn = k / 16;  // panels have whole groups of 16
  for (int64_t h = 0; h < rows / 16; ++h) {
    const uint16_t* p = w + h * 16 * k;
    // One sequential read, prefetched 1 KB ahead into L1: without it the packs of the pp128
    // prompt ran 4% slower than the 16-row transposes of the row layout (Zen 5, 1B preset, 2
    // threads: 125-128 t/s against 129-135; with it 131-133; 4 KB ahead 129-131).
    for (int64_t i = 0; i < k; ++i) {  // element i of the panel's 16 rows: lane i % 16, group i / 16
      if ((i & 1) == 0) _mm_prefetch(reinterpret_cast<const char*>(p + 16 * i) + 1024, _MM_HINT_T0);
      const __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * i)));
      _mm512_store_ps(wp + ((i % 16) * jn + i / 16) * rows + 16 * h, v);
    }
  }
}

void pack_x_pairs(const float* x, size_t ldx, int64_t n, int64_t k, float* xp) {
  const int64_t jn = k / 32;
  const size_t tile = lanes_x_tile_floats(k);
  for (int64_t t0 = 0; t0 < n; t0 += T) {
    uint32_t* xt = reinterpret_cast<uint32_t*>(xp + static_cast<size_t>(t0 / T) * tile);
    const int64_t nt = std::min<int64_t>(T, n - t0);
    if (nt < T) std::memset(xt, 0, tile * sizeof(float));  // padding tokens: finite products
    for (int64_t t = 0; t < nt; ++t) {
      const float* row = x + (t0 + t) * ldx;
      for (int64_t j = 0; j < jn; ++j) {
        for (int l = 0; l < 16; ++l) {
          uint32_t odd, even;  // bf16 values: their low halves are zero
          std::memcpy(&odd, row + 32 * j + l, 4);
          std::memcpy(&even, row + 32 * j + 16 + l, 4);
          xt[(l * jn + j) * T + t] = (odd & 0xffff0000u) | (even >> 16);
        }
      }
    }
  }
}

void pack_w_pairs(const void* w, size_t row_bytes, int64_t rows, int64_t k, float* wp) {
  pack_w(w, row_bytes, rows, k / 32, [](const uint8_t* row, int64_t j) { return _mm512_castsi512_ps(bf16_block(row, j)); },
         wp);
}

namespace {
template <bool kPairs>
void gemm_tiles(const float* wp, int64_t rows, const float* xp, int64_t n, int64_t k, float* y, size_t ldy) {
  const size_t tile = lanes_x_tile_floats(k);
  for (int64_t t0 = 0; t0 < n; t0 += T) {
    const float* xt = xp + static_cast<size_t>(t0 / T) * tile;
    const int nt = static_cast<int>(std::min<int64_t>(T, n - t0));
    if (rows == 32) {
      lanes_tile<2, kPairs>(wp, xt, k, y + t0 * ldy, ldy, nt);
    } else {
      lanes_tile<1, kPairs>(wp, xt, k, y + t0 * ldy, ldy, nt);
    }
  }
}
}  // namespace

void gemm_f32_lanes(const float* wp, int64_t rows, const float* xp, int64_t n, int64_t k, float* y, size_t ldy) {
  gemm_tiles<false>(wp, rows, xp, n, k, y, ldy);
}

void gemm_pairs(const float* wp, int64_t rows, const float* xp, int64_t n, int64_t k, float* y, size_t ldy) {
  gemm_tiles<true>(wp, rows, xp, n, k, y, ldy);
}

}  // namespace ll3::kernels::avx512
