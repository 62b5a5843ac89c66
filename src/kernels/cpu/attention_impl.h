// Grouped-query attention for one token and one KV head (kernels/attention.h) over a vector
// type of vec_f32.h; the AVX2 and AVX-512 files instantiate it. Scores: each K row is
// converted once and multiplied with all G query heads. Weighted sum: each V row is converted
// once and accumulated into all G heads' outputs, held in registers over the positions; the
// softmax normalization is applied once at the end. hd must be a multiple of V::kWidth.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/cpu/activations_impl.h"
#include "kernels/cpu/vec_f32.h"

namespace ll3::kernels {

namespace attention_detail {

// Head dimensions up to this take the tiled score path (a tile of kWidth rows on the stack).
constexpr int64_t kMaxTileHeadDim = 256;

// Prefetches block b's rows of this head (hd elements of type E each): one head's slice of each
// slot is too short and too far from the next for the hardware prefetchers. Decode at 1024
// cached tokens, 1B Q4_K_M: 34.4 -> 36.2 t/s.
template <class E>
inline void prefetch_block_rows(const KvHeadView& kv, const E* data, int64_t hd, int64_t b) {
  const E* rows = data + kv.block_table[b] * kv.block_size * kv.slot_stride;
  for (int64_t j = 0; j < kv.block_size; ++j) {
    const char* row = reinterpret_cast<const char*>(rows + j * kv.slot_stride);
    for (size_t off = 0; off < hd * sizeof(E); off += 64) _mm_prefetch(row + off, _MM_HINT_T0);
  }
}

// Calls fn(p, row element offset) for positions 0 .. n-1, walking the block table and
// prefetching the next block's rows when a block starts.
template <class E, class F>
inline void for_rows(const KvHeadView& kv, const void* data, int64_t hd, int64_t n, F&& fn) {
  const int64_t n_blocks = (n + kv.block_size - 1) / kv.block_size;
  for (int64_t b = 0; b < n_blocks; ++b) {
    if (b + 1 < n_blocks) prefetch_block_rows<E>(kv, static_cast<const E*>(data), hd, b + 1);
    const int64_t p0 = b * kv.block_size;
    const int64_t base = kv.block_table[b] * kv.block_size * kv.slot_stride;
    const int64_t slots = std::min(kv.block_size, n - p0);
    for (int64_t j = 0; j < slots; ++j) fn(p0 + j, base + j * kv.slot_stride);
  }
}

// s[h * n + p] = scale * q[h] . K_p for G heads. Whole tiles of kWidth positions inside a block
// are converted once into a float tile, and each head's kWidth dot products are reduced
// together (V::transpose_reduce) instead of one horizontal sum per position and head; the
// rest goes position by position.
template <class V, class E, int G>
void scores(const float* q, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* s) {
  constexpr int W = V::kWidth;
  const E* k = static_cast<const E*>(kv.k);
  alignas(64) float tile[W * kMaxTileHeadDim];
  const bool tiles = hd <= kMaxTileHeadDim;
  const int64_t n_blocks = (n + kv.block_size - 1) / kv.block_size;
  for (int64_t b = 0; b < n_blocks; ++b) {
    if (b + 1 < n_blocks) prefetch_block_rows<E>(kv, k, hd, b + 1);
    const int64_t p0 = b * kv.block_size;
    const E* rows = k + kv.block_table[b] * kv.block_size * kv.slot_stride;
    const int64_t slots = std::min(kv.block_size, n - p0);
    int64_t j = 0;
    for (; tiles && j + W <= slots; j += W) {
      for (int p = 0; p < W; ++p) {
        for (int64_t c = 0; c < hd; c += W) V::store(tile + p * hd + c, V::load(rows + (j + p) * kv.slot_stride + c));
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
      const E* row = rows + j * kv.slot_stride;
      typename V::T acc[G];
      for (int h = 0; h < G; ++h) acc[h] = V::zero();
      for (int64_t c = 0; c < hd; c += V::kWidth) {
        const typename V::T kc = V::load(row + c);
        for (int h = 0; h < G; ++h) acc[h] = V::fmadd(V::load(q + h * hd + c), kc, acc[h]);
      }
      for (int h = 0; h < G; ++h) s[h * n + p0 + j] = V::reduce_add(acc[h]) * scale;
    }
  }
}

// out[h][c0 .. c0 + C vectors) = sum_p w[h * n + p] V_p[c0 ..] for G heads.
template <class V, class E, int G, int C>
void weighted_sum(const float* w, int64_t hd, const KvHeadView& kv, int64_t n, int64_t c0, float* out) {
  const E* v = static_cast<const E*>(kv.v);
  typename V::T acc[G][C];
  for (int h = 0; h < G; ++h) {
    for (int i = 0; i < C; ++i) acc[h][i] = V::zero();
  }
  for_rows<E>(kv, kv.v, hd, n, [&](int64_t p, int64_t r) {
    typename V::T vc[C];
    for (int i = 0; i < C; ++i) vc[i] = V::load(v + r + c0 + V::kWidth * i);
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
template <class V, class E, int G, int C = max_vectors_per_pass<V, G>()>
void weighted_sum_all(const float* w, int64_t hd, const KvHeadView& kv, int64_t n, float* out) {
  const int64_t vecs = hd / V::kWidth;
  if constexpr (C > 1) {
    if (vecs % C != 0) return weighted_sum_all<V, E, G, C / 2>(w, hd, kv, n, out);
  }
  for (int64_t c = 0; c < vecs; c += C) weighted_sum<V, E, G, C>(w, hd, kv, n, V::kWidth * c, out);
}

template <class V, class E, int G>
void attend_group(const float* q, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* s, float* out) {
  scores<V, E, G>(q, hd, kv, n, scale, s);
  float inv[G];
  for (int h = 0; h < G; ++h) {
    float* sh = s + h * n;
    const float max = *std::max_element(sh, sh + n);
    inv[h] = static_cast<float>(1.0 / exp_sub_impl<V>(sh, n, max));
  }
  weighted_sum_all<V, E, G>(s, hd, kv, n, out);
  for (int h = 0; h < G; ++h) {
    for (int64_t c = 0; c < hd; c += V::kWidth) {
      V::store(out + h * hd + c, V::mul(V::set1(inv[h]), V::load(out + h * hd + c)));
    }
  }
}

template <class V, class E>
void attend_heads(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* s,
                  float* out) {
  // Up to 4 heads per pass (registers); more (e.g. 8 per KV head) in several passes.
  for (int h0 = 0; h0 < G; h0 += 4) {
    const float* qh = q + h0 * hd;
    float* oh = out + h0 * hd;
    float* sh = s + h0 * n;
    switch (std::min(4, G - h0)) {
      case 1: attend_group<V, E, 1>(qh, hd, kv, n, scale, sh, oh); break;
      case 2: attend_group<V, E, 2>(qh, hd, kv, n, scale, sh, oh); break;
      case 3: attend_group<V, E, 3>(qh, hd, kv, n, scale, sh, oh); break;
      default: attend_group<V, E, 4>(qh, hd, kv, n, scale, sh, oh); break;
    }
  }
}

}  // namespace attention_detail

template <class V>
void attend_impl(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* scores,
                 float* out) {
  if (kv.type == DType::F16) {
    attention_detail::attend_heads<V, uint16_t>(q, G, hd, kv, n, scale, scores, out);
  } else {
    attention_detail::attend_heads<V, float>(q, G, hd, kv, n, scale, scores, out);
  }
}

}  // namespace ll3::kernels
