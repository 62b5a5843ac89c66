// AVX2 prompt / batched-decode kernels of Q4_K and Q6_K panels (TypeTraits::dot_q_panel_rows),
// tiled as their AVX-512 counterparts (avx512/quant_panel_rows.cpp): each block of a panel (16
// rows) is unpacked once, into an L1 buffer (Q4_K's nibbles, Q6_K's 6-bit values as bytes, the
// scales as vpmaddwd factors), for a tile of up to 16 tokens, then applied in register passes
// of 2 tokens over both halves of the panel, with the accumulators in L1. Unpacking again for
// every pass was most of the old Q6_K kernel's work. The integer sums are grouped exactly as
// in the decode kernels (int16 lanes with the bounds noted there, widened by vpmaddwd), so the
// results are bit-identical to them (kernels/int_dot_order.h).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/avx2/panel_simd.h"
#include "kernels/cpu/panel_act.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/row_passes.h"
#include "kernels/panels.h"
#include "kernels/quant_kernels.h"
#include "kernels/quant_simd_unpack.h"

namespace ll3::kernels::avx2 {

using namespace ll3::quant;

namespace {

constexpr int R = static_cast<int>(kPanelRows);
constexpr int64_t kSeg = 32;  // Q6_K activation blocks whose digits are prepared at a time (even)
constexpr int64_t kMaxK4Blocks = kPanelRowsMaxCols / kQKK;

// ---- Q4_K ------------------------------------------------------------------------------------
// One Q4_K block of a panel, both halves (rows 0-7 and 8-15), unpacked once for the tile. A
// pass takes both halves together, so that each activation broadcast feeds two vpmaddubsw: on
// Zen 3 a vpbroadcastd from memory takes a vector pipe as well as a load, and with one
// broadcast per vpmaddubsw the pass ran at a third of the multiplier's rate.
struct alignas(32) Q4KBlock {
  __m256i q[4][8][4];              // [sub-block pair j][line k][low nibbles hf 0, 1, high nibbles hf 0, 1]
  __m256i sa[2][4], sb[2][4];      // [hf][j]: scales of sub-blocks 2j and 2j+1 as int16 pairs
  __m256i mn_lo[2], mn_hi[2];      // [hf]: the 8 mins, 4 per dword
  __m256 d[2], dmin[2];
};

inline void q4_k_unpack(const uint8_t* blk, Q4KBlock& b) {
  const __m256i m3f = _mm256_set1_epi8(0x3f), m0f = _mm256_set1_epi8(0x0f),
                m03 = _mm256_set1_epi8(0x03);
  for (int l = 0; l < 4; ++l) prefetch_line_always(blk + 64 * l);
  for (int hf = 0; hf < 2; ++hf) {
    const __m256i sc0 = load_half(blk + 64, hf), sc1 = load_half(blk + 128, hf),
                  sc2 = load_half(blk + 192, hf);
    const __m256i sc_lo = _mm256_and_si256(sc0, m3f);
    const __m256i sc_hi =
        _mm256_or_si256(_mm256_and_si256(sc2, m0f),
                        _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(sc0, 6), m03), 4));
    b.mn_lo[hf] = _mm256_and_si256(sc1, m3f);
    b.mn_hi[hf] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(sc2, 4), m0f),
                                  _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(sc1, 6), m03), 4));
    LL3_UNROLL for (int j = 0; j < 4; ++j) {
      const __m256i scv = j < 2 ? sc_lo : sc_hi;
      b.sa[hf][j] = simd::byte_to_pair16(scv, 2 * (j & 1));
      b.sb[hf][j] = simd::byte_to_pair16(scv, 2 * (j & 1) + 1);
    }
    b.d[hf] = load_f16x8(blk, hf);
    b.dmin[hf] = load_f16x8(blk + 32, hf);
  }
  LL3_UNROLL for (int j = 0; j < 4; ++j) {
    LL3_UNROLL for (int k = 0; k < 8; ++k) {
      const uint8_t* line = blk + 256 + 64 * (8 * j + k);
      prefetch_line_always(line);
      LL3_UNROLL for (int hf = 0; hf < 2; ++hf) {
        const __m256i q = load_half(line, hf);
        _mm256_store_si256(&b.q[j][k][hf], _mm256_and_si256(q, m0f));
        _mm256_store_si256(&b.q[j][k][2 + hf], _mm256_and_si256(_mm256_srli_epi16(q, 4), m0f));
      }
    }
  }
}

// NX tokens against one unpacked block; acc[x][hf], accm[x][hf]: token x's rows 8 hf .. 8 hf + 7.
template <int NX>
inline void q4_k_pass(const Q4KBlock& b, const BlockQ8_K* const* arow,
                      const K4PanelAct (*digits)[kMaxK4Blocks], int64_t i, float (*acc)[2][8],
                      float (*accm)[2][8]) {
  const __m256i ones16 = _mm256_set1_epi16(1);
  __m256i isum[NX][2];
  for (int x = 0; x < NX; ++x) isum[x][0] = isum[x][1] = _mm256_setzero_si256();
  LL3_ROLLED for (int j = 0; j < 4; ++j) {
    __m256i lo[NX][2], hi[NX][2];
    for (int x = 0; x < NX; ++x) lo[x][0] = lo[x][1] = hi[x][0] = hi[x][1] = _mm256_setzero_si256();
    LL3_UNROLL for (int k = 0; k < 8; ++k) {
      const __m256i* w = b.q[j][k];
      for (int x = 0; x < NX; ++x) {
        const uint8_t* aq = reinterpret_cast<const uint8_t*>((arow[x] + i)->qs) + 64 * j + 4 * k;
        madd_line_both_halves(w, bcast32(aq), bcast32(aq + 32), lo[x], hi[x]);
      }
    }
    for (int x = 0; x < NX; ++x) {
      for (int hf = 0; hf < 2; ++hf) {
        isum[x][hf] = _mm256_add_epi32(isum[x][hf], _mm256_add_epi32(_mm256_madd_epi16(lo[x][hf], b.sa[hf][j]),
                                                                     _mm256_madd_epi16(hi[x][hf], b.sb[hf][j])));
      }
    }
  }
  for (int x = 0; x < NX; ++x) {
    const K4PanelAct& dg = digits[x][i];
    const __m256 ad = _mm256_set1_ps((arow[x] + i)->d);
    for (int hf = 0; hf < 2; ++hf) {
      const __m256i mh =
          _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(b.mn_lo[hf], bcast32(dg.h)),
                                             _mm256_maddubs_epi16(b.mn_hi[hf], bcast32(dg.h + 4))),
                            ones16);
      const __m256i ml =
          _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(b.mn_lo[hf], bcast32(dg.l)),
                                             _mm256_maddubs_epi16(b.mn_hi[hf], bcast32(dg.l + 4))),
                            ones16);
      const __m256i mins = _mm256_add_epi32(_mm256_slli_epi32(mh, 6), ml);
      _mm256_store_ps(acc[x][hf], _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[x][hf]), _mm256_mul_ps(b.d[hf], ad),
                                                  _mm256_load_ps(acc[x][hf])));
      _mm256_store_ps(accm[x][hf], _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(b.dmin[hf], ad),
                                                   _mm256_load_ps(accm[x][hf])));
    }
  }
}

// ---- Q6_K ------------------------------------------------------------------------------------
// One Q6_K block of a panel, both halves, unpacked once for the tile; a pass takes both
// halves, each broadcast feeding two vpmaddubsw (as Q4_K above).
struct alignas(32) Q6KBlock {
  __m256i u[2][16][4];  // [half block h][line kk][low-group bytes hf 0, 1, high-group bytes hf 0, 1]
  __m256i s16[2][16];   // [hf][g]: group scales, sign-extended, as int16 pairs (vpmaddwd factors)
  __m256i sc[2][4];     // [hf]: the 16 scale bytes as loaded (4 per dword)
  __m256i c1[2];        // [hf]: sum_g sc_g per row
};

// prefetch: the unpacking of the first half also prefetches the block's lines (prefetch.h).
inline void q6_k_unpack(const uint8_t* blk, Q6KBlock& b) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (int hf = 0; hf < 2; ++hf) {
    for (int s = 0; s < 4; ++s) {
      if (hf == 0) prefetch_line_always(blk + 64 * s);
      b.sc[hf][s] = load_half(blk + 64 * s, hf);
    }
    b.c1[hf] = _mm256_madd_epi16(
        _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(ones8, b.sc[hf][0]), _mm256_maddubs_epi16(ones8, b.sc[hf][1])),
                         _mm256_add_epi16(_mm256_maddubs_epi16(ones8, b.sc[hf][2]), _mm256_maddubs_epi16(ones8, b.sc[hf][3]))),
        ones16);
    LL3_UNROLL for (int g = 0; g < 16; ++g) {
      b.s16[hf][g] = q6_k_scale_pair16(b.sc[hf][g / 4], g);
    }
  }
  LL3_UNROLL for (int h = 0; h < 2; ++h) {
    const uint8_t* half = blk + 256 + 1536 * h;
    LL3_UNROLL for (int kk = 0; kk < 16; ++kk) {
      LL3_UNROLL for (int hf = 0; hf < 2; ++hf) {
        __m256i lo, hi;
        q6_k_line<true>(half, kk, hf, lo, hi);
        _mm256_store_si256(&b.u[h][kk][hf], lo);
        _mm256_store_si256(&b.u[h][kk][2 + hf], hi);
      }
    }
  }
}

// NX tokens against one unpacked block; acc[x][hf]: token x's rows 8 hf .. 8 hf + 7.
template <int NX>
inline void q6_k_pass(const Q6KBlock& b, const __m256* dw, const BlockQ8_K* const* arow,
                      const Q6PanelAct (*digits)[kSeg], int64_t i, int64_t s0, float (*acc)[2][8]) {
  const __m256i ones16 = _mm256_set1_epi16(1);
  __m256i isum[NX][2];
  for (int x = 0; x < NX; ++x) {
    // The offset term, as in the decode kernel (two scale lines' digit products per lane).
    const Q6PanelAct& dg = digits[x][i - s0];
    for (int hf = 0; hf < 2; ++hf) {
      __m256i ch = _mm256_setzero_si256(), cl = ch;
      for (int s = 0; s < 4; s += 2) {
        const __m256i h16 = _mm256_add_epi16(_mm256_maddubs_epi16(bcast32(dg.h + 4 * s), b.sc[hf][s]),
                                             _mm256_maddubs_epi16(bcast32(dg.h + 4 * s + 4), b.sc[hf][s + 1]));
        const __m256i l16 = _mm256_add_epi16(_mm256_maddubs_epi16(bcast32(dg.l + 4 * s), b.sc[hf][s]),
                                             _mm256_maddubs_epi16(bcast32(dg.l + 4 * s + 4), b.sc[hf][s + 1]));
        ch = _mm256_add_epi32(ch, _mm256_madd_epi16(h16, ones16));
        cl = _mm256_add_epi32(cl, _mm256_madd_epi16(l16, ones16));
      }
      const __m256i corr = _mm256_sub_epi32(_mm256_add_epi32(_mm256_slli_epi32(ch, 6), cl),
                                            _mm256_slli_epi32(b.c1[hf], 11));
      isum[x][hf] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
    }
  }
  LL3_UNROLL for (int h = 0; h < 2; ++h) {
    LL3_ROLLED for (int q = 0; q < 4; ++q) {
      LL3_UNROLL for (int t0 = 0; t0 < 4; t0 += 2) {  // two lines' products per int16 lane, then widened
        __m256i ul[NX][2], uh[NX][2];
        for (int x = 0; x < NX; ++x) ul[x][0] = ul[x][1] = uh[x][0] = uh[x][1] = _mm256_setzero_si256();
        LL3_UNROLL for (int t = t0; t < t0 + 2; ++t) {
          const int kk = 4 * q + t;
          const __m256i* w = b.u[h][kk];
          for (int x = 0; x < NX; ++x) {
            const uint8_t* aq = reinterpret_cast<const uint8_t*>((arow[x] + i)->qs) + 128 * h + 4 * kk;
            madd_line_both_halves(w, bcast32(aq), bcast32(aq + 64), ul[x], uh[x]);
          }
        }
        for (int x = 0; x < NX; ++x) {
          for (int hf = 0; hf < 2; ++hf) {
            isum[x][hf] = _mm256_add_epi32(isum[x][hf], _mm256_add_epi32(_mm256_madd_epi16(ul[x][hf], b.s16[hf][8 * h + q]),
                                                                         _mm256_madd_epi16(uh[x][hf], b.s16[hf][8 * h + 4 + q])));
          }
        }
      }
    }
  }
  for (int x = 0; x < NX; ++x) {
    const __m256 ad = _mm256_set1_ps((arow[x] + i)->d);
    for (int hf = 0; hf < 2; ++hf) {
      _mm256_store_ps(acc[x][hf], _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[x][hf]), _mm256_mul_ps(dw[hf], ad),
                                                  _mm256_load_ps(acc[x][hf])));
    }
  }
}

}  // namespace

void q4_k_dot_q8_k_panel_rows(const void* panels, int64_t npanels, const void* xq, size_t stride,
                              int64_t nx, int64_t n, float* y, size_t y_stride) {
  // One segment, the whole row (n <= kPanelRowsMaxCols): the two accumulators of
  // kernels/int_dot_order.h run over the row in one pass.
  constexpr size_t kUnit = R * sizeof(BlockQ4_K);
  const int64_t nb = n / kQKK;
  const size_t panel_bytes = kUnit * static_cast<size_t>(nb);
  Q4KBlock b;
  alignas(32) float acc[kTile][2][8], accm[kTile][2][8];
  for_panel_tiles<BlockQ8_K, K4PanelAct, kMaxK4Blocks>(
      DType::Q4_K, npanels, panel_bytes, xq, stride, nx, nb, kQKK,
      [&](int64_t p, int64_t x0, int nt, const BlockQ8_K* const* arow,
          const K4PanelAct(*digits)[kMaxK4Blocks], int64_t, int64_t) {
        const uint8_t* w = static_cast<const uint8_t*>(panels) + p * panel_bytes;
        std::memset(acc, 0, sizeof(acc[0]) * nt);
        std::memset(accm, 0, sizeof(accm[0]) * nt);
        for (int64_t i = 0; i < nb; ++i) {
          q4_k_unpack(w + i * kUnit, b);
          token_passes<2>(nt, [&]<int NX, bool>(int x) {
            q4_k_pass<NX>(b, arow + x, digits + x, i, acc + x, accm + x);
          });
        }
        float* yp = y + x0 * y_stride + p * R;
        for (int x = 0; x < nt; ++x) {
          for (int hf = 0; hf < 2; ++hf) {
            _mm256_storeu_ps(yp + x * y_stride + 8 * hf,
                             _mm256_sub_ps(_mm256_load_ps(acc[x][hf]), _mm256_load_ps(accm[x][hf])));
          }
        }
      });
}

void q6_k_dot_q8_k_panel_rows(const void* panels, int64_t npanels, const void* xq, size_t stride,
                              int64_t nx, int64_t n, float* y, size_t y_stride) {
  constexpr size_t kUnit = R * 2 * sizeof(BlockQ6_K);
  const int64_t nb = n / kQKK;
  const size_t panel_bytes = kUnit * static_cast<size_t>(nb / 2);
  Q6KBlock b;
  alignas(32) float acc[kTile][2][8];
  for_panel_tiles<BlockQ8_K, Q6PanelAct, kSeg>(
      DType::Q6_K, npanels, panel_bytes, xq, stride, nx, nb, kQKK,
      [&](int64_t p, int64_t x0, int nt, const BlockQ8_K* const* arow,
          const Q6PanelAct(*digits)[kSeg], int64_t s0, int64_t s1) {
        const uint8_t* w = static_cast<const uint8_t*>(panels) + p * panel_bytes;
        // A segment starts from zero, or where the last one left its sums in y.
        float* yp = y + x0 * y_stride + p * R;
        for (int x = 0; x < nt; ++x) {
          for (int hf = 0; hf < 2; ++hf) {
            _mm256_store_ps(acc[x][hf], s0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(yp + x * y_stride + 8 * hf));
          }
        }
        for (int64_t i = s0; i < s1; ++i) {
          const int64_t h2 = i & 1;
          const uint8_t* unit = w + (i / 2) * kUnit;
          if (h2 == 0) prefetch_line_always(unit);
          q6_k_unpack(unit + 64 + 3328 * h2, b);
          const __m256 dw[2] = {load_f16x8(unit + 32 * h2, 0), load_f16x8(unit + 32 * h2, 1)};
          token_passes<2>(nt, [&]<int NX, bool>(int x) {
            q6_k_pass<NX>(b, dw, arow + x, digits + x, i, s0, acc + x);
          });
        }
        for (int x = 0; x < nt; ++x) {
          for (int hf = 0; hf < 2; ++hf) _mm256_storeu_ps(yp + x * y_stride + 8 * hf, _mm256_load_ps(acc[x][hf]));
        }
      });
}

}  // namespace ll3::kernels::avx2
