// AMX-BF16 kernels of kernels/gemm_bf16.h. Tile registers: 0-3 accumulate a 32-row x 32-token
// block of y (2 x 2 tiles of 16 x 16 floats), 4-5 hold 16 weight rows x 32 k each, 6-7 hold
// 32 k x 16 tokens each; every k step of 32 loads 4 tiles and runs 4 products.
//
// A step needs 4 KB of tiles per 64 cycles of products, more than L2 delivers, so k is cut
// into chunks: the block's rows are unpacked one chunk at a time into an L1 buffer that every
// token pair reuses, and the accumulators are parked in a small buffer between chunks.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/amx/tiles.h"
#include "kernels/gemm_bf16.h"

namespace ll3::kernels::amx {

namespace {

constexpr int64_t kPassTokens = 512;           // tokens whose accumulators are parked (64 KB)
constexpr int64_t kLda = kBf16ChunkK + 32;     // unpacked row stride: rows spread over L1 sets

// 32 floats -> 16 dwords, each the bf16 pair (src[2i], src[2i + 1]).
inline __m512i to_bf16_pairs(const float* src) {
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 16), _mm512_loadu_ps(src)));
}

// In-register 16 x 16 float transpose: r[i] holds row i on entry, column i on return.
inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane: pairs of rows interleaved
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 4; ++g) {  // per lane: element j of rows 4g..4g+3 in u[4g + j]
    const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 2]);
    const __m512d c = _mm512_castps_pd(t[4 * g + 1]), d = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
  }
  for (int j = 0; j < 4; ++j) {  // gather lane L of the four row groups: column 4L + j
    const __m512 v0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), v1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xdd);
    const __m512 w0 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const __m512 w1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xdd);
    r[j] = _mm512_shuffle_f32x4(v0, w0, 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(v0, w0, 0xdd);
    r[4 + j] = _mm512_shuffle_f32x4(v1, w1, 0x88);
    r[12 + j] = _mm512_shuffle_f32x4(v1, w1, 0xdd);
  }
}

// Writes accumulator tile C (16 weight rows x 16 tokens) to y transposed: y[t * ldy + m].
template <int C>
inline void store_tile(float* y, size_t ldy, int64_t rows, int64_t tokens) {
  static_assert(C >= 0 && C <= 3, "accumulators are tiles 0-3");
  if (rows <= 0 || tokens <= 0) return;
  alignas(64) float tmp[16 * 16];  // (m, t)
  // The tile number must be a literal: GCC's _tile_* macros paste it into the asm text
  // ("%%tmm" #tmm), so a template parameter there would name the register "%tmmC".
  if constexpr (C == 0) _tile_stored(0, tmp, 64);
  else if constexpr (C == 1) _tile_stored(1, tmp, 64);
  else if constexpr (C == 2) _tile_stored(2, tmp, 64);
  else _tile_stored(3, tmp, 64);
  __m512 r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_load_ps(tmp + 16 * i);
  transpose16(r);
  const __mmask16 m = rows >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << rows) - 1);
  const int64_t nt = std::min<int64_t>(tokens, 16);
  for (int64_t t = 0; t < nt; ++t) _mm512_mask_storeu_ps(y + t * ldy, m, r[t]);
}

// Walks a prefetch range a few cache lines per k step.
struct Prefetcher {
  const char* p;
  const char* end;
  int per_step;
  void step() {
    for (int i = 0; i < per_step && p < end; ++i, p += 64) _mm_prefetch(p, _MM_HINT_T1);
  }
};

// Unpacks one chunk of the block's rows to bf16 a few rows at a time. The tile products run
// asynchronously on the AMX unit, so rows unpacked between them cost little: chunk c + 1 is
// unpacked while chunk c multiplies.
struct Unpacker {
  const Bf16WeightRows* w = nullptr;
  const uint8_t* src = nullptr;  // the chunk's piece of row 0
  uint16_t* dst = nullptr;       // (nr, kLda)
  int64_t len = 0;               // elements per row piece
  int64_t r = 0, nr = 0;         // next row, rows
  int64_t per_step = 0;
  float* stage = nullptr;        // kBf16ChunkK floats (types without to_bf16)

  void row() {
    const uint8_t* s = src + r * w->row_bytes;
    uint16_t* d = dst + r * kLda;
    if (w->to_bf16 != nullptr) {
      w->to_bf16(s, d, len);
    } else {
      w->to_float(s, stage, len);
      for (int64_t i = 0; i < len; i += 32) _mm512_store_si512(d + i, to_bf16_pairs(stage + i));
    }
    ++r;
  }
  void step() {
    for (int64_t i = 0; i < per_step && r < nr; ++i) row();
  }
  void finish() {
    while (r < nr) row();
  }
};

struct Pass {
  const char* a;        // the chunk's unpacked rows (bf16), kLda elements apart
  const uint16_t* xp;   // packed activations of the whole product
  int64_t nr;           // valid weight rows (<= 32)
  int64_t n, k;
  float* y;
  size_t ldy;
};

// Steps [i0, i1) of k for the token pair starting at token t: accumulators 0-3 are restored
// from (or, on the first chunk, zeroed into) park, and saved back or, on the last chunk,
// written to y.
template <bool kRows2, bool kTok2>
void pair_chunk(const Pass& p, int64_t t, int64_t i0, int64_t i1, float* park, Prefetcher& pf, Unpacker& up) {
  const uint16_t* x0 = p.xp + t * p.k;
  const uint16_t* x1 = x0 + kBf16TokenGroup * p.k;
#if !defined(__clang__)
  // GCC's _tile_loadd is an asm statement that declares no memory access (of the tile
  // intrinsics only _tile_stored clobbers memory), so stores into what the tiles load (the
  // unpacked chunk, the packed activations) could be moved past the loads. Every store those
  // loads read happens before this call: complete them here. Clang's tile intrinsics are
  // builtins whose memory effects the compiler knows.
  __asm__ volatile("" ::: "memory");
#endif
  if (i0 == 0) {
    _tile_zero(0);
    if (kTok2) _tile_zero(1);
    if (kRows2) _tile_zero(2);
    if (kRows2 && kTok2) _tile_zero(3);
  } else {
    _tile_loadd(0, park, 64);
    if (kTok2) _tile_loadd(1, park + 256, 64);
    if (kRows2) _tile_loadd(2, park + 512, 64);
    if (kRows2 && kTok2) _tile_loadd(3, park + 768, 64);
  }
  for (int64_t i = i0; i < i1; i += 32) {
    pf.step();
    up.step();
    _tile_loadd(4, p.a + (i - i0) * 2, kLda * 2);
    _tile_loadd(6, x0 + i * kBf16TokenGroup, 64);
    if (kTok2) _tile_loadd(7, x1 + i * kBf16TokenGroup, 64);
    _tile_dpbf16ps(0, 4, 6);
    if (kTok2) _tile_dpbf16ps(1, 4, 7);
    if (kRows2) {
      _tile_loadd(5, p.a + (16 * kLda + i - i0) * 2, kLda * 2);
      _tile_dpbf16ps(2, 5, 6);
      if (kTok2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  if (i1 < p.k) {
    _tile_stored(0, park, 64);
    if (kTok2) _tile_stored(1, park + 256, 64);
    if (kRows2) _tile_stored(2, park + 512, 64);
    if (kRows2 && kTok2) _tile_stored(3, park + 768, 64);
    return;
  }
  float* y = p.y + t * p.ldy;
  const int64_t rows0 = std::min<int64_t>(p.nr, 16), rows1 = p.nr - 16, t0 = p.n - t, t1 = t0 - 16;
  store_tile<0>(y, p.ldy, rows0, t0);
  if (kTok2) store_tile<1>(y + 16 * p.ldy, p.ldy, rows0, t1);
  if (kRows2) store_tile<2>(y + 16, p.ldy, rows1, t0);
  if (kRows2 && kTok2) store_tile<3>(y + 16 * p.ldy + 16, p.ldy, rows1, t1);
}

}  // namespace

void pack_x_bf16(const float* x, size_t ldx, int64_t n_valid, int64_t k, uint16_t* out) {
  // Dword p of token t goes to out32[p * 16 + t].
  auto* out32 = reinterpret_cast<int*>(out);
  const __m512i index = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32(static_cast<int>(kBf16TokenGroup)));
  for (int64_t t = 0; t < kBf16TokenGroup; ++t) {
    for (int64_t i = 0; i < k; i += 32) {
      const __m512i v = t < n_valid ? to_bf16_pairs(x + t * ldx + i) : _mm512_setzero_si512();
      _mm512_i32scatter_epi32(out32 + (i / 2) * kBf16TokenGroup + t, index, v, 4);
    }
  }
}

void gemm_bf16(const Bf16WeightRows& w, const uint16_t* xp, int64_t n, int64_t k, float* y, size_t ldy) {
  alignas(64) uint16_t a[2][kBf16RowBlock * kLda];  // (2, 32, kLda): the chunk in use, the next one
  alignas(64) float park[kPassTokens / 32][4 * 256];
  alignas(64) float stage[kBf16ChunkK];
  // Rows past nr feed products that are never stored; zero them so they hold no NaNs.
  for (int64_t r = w.nr; r < kBf16RowBlock; ++r) {
    std::fill_n(a[0] + r * kLda, kLda, uint16_t{0});
    std::fill_n(a[1] + r * kLda, kLda, uint16_t{0});
  }
  const int64_t chunks = (k + kBf16ChunkK - 1) / kBf16ChunkK;
  auto unpacker = [&](int64_t c, int64_t steps) {
    Unpacker u{&w, w.rows + c * w.chunk_bytes, a[c & 1], std::min(kBf16ChunkK, k - c * kBf16ChunkK), 0, w.nr,
               (w.nr + steps - 1) / steps, stage};
    if (c >= chunks) u.nr = 0;
    return u;
  };
  // The stored rows of chunk c into L1 ahead of their unpacking: each row's piece is a few
  // lines at a new place, which the hardware prefetchers do not guess.
  auto prefetch_chunk = [&](int64_t c) {
    if (c >= chunks) return;
    const char* src = reinterpret_cast<const char*>(w.rows + c * w.chunk_bytes);
    for (int64_t r = 0; r < w.nr; ++r, src += w.row_bytes) {
      for (size_t off = 0; off < w.chunk_bytes + 63; off += 64) _mm_prefetch(src + off, _MM_HINT_T0);
    }
  };
  const int64_t steps = (n + 31) / 32 * (k / 32);
  const int64_t lines = static_cast<int64_t>(w.next_bytes / 64);
  const auto* next = reinterpret_cast<const char*>(w.next);
  Prefetcher pf{next, next + w.next_bytes, static_cast<int>((lines + steps - 1) / steps)};
  configure_tiles();
  for (int64_t t0 = 0; t0 < n; t0 += kPassTokens) {
    const int64_t t_end = std::min(n, t0 + kPassTokens);
    const int64_t pair_steps = (t_end - t0 + 31) / 32 * (kBf16ChunkK / 32);
    Unpacker first = unpacker(0, 1);
    first.finish();
    prefetch_chunk(1);
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t i0 = c * kBf16ChunkK, i1 = std::min(k, i0 + kBf16ChunkK);
      prefetch_chunk(c + 2);
      Unpacker up = unpacker(c + 1, pair_steps);
      const Pass p{reinterpret_cast<const char*>(a[c & 1]), xp, w.nr, n, k, y, ldy};
      for (int64_t t = t0; t < t_end; t += 32) {
        float* pk = park[(t - t0) / 32];
        const bool tok2 = t + 16 < n;
        if (w.nr > 16) {
          if (tok2) pair_chunk<true, true>(p, t, i0, i1, pk, pf, up);
          else pair_chunk<true, false>(p, t, i0, i1, pk, pf, up);
        } else {
          if (tok2) pair_chunk<false, true>(p, t, i0, i1, pk, pf, up);
          else pair_chunk<false, false>(p, t, i0, i1, pk, pf, up);
        }
      }
      up.finish();
    }
  }
  _tile_release();  // frees the tile state so context switches stay cheap
}

}  // namespace ll3::kernels::amx
