// The prompt / batched-decode kernels over the panel layout (kernels/panels.h): 16 weight rows
// against many activation rows (TypeTraits::dot_q_panel_rows), the kernels of every step that
// carries more than one token.
//
// Each weight block of a panel is unpacked once for a tile of up to 16 tokens: its scales
// decoded (and its values, Q4_K's nibbles or Q6_K's 6-bit values, made into bytes in an L1
// buffer), then applied to the tile in register passes of 4 tokens (Q4_K and Q6_K over two
// panels at once), the tile's accumulators kept in an L1 buffer between blocks. With passes of
// 4 that each unpacked the block again (and went over the panels once per pass), one thread ran
// 16 tokens x 2048 x 512 (quant_gemv_bench gemm_panels, old and new alternated) at Q4_K 208,
// Q6_K 127, Q8_0 143 GOPS; then 227-253, 184-204 and 218 (Q8_0 with 8192 columns: 60 -> 204).
//
// Every product follows kernels/int_dot_order.h exactly (exact integer sums per block, then
// one fma per block in row order), so the results are bit-identical to the decode kernels'.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/half.h"
#include "kernels/cpu/avx512/panel_simd.h"
#include "kernels/cpu/panel_act.h"
#include "kernels/cpu/row_passes.h"
#include "kernels/panels.h"
#include "kernels/quant_kernels.h"
#include "kernels/quant_simd_unpack.h"

namespace ll3::kernels::avx512 {

using namespace ll3::quant;

namespace {

constexpr int R = static_cast<int>(kPanelRows);

// Prefetch: the first register pass over a block also fetches the next block into L1, one
// line per few of its instructions (kPrefetch; the other passes have none). The next block is
// needed only after all the tile's passes over this one, ample time for it to arrive; issued as
// a burst at the block's start, the prefetches stalled on the core's line-fill buffers (7% of a
// 16-row step, one thread), and without them the block's first loads did.
template <bool kPrefetch>
inline void prefetch_line_of(const uint8_t* pf, int line) {
  if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(pf) + 64 * line, _MM_HINT_T0);
}

// The tile's accumulators (16 rows of each token) between blocks.
struct alignas(64) TileAcc {
  float v[kTile][R];
};

// ---- Q4_K ------------------------------------------------------------------------------------
// Per block and row: sum_t d * sc_t * S_t - dmin * d_a * sum_t m_t * B_t (see the decode
// kernel, avx512/quant_panels.cpp), the same integers summed in the same order.
constexpr int64_t kMaxK4Blocks = kPanelRowsMaxCols / kQKK;

// A block of one or two panels (NP) with its nibbles apart, made once per tile (16 tokens) so
// that the passes load them rather than mask and shift every line again: the masks and shifts
// ran on the two vector ports that the vpdpbusd need, 3 slots a line in every pass. gemm_panels
// Q4_K on a Sapphire Rapids-class Xeon, one core, 5 alternated rounds, medians: 2048 x 512 x 16
// 373 -> 404 GOPS, 8192 x 256 x 16 365 -> 399, streaming 2048 x 65536 x 16 323 -> 389.
struct alignas(64) Q4KUnpacked {
  __m512i lo[2][32], hi[2][32];  // [panel][line 8j + k]: sub-block 2j's / 2j+1's 4 bytes of each row
};

template <int NP>
inline void q4_k_unpack(const uint8_t* const* blk, Q4KUnpacked& b) {
  const __m512i m0f = _mm512_set1_epi8(0x0f);
  for (int p = 0; p < NP; ++p) {
    LL3_UNROLL_BY(8) for (int l = 0; l < 32; ++l) {
      const __m512i q = _mm512_loadu_si512(blk[p] + 256 + 64 * l);
      _mm512_store_si512(&b.lo[p][l], _mm512_and_si512(q, m0f));
      _mm512_store_si512(&b.hi[p][l], _mm512_and_si512(_mm512_srli_epi16(q, 4), m0f));
    }
  }
}

// A register pass of NX tokens over a block of NP panels: with two, each activation broadcast
// feeds both panels' vpdpbusd, half the loads per multiply. Loads and the multiply ports had
// both been at their limit; now the multiplies alone are. Passes of 4 tokens (16 + 8
// accumulators; 8 tokens spill): gemm_panels Q4_K, alternated 3 times, 2048 x 512 x 16 567-570
// -> 589-600 GOPS, 8192 x 256 x 16 520-526 -> 579. The eleventh session's attempt (fully
// unrolled) was slower in 16-token tiles: the code was too big (see the loop over j).
template <int NP, int NX, bool kPrefetch>
inline void q4_k_pass(const Q4KUnpacked& b, const uint8_t* const* blk, const Q4KScales* sc,
                      const BlockQ8_K* const* arow, const K4PanelAct (*digits)[kMaxK4Blocks], int64_t i,
                      TileAcc* tacc, TileAcc* taccm, int x0) {
  const BlockQ8_K* a[NX];
  const K4PanelAct* dg[NX];
  for (int x = 0; x < NX; ++x) {
    a[x] = arow[x0 + x] + i;
    dg[x] = &digits[x0 + x][i];
  }
  // The mins term first: it needs none of the sums below, so it fills the ports while the
  // first lines load (1-3% in gemm_panels).
  for (int x = 0; x < NX; ++x) {
    const __m512i h0 = bcast32(dg[x]->h), h1 = bcast32(dg[x]->h + 4), l0 = bcast32(dg[x]->l), l1 = bcast32(dg[x]->l + 4);
    const __m512 ad = _mm512_set1_ps(a[x]->d);
    for (int p = 0; p < NP; ++p) {
      fma_block(taccm[p].v[x0 + x], q4_k_min_sum(sc[p], h0, h1, l0, l1), _mm512_mul_ps(sc[p].dmin, ad), i);
    }
  }
  __m512i isum[NP][NX];
  for (int p = 0; p < NP; ++p)
    for (int x = 0; x < NX; ++x) isum[p][x] = _mm512_setzero_si512();
  // A loop, not unrolled: 4 copies of its body made the pass 7 KB of straight code, two of
  // them per block (the first pass prefetches), and the core ran it 4-6% slower (gemm_panels
  // Q4_K on Zen 5, alternated: 2048 x 512 x 16 489-526 -> 534-538 GOPS, 8192 x 256 x 16
  // 457-481 -> 489-505).
  LL3_ROLLED for (int j = 0; j < 4; ++j) {
    // Sub-blocks 2j (low nibbles) and 2j+1 (high): exact 32-bit sums over each sub-block's 8
    // lines, then one vpmulld by its 6-bit scale (docs/PERFORMANCE.md, twelfth and fifteenth
    // sessions, on the choice against vpdpwssd on 16-bit half sums).
    __m512i lo[NP][NX], hi[NP][NX];
    for (int p = 0; p < NP; ++p)
      for (int x = 0; x < NX; ++x) lo[p][x] = hi[p][x] = _mm512_setzero_si512();
    LL3_UNROLL_BY(2) for (int k = 0; k < 8; ++k) {  // by 2: 1-5% over by 4, over 8
      for (int p = 0; p < NP; ++p) prefetch_line_of<kPrefetch>(blk[p] + R * sizeof(BlockQ4_K), 4 + 8 * j + k);
      for (int x = 0; x < NX; ++x) {
        const uint8_t* aq = reinterpret_cast<const uint8_t*>(a[x]->qs);
        const __m512i bl = bcast32(aq + 64 * j + 4 * k), bh = bcast32(aq + 64 * j + 32 + 4 * k);
        for (int p = 0; p < NP; ++p) {
          lo[p][x] = _mm512_dpbusd_epi32(lo[p][x], _mm512_load_si512(&b.lo[p][8 * j + k]), bl);
          hi[p][x] = _mm512_dpbusd_epi32(hi[p][x], _mm512_load_si512(&b.hi[p][8 * j + k]), bh);
        }
      }
    }
    for (int p = 0; p < NP; ++p)
      for (int x = 0; x < NX; ++x)
        isum[p][x] = _mm512_add_epi32(isum[p][x], _mm512_add_epi32(_mm512_mullo_epi32(lo[p][x], sc[p].sa[j]),
                                                                    _mm512_mullo_epi32(hi[p][x], sc[p].sb[j])));
  }
  for (int p = 0; p < NP; ++p) {
    for (int l = 0; l < 4; ++l) prefetch_line_of<kPrefetch>(blk[p] + R * sizeof(BlockQ4_K), l);  // d, dmin, scales
    for (int x = 0; x < NX; ++x) {
      fma_block(tacc[p].v[x0 + x], isum[p][x], _mm512_mul_ps(sc[p].d, _mm512_set1_ps(a[x]->d)), i);
    }
  }
}

// ---- Q6_K ------------------------------------------------------------------------------------
// w = d * sc_g * (u - 32) per group g of 16 weights (see the decode kernel). A block's u are
// assembled from ql and qh once, into bytes, for the whole tile.
constexpr int64_t kQ6Seg = 32;  // blocks per segment (even); between segments acc goes through y

struct alignas(64) Q6KUnpacked {
  __m512i u[2][2][16];  // [half h][low / high nibble lines][line kk]: 4 bytes of each row
  __m512i scale[16];    // group scales, sign-extended, one dword per row
};

inline void q6_k_unpack(const uint8_t* blk, Q6KUnpacked& b) {
  LL3_UNROLL for (int g = 0; g < 16; ++g) {
    const __m512i sc = _mm512_loadu_si512(blk + 64 * (g / 4));  // 4 scale bytes per dword
    b.scale[g] = _mm512_srai_epi32(_mm512_slli_epi32(sc, 24 - 8 * (g % 4)), 24);
  }
  LL3_UNROLL for (int h = 0; h < 2; ++h) {
    const uint8_t* half = blk + 256 + 1536 * h;
    LL3_UNROLL for (int kk = 0; kk < 16; ++kk) {
      const int q = kk / 4;
      const __m512i ql = _mm512_loadu_si512(half + 512 + 64 * kk);
      const __m512i hb = _mm512_loadu_si512(half + 64 * (kk % 8));
      __m512i lo, hi;
      q6_k_assemble(ql, hb, q, lo, hi);
      _mm512_store_si512(&b.u[h][0][kk], lo);
      _mm512_store_si512(&b.u[h][1][kk], hi);
    }
  }
}

// Each group's offset term, -32 * bsums[g], made once per token and segment (for_panel_tiles)
// so that the passes broadcast it from memory, a load, where computing and broadcasting it
// from a general register took a vector-port slot per group and token: gemm_panels Q6_K on a
// Sapphire Rapids-class Xeon, one core, two sittings of 7 alternated rounds, medians 2048 x 512
// x 16 154 / 165 -> 167 / 178 GOPS, 8192 x 256 x 16 154 / 150 -> 160 / 188.
struct alignas(64) Q6Offsets {
  int32_t o[16];
  static void make(const BlockQ8_K* a, int64_t nb, Q6Offsets* out) {
    for (int64_t i = 0; i < nb; ++i)
      for (int g = 0; g < 16; ++g) out[i].o[g] = -32 * a[i].bsums[g];
  }
};

// A register pass of NX tokens over a block of NP panels; with two, as Q4_K's, each activation
// broadcast feeds both panels' vpdpbusd. Passes of 4 tokens (16 + 8 accumulators). gemm_panels
// Q6_K, Xeon as above, 5 rounds: 2048 x 512 x 16 338 -> 358 GOPS, 8192 x 256 x 16 332 -> 355
// against one panel in passes of 8; streaming 2048 x 65536 x 16 unchanged (265 / 266;
// prefetching two blocks ahead, or into L2 four ahead, was slower).
template <int NP, int NX, bool kPrefetch>
inline void q6_k_pass(const Q6KUnpacked* b, const __m512* dw, const BlockQ8_K* const* arow,
                      const Q6Offsets (*offs)[kQ6Seg], int64_t i, int64_t s0, TileAcc* tacc, int x0,
                      const uint8_t* const* pf) {
  const BlockQ8_K* a[NX];
  const int32_t* off[NX];
  for (int x = 0; x < NX; ++x) {
    a[x] = arow[x0 + x] + i;
    off[x] = offs[x0 + x][i - s0].o;
  }
  __m512i isum[NP][NX];
  for (int p = 0; p < NP; ++p)
    for (int x = 0; x < NX; ++x) isum[p][x] = _mm512_setzero_si512();
  LL3_UNROLL for (int h = 0; h < 2; ++h) {
    // Rolled for the same reason as Q4_K's loop over j: 2048 x 512 x 16 439-454 -> 441-456
    // GOPS, 8192 x 256 x 16 426-431 -> 449-452.
    LL3_ROLLED for (int q = 0; q < 4; ++q) {
      __m512i ul[NP][NX], uh[NP][NX];
      // Each group's sum starts at its offset term, -32 * bsum_g: then it is sum (u - 32) a,
      // at most 16 * 32 * 128 in size, and no per-block correction is needed (8 vpdpbusd per
      // token and block fewer on the multiply ports than with the offset as byte digits:
      // gemm_panels Q6_K 449-460 -> 473-479 GOPS at 2048 x 512 x 16).
      for (int p = 0; p < NP; ++p) {
        for (int x = 0; x < NX; ++x) {
          ul[p][x] = bcast32(off[x] + 8 * h + q);
          uh[p][x] = bcast32(off[x] + 8 * h + 4 + q);
        }
      }
      LL3_UNROLL for (int t = 0; t < 4; ++t) {
        const int kk = 4 * q + t;
        for (int p = 0; p < NP; ++p) {
          prefetch_line_of<kPrefetch>(pf[p], 2 * (16 * h + kk));
          prefetch_line_of<kPrefetch>(pf[p], 2 * (16 * h + kk) + 1);
        }
        for (int x = 0; x < NX; ++x) {
          const uint8_t* aq = reinterpret_cast<const uint8_t*>(a[x]->qs);
          const __m512i bl = bcast32(aq + 128 * h + 4 * kk), bh = bcast32(aq + 128 * h + 64 + 4 * kk);
          for (int p = 0; p < NP; ++p) {
            ul[p][x] = _mm512_dpbusd_epi32(ul[p][x], _mm512_load_si512(&b[p].u[h][0][kk]), bl);
            uh[p][x] = _mm512_dpbusd_epi32(uh[p][x], _mm512_load_si512(&b[p].u[h][1][kk]), bh);
          }
        }
      }
      for (int p = 0; p < NP; ++p)
        for (int x = 0; x < NX; ++x)
          isum[p][x] = _mm512_add_epi32(
              isum[p][x], _mm512_add_epi32(_mm512_mullo_epi32(ul[p][x], b[p].scale[8 * h + q]),
                                           _mm512_mullo_epi32(uh[p][x], b[p].scale[8 * h + 4 + q])));
    }
  }
  for (int x = 0; x < NX; ++x) {
    const __m512 ad = _mm512_set1_ps(a[x]->d);
    for (int p = 0; p < NP; ++p) {
      float* acc = tacc[p].v[x0 + x];
      _mm512_store_ps(acc, _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[p][x]), _mm512_mul_ps(dw[p], ad),
                                           _mm512_load_ps(acc)));
    }
  }
}

// ---- Q8_0 ------------------------------------------------------------------------------------
// The weights are stored + 128 (unsigned): sum (w + 128) a - 128 * sum a = sum w a.
constexpr int64_t kQ8Seg = 128;  // activation blocks prepared at a time (even)

template <int NX, bool kPrefetch>
inline void q8_0_pass(const uint8_t* qs, __m512 dw, const BlockQ8_0* const* arow,
                      const Q80PanelAct (*sums_rows)[kQ8Seg], int64_t i, int64_t s0,
                      float (*acc)[R], const uint8_t* pf) {
  const BlockQ8_0* a[NX];
  const Q80PanelAct* sums[NX];
  for (int x = 0; x < NX; ++x) {
    a[x] = arow[x] + i;
    sums[x] = &sums_rows[x][i - s0];
  }
  __m512i isum[NX];
  for (int x = 0; x < NX; ++x) isum[x] = _mm512_set1_epi32(-sums[x]->sum128);
  LL3_UNROLL for (int k = 0; k < 8; ++k) {
    const __m512i g = _mm512_loadu_si512(qs + 64 * k);
    prefetch_line_of<kPrefetch>(pf, k);
    for (int x = 0; x < NX; ++x)
      isum[x] = _mm512_dpbusd_epi32(isum[x], g, bcast32(a[x]->qs + 4 * k));
  }
  for (int x = 0; x < NX; ++x) {
    const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(sums[x]->d));
    _mm512_store_ps(acc[x],
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[x]), s, _mm512_load_ps(acc[x])));
  }
}

// A segment's accumulators: zero for the first, else where the last segment left them in y
// (one chain over the row, the order of kernels/int_dot_order.h).
inline void segment_start(TileAcc& acc, int nt, const float* y, size_t y_stride, bool first) {
  for (int x = 0; x < nt; ++x) {
    _mm512_store_ps(acc.v[x], first ? _mm512_setzero_ps() : _mm512_loadu_ps(y + x * y_stride));
  }
}

inline void store_tile(const TileAcc& acc, int nt, float* y, size_t y_stride) {
  for (int x = 0; x < nt; ++x) _mm512_storeu_ps(y + x * y_stride, _mm512_load_ps(acc.v[x]));
}

}  // namespace

void q4_k_dot_q8_k_panel_rows(const void* panels, int64_t npanels, const void* xq, size_t stride,
                              int64_t nx, int64_t n, float* y, size_t y_stride) {
  // One segment, the whole row (n <= kPanelRowsMaxCols): the two accumulators of
  // kernels/int_dot_order.h run over the row in one pass.
  constexpr size_t kUnit = R * sizeof(BlockQ4_K);
  const int64_t nb = n / kQKK;
  const size_t panel_bytes = kUnit * static_cast<size_t>(nb);
  TileAcc acc[2], accm[2];  // [panel of a pair]
  Q4KUnpacked unpacked;
  for_panel_tiles<BlockQ8_K, K4PanelAct, kMaxK4Blocks>(
      DType::Q4_K, npanels, panel_bytes, xq, stride, nx, nb, kQKK,
      [&](int64_t p, int64_t x0, int nt, const BlockQ8_K* const* arow,
          const K4PanelAct(*digits)[kMaxK4Blocks], int64_t, int64_t) {
        // Panels in pairs, p even with p + 1 (a pair split by a run of for_panel_tiles is still
        // done once, in the first run); the last of an odd count alone. Block 0 starts the
        // accumulators from zero (fma_block), where zeroing them first compiled to memset calls
        // per panel and tile.
        if (p % 2 == 1) return;
        const uint8_t* w = static_cast<const uint8_t*>(panels) + p * panel_bytes;
        auto panels_at_once = [&]<int NP>() {
          for (int64_t i = 0; i < nb; ++i) {
            const uint8_t* blk[NP];
            Q4KScales s[NP];
            for (int k = 0; k < NP; ++k) {
              blk[k] = w + k * panel_bytes + i * kUnit;
              s[k] = q4_k_scales(blk[k]);
            }
            q4_k_unpack<NP>(blk, unpacked);
            token_passes<4>(nt, [&]<int NX, bool kPf>(int x) {
              q4_k_pass<NP, NX, kPf>(unpacked, blk, s, arow, digits, i, acc, accm, x);
            });
          }
          // y = acc - accm for the tile's tokens.
          for (int k = 0; k < NP; ++k) {
            for (int x = 0; x < nt; ++x) {
              _mm512_storeu_ps(y + (x0 + x) * y_stride + (p + k) * R,
                               _mm512_sub_ps(_mm512_load_ps(acc[k].v[x]), _mm512_load_ps(accm[k].v[x])));
            }
          }
        };
        p + 1 < npanels ? panels_at_once.template operator()<2>() : panels_at_once.template operator()<1>();
      });
}

void q6_k_dot_q8_k_panel_rows(const void* panels, int64_t npanels, const void* xq, size_t stride,
                              int64_t nx, int64_t n, float* y, size_t y_stride) {
  constexpr size_t kUnit = R * 2 * sizeof(BlockQ6_K);
  const int64_t nb = n / kQKK;
  const size_t panel_bytes = kUnit * static_cast<size_t>(nb / 2);
  Q6KUnpacked b[2];
  TileAcc acc[2];
  for_panel_tiles<BlockQ8_K, Q6Offsets, kQ6Seg>(
      DType::Q6_K, npanels, panel_bytes, xq, stride, nx, nb, kQKK,
      [&](int64_t p, int64_t x0, int nt, const BlockQ8_K* const* arow,
          const Q6Offsets(*offs)[kQ6Seg], int64_t s0, int64_t s1) {
        // Panels in pairs, as Q4_K's (p even with p + 1); the last of an odd count alone.
        if (p % 2 == 1) return;
        const uint8_t* w = static_cast<const uint8_t*>(panels) + p * panel_bytes;
        float* yp = y + x0 * y_stride + p * R;
        auto panels_at_once = [&]<int NP>() {
          for (int k = 0; k < NP; ++k) segment_start(acc[k], nt, yp + k * R, y_stride, s0 == 0);
          for (int64_t i = s0; i < s1; ++i) {
            const int64_t h2 = i & 1;
            const uint8_t* blk[NP];
            const uint8_t* pf[NP];
            __m512 dw[NP];
            for (int k = 0; k < NP; ++k) {
              const uint8_t* unit = w + k * panel_bytes + (i / 2) * kUnit;
              blk[k] = unit + 64 + 3328 * h2;
              dw[k] = load_f16x16(unit + 32 * h2);
              pf[k] = blk[k] + 3328;  // the next block's 52 lines (the next unit's first block one line further)
              q6_k_unpack(blk[k], b[k]);
            }
            token_passes<4>(nt, [&]<int NX, bool kPf>(int x) {
              q6_k_pass<NP, NX, kPf>(b, dw, arow, offs, i, s0, acc, x, pf);
            });
          }
          for (int k = 0; k < NP; ++k) store_tile(acc[k], nt, yp + k * R, y_stride);
        };
        p + 1 < npanels ? panels_at_once.template operator()<2>() : panels_at_once.template operator()<1>();
      });
}

void q8_0_panel_act(const void* xq, int64_t n, void* act) {
  const auto* a = static_cast<const BlockQ8_0*>(xq);
  auto* out = static_cast<Q80PanelAct*>(act);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t i = 0; i < n / kQK; ++i) {
    // sum (q + 128) by vpsadbw, 4 partial sums of 8 bytes each, then 32 * 128 off.
    const __m256i q = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].qs)), flip);
    const __m256i sad = _mm256_sad_epu8(q, _mm256_setzero_si256());
    const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
    const int32_t sum = static_cast<int32_t>(_mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1)) - kQK * 128;
    out[i].d = f16_to_f32(a[i].d);
    out[i].sum128 = 128 * sum;
  }
}

void q8_0_dot_q8_0_panel_rows(const void* panels, int64_t npanels, const void* xq, size_t stride,
                              int64_t nx, int64_t n, float* y, size_t y_stride) {
  constexpr size_t kUnit = R * 2 * sizeof(BlockQ8_0);
  const int64_t nb = n / kQK;
  const size_t panel_bytes = kUnit * static_cast<size_t>(nb / 2);
  TileAcc acc;
  for_panel_tiles<BlockQ8_0, Q80PanelAct, kQ8Seg>(
      DType::Q8_0, npanels, panel_bytes, xq, stride, nx, nb, kQK,
      [&](int64_t p, int64_t x0, int nt, const BlockQ8_0* const* arow,
          const Q80PanelAct(*sums)[kQ8Seg], int64_t s0, int64_t s1) {
        const uint8_t* w = static_cast<const uint8_t*>(panels) + p * panel_bytes;
        float* yp = y + x0 * y_stride + p * R;
        segment_start(acc, nt, yp, y_stride, s0 == 0);
        for (int64_t i = s0; i < s1; ++i) {
          const uint8_t* u = w + (i / 2) * kUnit;
          const int64_t b = i & 1;
          const __m512 dw = load_f16x16(u + 32 * b);
          // The next unit's 17 lines, half in each block's first pass.
          const uint8_t* pf = u + kUnit + 512 * b;
          token_passes<4>(nt, [&]<int NX, bool kPf>(int x) {
            q8_0_pass<NX, kPf>(u + 64 + 512 * b, dw, arow + x, sums + x, i, s0, acc.v + x, pf);
          });
          if (b == 1) prefetch_line_of<true>(pf, 8);
        }
        store_tile(acc, nt, yp, y_stride);
      });
}

}  // namespace ll3::kernels::avx512
