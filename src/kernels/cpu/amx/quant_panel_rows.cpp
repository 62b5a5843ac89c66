// The batched kernels of Q4_K, Q6_K and Q8_0 weights (TypeTraits::dot_q_panel_rows) on AMX-INT8
// tiles: the kernels of every step that carries 16 or more tokens (prompts, and decode steps
// of 16 or more sequences) on CPUs with AMX. Fewer tokens take the AVX-512 kernels. Both give
// the same bits: the integer sums are exact, and the float part follows
// kernels/int_dot_order.h.
//
// A panel line (kernels/panels.h: 4 bytes of each of 16 rows) is already a row of a B tile
// (K/4 rows of 16 columns x 4 bytes), and the Q8_K activations of 16 tokens load directly as
// an A tile (16 rows of 64 bytes, one token a row, `stride` apart). Per block and 64 columns j
// (sub-blocks 2j and 2j + 1), B's lines 0-7 hold the low nibbles of lines 8j .. 8j + 7 and
// lines 8-15 the high ones: K in the activations' order.
//
// The scales are folded into B so that one pair of accumulators sums a whole block:
// - Q4_K: the 6-bit sub-block scale sc = 16 sh + sl, and B_l = q * sl, B_h = q * sh are
//   bytes (q * sl <= 225), made with one vpmullw per line and digit (two bytes of a word
//   multiply without a carry between them). isum = C_l + 16 C_h. The mins term (a product
//   of 8) stays on vpdpbusd.
// - Q6_K: p = (u - 32) * sc per weight (|p| <= 4096, a word) split into its low byte
//   (unsigned, TDPBSUD) and high byte (signed, TDPBSSD). isum = C_l + 256 C_h.
// - Q8_0 has no scale inside a block: see struct Q80.
//
// B is made once per block for all the tokens of a group (up to 64): at 16 tokens a block
// costs 8 tile products and its B; at 64 the B is shared by 32 products.
//
// Measured on a Sapphire Rapids-class Xeon (one core, quant_gemv_bench gemm_panels Q4_K, the
// AVX-512 kernel alternated): a product of 16 tokens x 16 rows x 64 columns takes 4.5 ns, so a
// step's 8 take 54 ns where vpdpbusd takes 314. But the tile unit and the vector units did
// not overlap here (a step plus independent FMAs took the sum of both alone), so the float
// part (about 20 vector instructions per token and step) and B (11 per line) set the speed:
// medians of 3 alternated rounds, 2048 x 512 x 16 581 GOPS against 460, x 64 tokens 674
// against 436; streaming (2048 x 65536) 470 against 411 and 575 against 390.
// Loading A from a packed copy made the products alone 1.6x faster, but the copy per call
// (a matmul hands out few panels per call) cost as much end to end, so A loads in place.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "kernels/cpu/amx/tiles.h"
#include "kernels/cpu/avx512/panel_simd.h"
#include "kernels/cpu/panel_act.h"
#include "kernels/cpu/row_passes.h"
#include "kernels/panels.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_kernels.h"

namespace ll3::kernels::amx {

using namespace ll3::quant;
using avx512::bcast32;
using avx512::fma_block;
using avx512::load_f16x16;
using avx512::Q4KScales;

namespace {

constexpr int R = static_cast<int>(kPanelRows);  // rows of a panel, tokens of a tile
constexpr int kGroupTiles = 4;                    // tiles of tokens that share a block's B
constexpr int64_t kGroupTokens = kGroupTiles * R;
constexpr int64_t kMaxBlocks = kPanelRowsMaxCols / kQKK;

struct alignas(64) BTiles {
  __m512i b[4][2][R];  // [64 columns j][digit][line]
};
struct alignas(64) IntTile {
  int32_t v[R][R];  // [token][row]
};
struct alignas(64) TileAcc {
  float v[R][R];  // [token][row]
};

// x | x << 16: a word per row (the low one of x's dwords) in both words of its dword.
inline __m512i in_both_words(__m512i x) { return _mm512_or_si512(x, _mm512_slli_epi32(x, 16)); }

inline void prefetch_lines(const uint8_t* p, int lines) {
  for (int l = 0; l < lines; ++l) _mm_prefetch(reinterpret_cast<const char*>(p) + 64 * l, _MM_HINT_T0);
}

// The products of one step of Q4_K / Q6_K (a: the first token's qs of the block), stored to
// lo / hi (the two digits' sums). Tiles:
// the accumulators 0 (low digit) and 1 (high), and two sets of operands, A 2, B 3-4 and A 5,
// B 6-7, taken by turns over the block's four 64-column steps: tile registers are not
// renamed, so a tile load waits for every product that reads its register, and with one set
// the loads and products ran by turns (the B loads were half of the kernel's time). kSigned:
// the high digit is signed (Q6_K). Tile numbers are literals: GCC's _tile_* macros paste
// them into the asm text.
template <bool kSigned>
inline void digit_products(const uint8_t* a, size_t stride, const BTiles& t, IntTile& lo, IntTile& hi) {
  _tile_zero(0);
  _tile_zero(1);
  LL3_UNROLL for (int j = 0; j < 4; j += 2) {
    _tile_loadd(2, a + 64 * j, stride);
    _tile_loadd(3, t.b[j][0], 64);
    _tile_loadd(4, t.b[j][1], 64);
    _tile_dpbsud(0, 2, 3);
    if constexpr (kSigned) _tile_dpbssd(1, 2, 4);
    else _tile_dpbsud(1, 2, 4);
    _tile_loadd(5, a + 64 * (j + 1), stride);
    _tile_loadd(6, t.b[j + 1][0], 64);
    _tile_loadd(7, t.b[j + 1][1], 64);
    _tile_dpbsud(0, 5, 6);
    if constexpr (kSigned) _tile_dpbssd(1, 5, 7);
    else _tile_dpbsud(1, 5, 7);
  }
  _tile_stored(0, lo.v, 64);
  _tile_stored(1, hi.v, 64);
}

// ---- Q4_K ------------------------------------------------------------------------------------
struct Q4K {
  static constexpr DType kType = DType::Q4_K;
  static constexpr int kHighShift = 4;               // isum = C_l + (C_h << 4)
  static constexpr bool kMins = true;
  static constexpr size_t kUnit = R * sizeof(BlockQ4_K);  // one block column of a panel
  static constexpr int64_t kBlockCols = kQKK;
  static constexpr int64_t kSeg = kMaxBlocks;  // the whole row: the mins' chain too in one pass
  static constexpr int64_t kSideBlocks = kSeg;
  using Scales = Q4KScales;
  using Side = K4PanelAct;  // the mins' activation sums, per token and block

  static void configure() { configure_tiles(); }
  static size_t act_offset(int64_t i) { return static_cast<size_t>(i) * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, qs); }
  static void products(const uint8_t* a, size_t stride, const uint8_t*, int64_t, const BTiles& t, IntTile& lo,
                       IntTile& hi) {
    digit_products<false>(a, stride, t, lo, hi);
  }

  static size_t panel_bytes(int64_t nb) { return kUnit * static_cast<size_t>(nb); }
  static const uint8_t* block(const uint8_t* w, int64_t i) { return w + i * kUnit; }
  static Scales scales(const uint8_t* w, int64_t i) { return avx512::q4_k_scales(block(w, i)); }

  // Block i's B tiles, both digits; prefetches the block after it.
  static void make_tiles(const uint8_t* w, int64_t i, const Scales& s, BTiles& t) {
    const uint8_t* blk = block(w, i);
    const uint8_t* next = blk + kUnit;
    const __m512i m0f = _mm512_set1_epi8(0x0f), d0f = _mm512_set1_epi32(0x0f);
    prefetch_lines(next, 4);
    LL3_UNROLL for (int j = 0; j < 4; ++j) {
      const __m512i la = in_both_words(_mm512_and_si512(s.sa[j], d0f)), ha = in_both_words(_mm512_srli_epi32(s.sa[j], 4));
      const __m512i lb = in_both_words(_mm512_and_si512(s.sb[j], d0f)), hb = in_both_words(_mm512_srli_epi32(s.sb[j], 4));
      LL3_UNROLL for (int r = 0; r < 8; ++r) {
        const int line = 8 * j + r;
        _mm_prefetch(reinterpret_cast<const char*>(next) + 256 + 64 * line, _MM_HINT_T0);
        const __m512i q = _mm512_loadu_si512(blk + 256 + 64 * line);
        const __m512i lo = _mm512_and_si512(q, m0f), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m0f);
        _mm512_store_si512(&t.b[j][0][r], _mm512_mullo_epi16(lo, la));
        _mm512_store_si512(&t.b[j][1][r], _mm512_mullo_epi16(lo, ha));
        _mm512_store_si512(&t.b[j][0][8 + r], _mm512_mullo_epi16(hi, lb));
        _mm512_store_si512(&t.b[j][1][8 + r], _mm512_mullo_epi16(hi, hb));
      }
    }
  }

  // The float part of a step (block i, 16 tokens from x0) from its stored accumulators.
  static void finish(const IntTile& lo, const IntTile& hi, const Scales& s, const void* xq, size_t stride, int64_t x0,
                     int64_t i, const Side (*side)[kSeg], int64_t si, TileAcc& acc, TileAcc& accm) {
    for (int t = 0; t < R; ++t) {
      const __m512 ad = _mm512_set1_ps((act_row<BlockQ8_K>(xq, stride, x0 + t) + i)->d);
      const K4PanelAct& dg = side[t][si];
      const __m512i msum =
          avx512::q4_k_min_sum(s, bcast32(dg.h), bcast32(dg.h + 4), bcast32(dg.l), bcast32(dg.l + 4));
      fma_block(accm.v[t], msum, _mm512_mul_ps(s.dmin, ad), i);
      const __m512i isum =
          _mm512_add_epi32(_mm512_load_si512(lo.v[t]), _mm512_slli_epi32(_mm512_load_si512(hi.v[t]), kHighShift));
      fma_block(acc.v[t], isum, _mm512_mul_ps(s.d, ad), i);
    }
  }
};

// ---- Q6_K ------------------------------------------------------------------------------------
// Units of two block columns (kernels/panels.h): the d of both, then each block's scales, qh
// and ql lines.
struct Q6K {
  static constexpr int kHighShift = 8;  // isum = C_l + (C_h << 8)
  static constexpr bool kMins = false;
  static constexpr size_t kUnit = R * 2 * sizeof(BlockQ6_K);
  static constexpr size_t kBlockBytes = 3328;
  static constexpr int64_t kBlockCols = kQKK;
  static constexpr int64_t kSeg = kMaxBlocks;
  static constexpr int64_t kSideBlocks = 1;  // none
  struct Scales {
    __m512 d;
  };
  struct Side {};

  static void configure() { configure_tiles(); }
  static size_t act_offset(int64_t i) { return Q4K::act_offset(i); }
  static void products(const uint8_t* a, size_t stride, const uint8_t*, int64_t, const BTiles& t, IntTile& lo,
                       IntTile& hi) {
    digit_products<true>(a, stride, t, lo, hi);
  }

  static size_t panel_bytes(int64_t nb) { return kUnit * static_cast<size_t>(nb / 2); }
  static const uint8_t* block(const uint8_t* w, int64_t i) { return w + (i / 2) * kUnit + 64 + kBlockBytes * (i & 1); }
  static Scales scales(const uint8_t* w, int64_t i) { return {load_f16x16(w + (i / 2) * kUnit + 32 * (i & 1))}; }

  // One line of u (6-bit values, 4 per row) times its group's scale sc (a word per row in
  // both words; off = -32 sc) as the two byte digits of p = (u - 32) sc.
  static void digits(__m512i u, __m512i sc, __m512i off, __m512i& lo, __m512i& hi) {
    const __m512i w00ff = _mm512_set1_epi16(0x00ff);
    const __m512i pe = _mm512_add_epi16(_mm512_mullo_epi16(_mm512_and_si512(u, w00ff), sc), off);
    const __m512i po = _mm512_add_epi16(_mm512_mullo_epi16(_mm512_srli_epi16(u, 8), sc), off);
    lo = _mm512_ternarylogic_epi32(w00ff, pe, _mm512_slli_epi16(po, 8), 0xca);  // w00ff ? pe : po << 8
    hi = _mm512_ternarylogic_epi32(w00ff, _mm512_srli_epi16(pe, 8), po, 0xca);  // w00ff ? pe >> 8 : po
  }

  // Block i's B tiles: 64 columns j = 2h + part of half h are its lines u[h][part][0..15]
  // (q6_k_assemble), each line kk in group 8h + 4 part + kk / 4. Prefetches the 64 lines
  // after the block: the next block's 52 (the next unit's first block starts a line further).
  static void make_tiles(const uint8_t* w, int64_t i, const Scales&, BTiles& t) {
    const uint8_t* blk = block(w, i);
    __m512i sc[16], off[16];
    LL3_UNROLL for (int g = 0; g < 16; ++g) {
      const __m512i s32 = _mm512_srai_epi32(_mm512_slli_epi32(_mm512_loadu_si512(blk + 64 * (g / 4)), 24 - 8 * (g % 4)), 24);
      sc[g] = in_both_words(_mm512_and_si512(s32, _mm512_set1_epi32(0xffff)));
      off[g] = _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_slli_epi16(sc[g], 5));
    }
    LL3_UNROLL for (int h = 0; h < 2; ++h) {
      const uint8_t* half = blk + 256 + 1536 * h;
      LL3_UNROLL for (int kk = 0; kk < 16; ++kk) {
        prefetch_lines(blk + kBlockBytes + 128 * (16 * h + kk), 2);
        const int q = kk / 4;
        __m512i u0, u1;
        avx512::q6_k_assemble(_mm512_loadu_si512(half + 512 + 64 * kk), _mm512_loadu_si512(half + 64 * (kk % 8)), q, u0,
                              u1);
        __m512i lo, hi;
        digits(u0, sc[8 * h + q], off[8 * h + q], lo, hi);
        _mm512_store_si512(&t.b[2 * h][0][kk], lo);
        _mm512_store_si512(&t.b[2 * h][1][kk], hi);
        digits(u1, sc[8 * h + 4 + q], off[8 * h + 4 + q], lo, hi);
        _mm512_store_si512(&t.b[2 * h + 1][0][kk], lo);
        _mm512_store_si512(&t.b[2 * h + 1][1][kk], hi);
      }
    }
  }

  static void finish(const IntTile& lo, const IntTile& hi, const Scales& s, const void* xq, size_t stride, int64_t x0,
                     int64_t i, const Side (*)[kSideBlocks], int64_t, TileAcc& acc, TileAcc&) {
    for (int t = 0; t < R; ++t) {
      const __m512 ad = _mm512_set1_ps((act_row<BlockQ8_K>(xq, stride, x0 + t) + i)->d);
      const __m512i isum =
          _mm512_add_epi32(_mm512_load_si512(lo.v[t]), _mm512_slli_epi32(_mm512_load_si512(hi.v[t]), kHighShift));
      fma_block(acc.v[t], isum, _mm512_mul_ps(s.d, ad), i);
    }
  }
};

// ---- Q8_0 ------------------------------------------------------------------------------------
// Units of two blocks of 32 (kernels/panels.h): the d of both, then each block's 8 groups of
// quants + 128 as unsigned bytes, which are B tile rows as they stand: nothing to make. A
// "block" of the driver is a unit; its two Q8_0 blocks have their own scales, so each takes
// a product of K = 32 (A tiles 16 x 32 bytes, B tiles 8 rows) into its own accumulator. The
// sums are sum (q + 128) a; the float part subtracts 128 sum a (Q80PanelAct), as the AVX-512
// kernel starts from it.
struct Q80 {
  static constexpr DType kType = DType::Q8_0;
  static constexpr bool kMins = false;
  static constexpr size_t kUnit = R * 2 * sizeof(BlockQ8_0);
  static constexpr int64_t kBlockCols = 2 * kQK;
  static constexpr int64_t kSeg = 64;  // units whose side data is made at a time
  static constexpr int64_t kSideBlocks = 2 * kSeg;
  struct Scales {
    __m512 d0, d1;
  };
  using Side = Q80PanelAct;  // per Q8_0 block: two per unit

  static void configure() {
    TileConfig c;
    const auto set = [&](int t, int colsb, int rows) {
      c.colsb[t] = static_cast<uint16_t>(colsb);
      c.rows[t] = static_cast<uint8_t>(rows);
    };
    for (int t : {0, 1}) set(t, 64, R);       // accumulators
    for (int t : {2, 4}) set(t, kQK, R);      // A: 16 tokens x 32 quants
    for (int t : {3, 5}) set(t, 64, kQK / 4); // B: 8 rows of 16 x 4 quants
    configure_tiles(c);
  }
  static size_t panel_bytes(int64_t nb) { return kUnit * static_cast<size_t>(nb); }
  static size_t act_offset(int64_t i) { return static_cast<size_t>(2 * i) * sizeof(BlockQ8_0) + offsetof(BlockQ8_0, qs); }
  static Scales scales(const uint8_t* w, int64_t i) {
    const uint8_t* u = w + i * kUnit;
    return {load_f16x16(u), load_f16x16(u + 32)};
  }
  // Nothing to make; prefetches unit i + 1, whose B the products will load from the panel.
  static void make_tiles(const uint8_t* w, int64_t i, const Scales&, BTiles&) { prefetch_lines(w + (i + 1) * kUnit, 17); }

  static void products(const uint8_t* a, size_t stride, const uint8_t* w, int64_t i, const BTiles&, IntTile& lo,
                       IntTile& hi) {
    const uint8_t* u = w + i * kUnit;
    _tile_zero(0);
    _tile_zero(1);
    _tile_loadd(2, a, stride);
    _tile_loadd(3, u + 64, 64);
    _tile_loadd(4, a + sizeof(BlockQ8_0), stride);
    _tile_loadd(5, u + 64 + 8 * 64, 64);
    _tile_dpbsud(0, 2, 3);
    _tile_dpbsud(1, 4, 5);
    _tile_stored(0, lo.v, 64);
    _tile_stored(1, hi.v, 64);
  }

  static void finish(const IntTile& lo, const IntTile& hi, const Scales& s, const void*, size_t, int64_t, int64_t i,
                     const Side (*side)[kSideBlocks], int64_t si, TileAcc& acc, TileAcc&) {
    for (int t = 0; t < R; ++t) {
      const Q80PanelAct& a0 = side[t][2 * si];
      const Q80PanelAct& a1 = side[t][2 * si + 1];
      const __m512i i0 = _mm512_sub_epi32(_mm512_load_si512(lo.v[t]), _mm512_set1_epi32(a0.sum128));
      const __m512i i1 = _mm512_sub_epi32(_mm512_load_si512(hi.v[t]), _mm512_set1_epi32(a1.sum128));
      fma_block(acc.v[t], i0, _mm512_mul_ps(s.d0, _mm512_set1_ps(a0.d)), i);
      _mm512_store_ps(acc.v[t], _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1), _mm512_mul_ps(s.d1, _mm512_set1_ps(a1.d)),
                                                _mm512_load_ps(acc.v[t])));
    }
  }
};

// ---- the driver ------------------------------------------------------------------------------
// Everything one thread keeps between the steps of a call (about 30 KB, L1 and L2; the side
// data, up to 128 KB, is on the caller's stack).
template <class K>
struct State {
  BTiles b[2];                   // B of blocks i (even / odd)
  typename K::Scales s[2];       // their scales
  IntTile c[2][2];               // the stored accumulators (low, high) of steps s (even / odd)
  TileAcc acc[kGroupTiles], accm[kGroupTiles];
};

// Side data of a group's tokens for the blocks of a segment: [tile][token][block - s0].
template <class K>
using SideRows = typename K::Side[R][K::kSideBlocks];

// One panel (blocks [s0, s1) at w) against the tiles of a group (tiles at tokens xs[0 .. nt)).
// Each step stores its accumulators to one of two buffers, and the float part of the step
// before runs from the other once the step's products are issued; block i + 1's B is made
// during block i's first step, into the buffer block i - 1 used.
template <class K>
void panel(const uint8_t* w, int64_t s0, int64_t s1, const void* xq, size_t stride, const int64_t* xs, int nt,
           const SideRows<K>* side, State<K>& st) {
  st.s[s0 & 1] = K::scales(w, s0);
  K::make_tiles(w, s0, st.s[s0 & 1], st.b[s0 & 1]);
  int64_t step = 0, prev_i = 0;
  int prev_k = 0;
  auto finish_prev = [&] {
    const IntTile* c = st.c[(step - 1) & 1];
    K::finish(c[0], c[1], st.s[prev_i & 1], xq, stride, xs[prev_k], prev_i, side[prev_k], prev_i - s0,
              st.acc[prev_k], st.accm[prev_k]);
  };
  for (int64_t i = s0; i < s1; ++i) {
    for (int k = 0; k < nt; ++k) {
      const uint8_t* a = static_cast<const uint8_t*>(xq) + static_cast<size_t>(xs[k]) * stride + K::act_offset(i);
      K::products(a, stride, w, i, st.b[i & 1], st.c[step & 1][0], st.c[step & 1][1]);
      if (step > 0) finish_prev();
      if (k == 0 && i + 1 < s1) {
        st.s[(i + 1) & 1] = K::scales(w, i + 1);
        K::make_tiles(w, i + 1, st.s[(i + 1) & 1], st.b[(i + 1) & 1]);
      }
      prev_i = i;
      prev_k = k;
      ++step;
    }
  }
  finish_prev();
}

template <class K>
void panel_rows(const void* panels, int64_t npanels, const void* xq, size_t stride, int64_t nx, int64_t n, float* y,
                size_t y_stride) {
  static_assert(!K::kMins || K::kSeg >= kMaxBlocks, "the mins' chain is not carried between segments");
  const int64_t nb = n / K::kBlockCols;
  const size_t panel_bytes = K::panel_bytes(nb);
  // With more than one group of tokens, the panels go in runs of about kRunBytes, every group
  // over one run before the next, so that the groups after the first read it from L2.
  const int64_t run = nx <= kGroupTokens ? npanels
                                         : std::max<int64_t>(1, static_cast<int64_t>(kRunBytes / panel_bytes));
  using Side = typename K::Side;
  alignas(64) SideRows<K> side[kGroupTiles];
  State<K> st;
  K::configure();
  for (int64_t p0 = 0; p0 < npanels; p0 += run) {
    const int64_t p1 = std::min(npanels, p0 + run);
    for (int64_t g0 = 0; g0 < nx; g0 += kGroupTokens) {
      // Tiles of 16 tokens; the last ends where the group does, overlapping the one before
      // (its tokens are computed twice, to the same bits), so no tile is partial.
      const int64_t g1 = std::min(nx, g0 + kGroupTokens);
      int64_t xs[kGroupTiles];
      int nt = 0;
      for (int64_t x = g0; x < g1; x += R) xs[nt++] = std::min(x, g1 - R);
      // Segments of blocks whose side data is made at a time; between segments the chain of
      // each row goes through y (kernels/int_dot_order.h: one chain, in block order).
      for (int64_t s0 = 0; s0 < nb; s0 += K::kSeg) {
        const int64_t s1 = std::min(nb, s0 + K::kSeg);
        if constexpr (!std::is_empty_v<Side>) {
          for (int k = 0; k < nt; ++k) {
            for (int t = 0; t < R; ++t) {
              // The token's activation blocks from block s0 on (act_offset less the quants' offset).
              const uint8_t* row = static_cast<const uint8_t*>(xq) + static_cast<size_t>(xs[k] + t) * stride +
                                   (K::act_offset(s0) - K::act_offset(0));
              panel_act(K::kType, row, (s1 - s0) * K::kBlockCols, side[k][t]);
            }
          }
        }
        for (int64_t p = p0; p < p1; ++p) {
          float* yp = y + p * R;
          if (s0 > 0) {
            for (int k = 0; k < nt; ++k)
              for (int t = 0; t < R; ++t) _mm512_store_ps(st.acc[k].v[t], _mm512_loadu_ps(yp + (xs[k] + t) * y_stride));
          }
          panel<K>(static_cast<const uint8_t*>(panels) + p * panel_bytes, s0, s1, xq, stride, xs, nt, side, st);
          for (int k = 0; k < nt; ++k) {
            for (int t = 0; t < R; ++t) {
              __m512 v = _mm512_load_ps(st.acc[k].v[t]);
              if constexpr (K::kMins) v = _mm512_sub_ps(v, _mm512_load_ps(st.accm[k].v[t]));
              _mm512_storeu_ps(yp + (xs[k] + t) * y_stride, v);
            }
          }
        }
      }
    }
  }
  _tile_release();
}

}  // namespace

void q4_k_dot_q8_k_panel_rows(const void* panels, int64_t npanels, const void* xq, size_t stride, int64_t nx,
                              int64_t n, float* y, size_t y_stride) {
  if (nx < R) return avx512::q4_k_dot_q8_k_panel_rows(panels, npanels, xq, stride, nx, n, y, y_stride);
  panel_rows<Q4K>(panels, npanels, xq, stride, nx, n, y, y_stride);
}

void q6_k_dot_q8_k_panel_rows(const void* panels, int64_t npanels, const void* xq, size_t stride, int64_t nx,
                              int64_t n, float* y, size_t y_stride) {
  if (nx < R) return avx512::q6_k_dot_q8_k_panel_rows(panels, npanels, xq, stride, nx, n, y, y_stride);
  panel_rows<Q6K>(panels, npanels, xq, stride, nx, n, y, y_stride);
}

void q8_0_dot_q8_0_panel_rows(const void* panels, int64_t npanels, const void* xq, size_t stride, int64_t nx,
                              int64_t n, float* y, size_t y_stride) {
  if (nx < R) return avx512::q8_0_dot_q8_0_panel_rows(panels, npanels, xq, stride, nx, n, y, y_stride);
  panel_rows<Q80>(panels, npanels, xq, stride, nx, n, y, y_stride);
}

}  // namespace ll3::kernels::amx
