// Grouped-query attention for one token and one KV head (kernels/attention.h) over a vector
// type of vec_f32.h; the AVX2 and AVX-512 files instantiate it. Scores: each K row is
// converted once and multiplied with all G query heads. Weighted sum: each V row is converted
// once and accumulated into all G heads' outputs, held in registers over the positions; the
// softmax normalization is applied once at the end. hd must be a multiple of V::kWidth (and of
// 32 for Q8_0). The cache type only changes how a vector of a row is loaded (the Rows types).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/cpu/activations_impl.h"
#include "kernels/cpu/vec_f32.h"
#include "kernels/quant_blocks.h"

namespace ll3::kernels {

namespace attention_detail {

// Head dimensions up to this take the tiled score path (a tile of kWidth rows on the stack).
constexpr int64_t kMaxTileHeadDim = 256;

// How a head's row slice of each cache type is read: load(row, c) = elements c .. c + kWidth
// as floats; load_run<C>(row, c0, out) = C such vectors from c0 (a multiple of C * kWidth);
// to_floats(row, hd, dst) = the whole slice; bytes(hd) = the slice's size; kLineAligned: the
// slices start on cache lines (the cache's storage is line-aligned; float slices of 64-byte
// multiples then are).
template <class V, class E>
struct FloatRows {
  using T = typename V::T;
  static constexpr bool kLineAligned = true;
  static T load(const uint8_t* row, int64_t c) { return V::load(reinterpret_cast<const E*>(row) + c); }
  template <int C>
  static void load_run(const uint8_t* row, int64_t c0, T* out) {
    for (int i = 0; i < C; ++i) out[i] = load(row, c0 + V::kWidth * i);
  }
  static void to_floats(const uint8_t* row, int64_t hd, float* dst) {
    for (int64_t c = 0; c < hd; c += V::kWidth) V::store(dst + c, load(row, c));
  }
  static size_t bytes(int64_t hd) { return static_cast<size_t>(hd) * sizeof(E); }
};
template <class V>
using F32Rows = FloatRows<V, float>;
template <class V>
using F16Rows = FloatRows<V, uint16_t>;  // V::load(const uint16_t*) converts from F16

// Q8_0: x = q * d in registers, a vector never straddling a block (kWidth divides 32); one
// rounding, as the reference dequantizes, so the float arithmetic after it sees equal values.
// Runs and whole slices convert each block's scale once for its 32 / kWidth vectors.
template <class V>
struct Q8Rows {
  using T = typename V::T;
  using Block = quant::BlockQ8_0;
  static constexpr int kPerBlock = quant::kQK / V::kWidth;  // vectors per block
  static constexpr bool kLineAligned = false;
  static const Block* block(const uint8_t* row, int64_t c) {
    return reinterpret_cast<const Block*>(row) + static_cast<size_t>(c) / quant::kQK;
  }
  static T scale(const Block* b) { return V::set1(_cvtsh_ss(b->d)); }
  static T load(const uint8_t* row, int64_t c) {
    const Block* b = block(row, c);
    return V::mul(V::load_i8(b->qs + static_cast<size_t>(c) % quant::kQK), scale(b));
  }
  template <int C>
  static void load_run(const uint8_t* row, int64_t c0, T* out) {
    if constexpr (C % kPerBlock == 0) {  // c0 is then a multiple of 32: whole blocks
      const Block* b = block(row, c0);
      for (int j = 0; j < C / kPerBlock; ++j) {
        const T d = scale(b + j);
        for (int i = 0; i < kPerBlock; ++i) out[j * kPerBlock + i] = V::mul(V::load_i8(b[j].qs + V::kWidth * i), d);
      }
    } else {
      for (int i = 0; i < C; ++i) out[i] = load(row, c0 + V::kWidth * i);
    }
  }
  static void to_floats(const uint8_t* row, int64_t hd, float* dst) {
    const Block* b = block(row, 0);
    for (int64_t j = 0; j < hd / quant::kQK; ++j) {
      const T d = scale(b + j);
      for (int i = 0; i < kPerBlock; ++i) {
        V::store(dst + j * quant::kQK + V::kWidth * i, V::mul(V::load_i8(b[j].qs + V::kWidth * i), d));
      }
    }
  }
  static size_t bytes(int64_t hd) { return static_cast<size_t>(hd / quant::kQK) * sizeof(Block); }
};

// Byte offset of block b's first slot (of the block table's b-th block) from the view's k / v.
inline size_t block_offset(const KvHeadView& kv, int64_t b) {
  return static_cast<size_t>(kv.block_table[b]) * static_cast<size_t>(kv.block_size) * kv.slot_bytes;
}

// Prefetches block b's rows of this head: one head's slice of each slot is too short and too far
// from the next for the hardware prefetchers. Decode at 1024 cached tokens, 1B Q4_K_M: 34.4 ->
// 36.2 t/s. A Q8_0 slice (34-byte blocks) need not start on a line, so its last byte is
// prefetched too: no line of it is then skipped.
template <class R>
inline void prefetch_block_rows(const KvHeadView& kv, const uint8_t* data, int64_t hd, int64_t b) {
  const uint8_t* rows = data + block_offset(kv, b);
  const size_t bytes = R::bytes(hd);
  for (int64_t j = 0; j < kv.block_size; ++j) {
    const char* row = reinterpret_cast<const char*>(rows + j * kv.slot_bytes);
    for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(row + off, _MM_HINT_T0);
    if constexpr (!R::kLineAligned) _mm_prefetch(row + bytes - 1, _MM_HINT_T0);
  }
}

// Calls fn(p, row slice of p) for positions 0 .. n-1, walking the block table and prefetching
// the next block's rows when a block starts.
template <class R, class F>
inline void for_rows(const KvHeadView& kv, const void* data, int64_t hd, int64_t n, F&& fn) {
  const uint8_t* base = static_cast<const uint8_t*>(data);
  const int64_t n_blocks = (n + kv.block_size - 1) / kv.block_size;
  for (int64_t b = 0; b < n_blocks; ++b) {
    if (b + 1 < n_blocks) prefetch_block_rows<R>(kv, base, hd, b + 1);
    const int64_t p0 = b * kv.block_size;
    const uint8_t* rows = base + block_offset(kv, b);
    const int64_t slots = std::min(kv.block_size, n - p0);
    for (int64_t j = 0; j < slots; ++j) fn(p0 + j, rows + j * kv.slot_bytes);
  }
}

// s[h * n + p] = scale * q[h] . K_p for G heads. Whole tiles of kWidth positions inside a block
// are converted once into a float tile, and each head's kWidth dot products are reduced
// together (V::transpose_reduce) instead of one horizontal sum per position and head; the
// rest goes position by position.
template <class V, class R, int G>
void scores(const float* q, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* s) {
  constexpr int W = V::kWidth;
  const uint8_t* k = static_cast<const uint8_t*>(kv.k);
  alignas(64) float tile[W * kMaxTileHeadDim];
  const bool tiles = hd <= kMaxTileHeadDim;
  const int64_t n_blocks = (n + kv.block_size - 1) / kv.block_size;
  for (int64_t b = 0; b < n_blocks; ++b) {
    if (b + 1 < n_blocks) prefetch_block_rows<R>(kv, k, hd, b + 1);
    const int64_t p0 = b * kv.block_size;
    const uint8_t* rows = k + block_offset(kv, b);
    const int64_t slots = std::min(kv.block_size, n - p0);
    int64_t j = 0;
    for (; tiles && j + W <= slots; j += W) {
      for (int p = 0; p < W; ++p) {
        R::to_floats(rows + (j + p) * kv.slot_bytes, hd, tile + p * hd);
      }
      for (int h = 0; h < G; ++h) {
        typename V::T acc[W];
        for (int p = 0; p < W; ++p) acc[p] = V::zero();
        for (int64_t c = 0; c < hd; c += W) {
          const typename V::T qc = V::load(q + h * hd + c);
          for (int p = 0; p < W; ++p) acc[p] = V::fmadd(qc, V::load(tile + p * hd + c), acc[p]);
        }
        V::store(s + h * n + p0 + j, V::mul(V::transpose_reduce(acc), V::set1(scale)));
      }
    }
    for (; j < slots; ++j) {
      const uint8_t* row = rows + j * kv.slot_bytes;
      typename V::T acc[G];
      for (int h = 0; h < G; ++h) acc[h] = V::zero();
      for (int64_t c = 0; c < hd; c += V::kWidth) {
        const typename V::T kc = R::load(row, c);
        for (int h = 0; h < G; ++h) acc[h] = V::fmadd(V::load(q + h * hd + c), kc, acc[h]);
      }
      for (int h = 0; h < G; ++h) s[h * n + p0 + j] = V::reduce_add(acc[h]) * scale;
    }
  }
}

// out[h][c0 .. c0 + C vectors) = sum_p w[h * n + p] V_p[c0 ..] for G heads.
template <class V, class R, int G, int C>
void weighted_sum(const float* w, int64_t hd, const KvHeadView& kv, int64_t n, int64_t c0, float* out) {
  typename V::T acc[G][C];
  for (int h = 0; h < G; ++h) {
    for (int i = 0; i < C; ++i) acc[h][i] = V::zero();
  }
  for_rows<R>(kv, kv.v, hd, n, [&](int64_t p, const uint8_t* row) {
    typename V::T vc[C];
    R::template load_run<C>(row, c0, vc);
    for (int h = 0; h < G; ++h) {
      const typename V::T wp = V::set1(w[h * n + p]);
      for (int i = 0; i < C; ++i) acc[h][i] = V::fmadd(wp, vc[i], acc[h][i]);
    }
  });
  for (int h = 0; h < G; ++h) {
    for (int i = 0; i < C; ++i) V::store(out + h * hd + c0 + V::kWidth * i, acc[h][i]);
  }
}

// The largest power of two C <= 8 with G * C accumulators in half the register file (16 of
// the 32 zmm, 8 of the 16 ymm).
template <class V, int G>
constexpr int max_vectors_per_pass() {
  int c = 8;
  while (c > 1 && G * c > V::kWidth) c /= 2;
  return c;
}

// All hd / kWidth vectors of the heads' outputs, C at a time: C the largest power of two up to
// max_vectors_per_pass that divides the count.
template <class V, class R, int G, int C = max_vectors_per_pass<V, G>()>
void weighted_sum_all(const float* w, int64_t hd, const KvHeadView& kv, int64_t n, float* out) {
  const int64_t vecs = hd / V::kWidth;
  if constexpr (C > 1) {
    if (vecs % C != 0) return weighted_sum_all<V, R, G, C / 2>(w, hd, kv, n, out);
  }
  for (int64_t c = 0; c < vecs; c += C) weighted_sum<V, R, G, C>(w, hd, kv, n, V::kWidth * c, out);
}

template <class V, class R, int G>
void attend_group(const float* q, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* s, float* out) {
  scores<V, R, G>(q, hd, kv, n, scale, s);
  float inv[G];
  for (int h = 0; h < G; ++h) {
    float* sh = s + h * n;
    const float max = *std::max_element(sh, sh + n);
    inv[h] = static_cast<float>(1.0 / exp_sub_impl<V>(sh, n, max));
  }
  weighted_sum_all<V, R, G>(s, hd, kv, n, out);
  for (int h = 0; h < G; ++h) {
    for (int64_t c = 0; c < hd; c += V::kWidth) {
      V::store(out + h * hd + c, V::mul(V::set1(inv[h]), V::load(out + h * hd + c)));
    }
  }
}

template <class V, class R>
void attend_heads(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* s,
                  float* out) {
  // Up to 4 heads per pass (registers); more (e.g. 8 per KV head) in several passes.
  for (int h0 = 0; h0 < G; h0 += 4) {
    const float* qh = q + h0 * hd;
    float* oh = out + h0 * hd;
    float* sh = s + h0 * n;
    switch (std::min(4, G - h0)) {
      case 1: attend_group<V, R, 1>(qh, hd, kv, n, scale, sh, oh); break;
      case 2: attend_group<V, R, 2>(qh, hd, kv, n, scale, sh, oh); break;
      case 3: attend_group<V, R, 3>(qh, hd, kv, n, scale, sh, oh); break;
      default: attend_group<V, R, 4>(qh, hd, kv, n, scale, sh, oh); break;
    }
  }
}

}  // namespace attention_detail

template <class V>
void attend_impl(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* scores,
                 float* out) {
  using namespace attention_detail;
  switch (kv.type) {
    case DType::F16: return attend_heads<V, F16Rows<V>>(q, G, hd, kv, n, scale, scores, out);
    case DType::Q8_0: return attend_heads<V, Q8Rows<V>>(q, G, hd, kv, n, scale, scores, out);
    default: return attend_heads<V, F32Rows<V>>(q, G, hd, kv, n, scale, scores, out);
  }
}

}  // namespace ll3::kernels
