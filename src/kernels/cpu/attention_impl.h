// Grouped-query attention of a run of consecutive tokens and one KV head (kernels/attention.h)
// over a vector type of vec_f32.h; the AVX2 and AVX-512 files instantiate it. Scores: each K
// row is converted once and multiplied with all G query heads of every token of the run.
// Weighted sum: each V row is converted once and accumulated into all G heads' outputs of
// every token, held in registers over a tile of positions; the softmax normalization is
// applied once at the end. A prompt chunk's tokens then read K and V once instead of once
// each (bench/attention_bench, Zen 5, 4,096 positions, the 1B's heads: 58 M positions/s a
// token alone, 98 M in runs of 16). hd must be a multiple of V::kWidth (and of 32 for Q8_0).
// The cache type only changes how a vector of a row is loaded (the Rows types). Positions go in
// chunks (kernels/attention.h): each chunk's partial is merged into the running result in
// chunk order by merge_partial, the one merge the threads' split (attend_combine) uses too.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
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

// Q4_0: x = (q - 8) * d, q a nibble (element j of a block in the low half of byte j, element
// 16 + j in the high half); each block's 16 bytes unpacked once into 32 signed bytes, then read
// as Q8_0's are (the same single rounding as the reference).
template <class V>
struct Q4Rows {
  using T = typename V::T;
  using Block = quant::BlockQ4_0;
  static constexpr int kPerBlock = quant::kQK / V::kWidth;
  static constexpr bool kLineAligned = false;
  static const Block* block(const uint8_t* row, int64_t c) {
    return reinterpret_cast<const Block*>(row) + static_cast<size_t>(c) / quant::kQK;
  }
  static void unpack(const Block* b, int8_t* q) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs));
    const __m128i low = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm_sub_epi8(_mm_and_si128(x, low), eight));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16),
                     _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(x, 4), low), eight));
  }
  static T scale(const Block* b) { return V::set1(_cvtsh_ss(b->d)); }
  static T load(const uint8_t* row, int64_t c) {
    const Block* b = block(row, c);
    alignas(16) int8_t q[quant::kQK];
    unpack(b, q);
    return V::mul(V::load_i8(q + static_cast<size_t>(c) % quant::kQK), scale(b));
  }
  template <int C>
  static void load_run(const uint8_t* row, int64_t c0, T* out) {
    if constexpr (C % kPerBlock == 0) {  // c0 is then a multiple of 32: whole blocks
      const Block* b = block(row, c0);
      alignas(16) int8_t q[quant::kQK];
      for (int j = 0; j < C / kPerBlock; ++j) {
        unpack(b + j, q);
        const T d = scale(b + j);
        for (int i = 0; i < kPerBlock; ++i) out[j * kPerBlock + i] = V::mul(V::load_i8(q + V::kWidth * i), d);
      }
    } else {
      for (int i = 0; i < C; ++i) out[i] = load(row, c0 + V::kWidth * i);
    }
  }
  static void to_floats(const uint8_t* row, int64_t hd, float* dst) {
    const Block* b = block(row, 0);
    alignas(16) int8_t q[quant::kQK];
    for (int64_t j = 0; j < hd / quant::kQK; ++j) {
      unpack(b + j, q);
      const T d = scale(b + j);
      for (int i = 0; i < kPerBlock; ++i) V::store(dst + j * quant::kQK + V::kWidth * i, V::mul(V::load_i8(q + V::kWidth * i), d));
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

// A run of m consecutive query tokens of one sequence and G of their heads, over one chunk of
// positions [p_begin, p_begin + chunk): token i attends over n(i) = n0 + i positions in all,
// those of the chunk below end(i); its queries are at q + i * q_stride, its output at out + i *
// out_stride, and head h's scores at s + i * s_stride + h * chunk, indexed from p_begin (h
// counted from the run's first head h0, which q and out already point at).
struct Run {
  const float* q;
  float* out;
  int64_t q_stride;
  int64_t out_stride;
  float* s;
  int64_t s_stride;
  int h0;
  int64_t n0;
  int m;
  int64_t p_begin;
  int64_t chunk;
  int64_t n(int i) const { return n0 + i; }
  int64_t end(int i) const { return std::min(n(i), p_begin + chunk); }
  int64_t count(int i) const { return end(i) - p_begin; }  // <= 0: none in this chunk
  float* scores(int i, int h) const { return s + i * s_stride + (h0 + h) * chunk; }
  int64_t first_block(const KvHeadView& kv) const { return p_begin / kv.block_size; }
  int64_t end_block(const KvHeadView& kv) const { return (end(m - 1) + kv.block_size - 1) / kv.block_size; }
};

// Positions of block b (starting at p0) that token i of r attends to in its chunk.
inline int64_t slots_of(const Run& r, int i, const KvHeadView& kv, int64_t p0) {
  return std::min(kv.block_size, r.end(i) - p0);
}

// scores(i, h)[p] = scale * q_i[h] . K_p for the run's G heads. Inside a block, each tile of
// kWidth positions is converted once into a float tile for all the tokens; a token whose
// positions cover the whole tile reduces its kWidth dot products together
// (V::transpose_reduce), and its positions short of a whole tile go one by one. Which path a
// position takes depends only on the token's own length, so a token gets the same bits in any
// run as alone.
template <class V, class R, int G>
void scores(const Run& r, int64_t hd, const KvHeadView& kv, float scale) {
  constexpr int W = V::kWidth;
  const uint8_t* k = static_cast<const uint8_t*>(kv.k);
  alignas(64) float tile[W * kMaxTileHeadDim];
  const bool tiles = hd <= kMaxTileHeadDim;
  const int64_t b_end = r.end_block(kv);
  for (int64_t b = r.first_block(kv); b < b_end; ++b) {
    if (b + 1 < b_end) prefetch_block_rows<R>(kv, k, hd, b + 1);
    const int64_t p0 = b * kv.block_size, s0 = p0 - r.p_begin;
    const uint8_t* rows = k + block_offset(kv, b);
    const int64_t slots_last = slots_of(r, r.m - 1, kv, p0);
    for (int64_t j = 0; j < slots_last; j += W) {
      if (tiles && j + W <= slots_last) {
        for (int p = 0; p < W; ++p) R::to_floats(rows + (j + p) * kv.slot_bytes, hd, tile + p * hd);
      }
      for (int i = 0; i < r.m; ++i) {
        const int64_t slots = slots_of(r, i, kv, p0);
        if (j >= slots) continue;
        const float* q = r.q + i * r.q_stride;
        if (tiles && j + W <= slots) {
          for (int h = 0; h < G; ++h) {
            typename V::T acc[W];
            for (int p = 0; p < W; ++p) acc[p] = V::zero();
            for (int64_t c = 0; c < hd; c += W) {
              const typename V::T qc = V::load(q + h * hd + c);
              for (int p = 0; p < W; ++p) acc[p] = V::fmadd(qc, V::load(tile + p * hd + c), acc[p]);
            }
            V::store(r.scores(i, h) + s0 + j, V::mul(V::transpose_reduce(acc), V::set1(scale)));
          }
          continue;
        }
        for (int64_t p = j; p < std::min(j + W, slots); ++p) {
          const uint8_t* row = rows + p * kv.slot_bytes;
          typename V::T acc[G];
          for (int h = 0; h < G; ++h) acc[h] = V::zero();
          for (int64_t c = 0; c < hd; c += W) {
            const typename V::T kc = R::load(row, c);
            for (int h = 0; h < G; ++h) acc[h] = V::fmadd(V::load(q + h * hd + c), kc, acc[h]);
          }
          for (int h = 0; h < G; ++h) r.scores(i, h)[s0 + p] = V::reduce_add(acc[h]) * scale;
        }
      }
    }
  }
}

// out_i[h][c0 .. c0 + C vectors) = sum_p w_i[h][p] V_p[c0 ..] for the run's tokens and G heads,
// p over the chunk.
// V rows are converted kWidth at a time for all the tokens; each token's sums run over its
// positions in order and wait in out between tiles (a float store and load: exact), so a token
// gets the same bits in any run as alone.
template <class V, class R, int G, int C>
void weighted_sum(const Run& r, int64_t hd, const KvHeadView& kv, int64_t c0) {
  constexpr int W = V::kWidth;
  using T = typename V::T;
  const uint8_t* v = static_cast<const uint8_t*>(kv.v);
  const int64_t b_end = r.end_block(kv);
  T vt[W][C];
  for (int64_t b = r.first_block(kv); b < b_end; ++b) {
    if (b + 1 < b_end) prefetch_block_rows<R>(kv, v, hd, b + 1);
    const int64_t p0 = b * kv.block_size, s0 = p0 - r.p_begin;
    const uint8_t* rows = v + block_offset(kv, b);
    const int64_t slots_last = slots_of(r, r.m - 1, kv, p0);
    for (int64_t j = 0; j < slots_last; j += W) {
      const int64_t cnt = std::min<int64_t>(W, slots_last - j);
      for (int64_t p = 0; p < cnt; ++p) R::template load_run<C>(rows + (j + p) * kv.slot_bytes, c0, vt[p]);
      for (int i = 0; i < r.m; ++i) {
        const int64_t e = std::min(j + W, slots_of(r, i, kv, p0)) - j;
        if (e <= 0) continue;
        float* out = r.out + i * r.out_stride + c0;
        T acc[G][C];
        for (int h = 0; h < G; ++h) {
          for (int c = 0; c < C; ++c) acc[h][c] = s0 + j == 0 ? V::zero() : V::load(out + h * hd + V::kWidth * c);
        }
        for (int64_t p = 0; p < e; ++p) {
          for (int h = 0; h < G; ++h) {
            const T wp = V::set1(r.scores(i, h)[s0 + j + p]);
            for (int c = 0; c < C; ++c) acc[h][c] = V::fmadd(wp, vt[p][c], acc[h][c]);
          }
        }
        for (int h = 0; h < G; ++h) {
          for (int c = 0; c < C; ++c) V::store(out + h * hd + V::kWidth * c, acc[h][c]);
        }
      }
    }
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
void weighted_sum_all(const Run& r, int64_t hd, const KvHeadView& kv) {
  const int64_t vecs = hd / V::kWidth;
  if constexpr (C > 1) {
    if (vecs % C != 0) return weighted_sum_all<V, R, G, C / 2>(r, hd, kv);
  }
  for (int64_t c = 0; c < vecs; c += C) weighted_sum<V, R, G, C>(r, hd, kv, V::kWidth * c);
}

// The largest of n floats (n >= 1), a vector at a time: exact in any order, so the same as a
// scalar loop (which, over a chunk's scores per head, was a chain of dependent compares).
template <class V>
float max_of(const float* x, int64_t n) {
  float m = x[0];
  int64_t i = 0;
  if (n >= V::kWidth) {
    typename V::T v = V::load(x);
    for (i = V::kWidth; i + V::kWidth <= n; i += V::kWidth) v = V::max(v, V::load(x + i));
    alignas(64) float lanes[V::kWidth];
    V::store(lanes, v);
    m = *std::max_element(lanes, lanes + V::kWidth);
  }
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

// Head h of token i of a run's partial: out at out + i * out_stride + h * hd, the max and sum
// at [i * stat_stride + h].
struct Partials {
  float* out;
  int64_t out_stride;
  float* max;
  double* sum;
  int64_t stat_stride;
};

// The run's chunk as a partial (its scores, their maxima, exp and sums, the weighted sum).
template <class V, class R, int G>
void chunk_partial(const Run& r, int64_t hd, const KvHeadView& kv, float scale, const Partials& p) {
  scores<V, R, G>(r, hd, kv, scale);
  for (int i = 0; i < r.m; ++i) {
    for (int h = 0; h < G; ++h) {
      float* sh = r.scores(i, h);
      const int64_t n = r.count(i);
      float& max = p.max[i * p.stat_stride + h];
      double& sum = p.sum[i * p.stat_stride + h];
      if (n <= 0) {  // no position here: the merge skips it
        max = -INFINITY;
        sum = 0.0;
        std::fill_n(p.out + i * p.out_stride + h * hd, hd, 0.0f);
        continue;
      }
      max = max_of<V>(sh, n);
      sum = exp_sub_impl<V>(sh, n, max);
    }
  }
  weighted_sum_all<V, R, G>(r, hd, kv);
}

// (out, max, sum) of one head = its merge with a later chunk's (o, m, l): the partial sums
// rescaled to the larger max. The same arithmetic, in the same chunk order, on one thread or
// after the threads' split.
template <class V>
void merge_partial(float* out, float& max, double& sum, const float* o, float m, double l, int64_t hd) {
  if (l == 0.0) return;
  const float top = std::max(max, m);
  const float a = std::exp(max - top), b = std::exp(m - top);
  const typename V::T va = V::set1(a), vb = V::set1(b);
  for (int64_t c = 0; c < hd; c += V::kWidth) {
    V::store(out + c, V::fmadd(V::load(out + c), va, V::mul(V::load(o + c), vb)));
  }
  sum = sum * a + l * b;
  max = top;
}

template <class V>
void normalize(float* out, double sum, int64_t hd) {
  const typename V::T inv = V::set1(static_cast<float>(1.0 / sum));
  for (int64_t c = 0; c < hd; c += V::kWidth) V::store(out + c, V::mul(inv, V::load(out + c)));
}

// All of the run's chunks, one after another: the first into out, each later one into tmp
// ((m, G, hd) floats) and merged.
template <class V, class R, int G>
void attend_group(Run r, int64_t hd, const KvHeadView& kv, float scale, float* tmp) {
  float max[kMaxAttendRows][G], tmax[kMaxAttendRows][G];
  double sum[kMaxAttendRows][G], tsum[kMaxAttendRows][G];
  const int64_t chunks = (r.n(r.m - 1) + r.chunk - 1) / r.chunk;
  chunk_partial<V, R, G>(r, hd, kv, scale, {r.out, r.out_stride, &max[0][0], &sum[0][0], G});
  Run t = r;
  t.out = tmp;
  t.out_stride = G * hd;
  for (int64_t c = 1; c < chunks; ++c) {
    t.p_begin = c * r.chunk;
    chunk_partial<V, R, G>(t, hd, kv, scale, {tmp, G * hd, &tmax[0][0], &tsum[0][0], G});
    for (int i = 0; i < r.m; ++i) {
      for (int h = 0; h < G; ++h) {
        merge_partial<V>(r.out + i * r.out_stride + h * hd, max[i][h], sum[i][h], tmp + (i * G + h) * hd, tmax[i][h],
                         tsum[i][h], hd);
      }
    }
  }
  for (int i = 0; i < r.m; ++i) {
    for (int h = 0; h < G; ++h) normalize<V>(r.out + i * r.out_stride + h * hd, sum[i][h], hd);
  }
}

// With a partial, the run's chunk (r.p_begin) alone into it; without, all its chunks into r.out.
template <class V, class R, int G>
void heads(const Run& r, int64_t hd, const KvHeadView& kv, float scale, float* tmp, const Partials* p) {
  if (p != nullptr) {
    chunk_partial<V, R, G>(r, hd, kv, scale, *p);
  } else {
    attend_group<V, R, G>(r, hd, kv, scale, tmp);
  }
}

// Up to 4 heads per pass (registers); more (e.g. 8 per KV head) in several passes.
template <class V, class R>
void attend_heads(Run r, int G, int64_t hd, const KvHeadView& kv, float scale, float* tmp, const AttendPartial* part) {
  const float* q = r.q;
  float* out = r.out;
  for (int h0 = 0; h0 < G; h0 += 4) {
    r.q = q + h0 * hd;
    r.out = out + h0 * hd;
    r.h0 = h0;
    Partials p{};
    if (part != nullptr) p = {part->out + h0 * hd, G * hd, part->max + h0, part->sum + h0, G};
    const Partials* pp = part != nullptr ? &p : nullptr;
    switch (std::min(4, G - h0)) {
      case 1: heads<V, R, 1>(r, hd, kv, scale, tmp, pp); break;
      case 2: heads<V, R, 2>(r, hd, kv, scale, tmp, pp); break;
      case 3: heads<V, R, 3>(r, hd, kv, scale, tmp, pp); break;
      default: heads<V, R, 4>(r, hd, kv, scale, tmp, pp); break;
    }
  }
}

// A run of up to kMaxAttendRows tokens: its scores at the front of scratch, tmp after them.
template <class V>
void attend_run(Run r, int G, int64_t hd, const KvHeadView& kv, float scale, float* scratch,
                const AttendPartial* part) {
  r.s = scratch;
  r.s_stride = G * r.chunk;
  r.h0 = 0;
  float* tmp = scratch + int64_t{kMaxAttendRows} * G * r.chunk;
  switch (kv.type) {
    case DType::F16: attend_heads<V, F16Rows<V>>(r, G, hd, kv, scale, tmp, part); break;
    case DType::Q8_0: attend_heads<V, Q8Rows<V>>(r, G, hd, kv, scale, tmp, part); break;
    case DType::Q4_0: attend_heads<V, Q4Rows<V>>(r, G, hd, kv, scale, tmp, part); break;
    default: attend_heads<V, F32Rows<V>>(r, G, hd, kv, scale, tmp, part); break;
  }
}

inline Run make_run(const float* q, int64_t q_stride, int m, int64_t n, float* out, int64_t out_stride,
                    const KvHeadView& kv) {
  Run r{};
  r.q = q;
  r.q_stride = q_stride;
  r.m = m;
  r.n0 = n;
  r.out = out;
  r.out_stride = out_stride;
  r.chunk = attend_chunk_positions(kv.block_size);
  return r;
}

}  // namespace attention_detail

template <class V>
void attend_rows_impl(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                      float scale, float* scratch, float* out) {
  using namespace attention_detail;
  for (int i0 = 0; i0 < m; i0 += kMaxAttendRows) {
    const Run r = make_run(q + i0 * q_stride, q_stride, std::min(kMaxAttendRows, m - i0), n + i0,
                           out + i0 * q_stride, q_stride, kv);
    attend_run<V>(r, G, hd, kv, scale, scratch, nullptr);
  }
}

template <class V>
void attend_chunk_impl(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                       int64_t c, float scale, float* scratch, const AttendPartial& part) {
  using namespace attention_detail;
  Run r = make_run(q, q_stride, m, n, part.out, G * hd, kv);
  r.p_begin = c * r.chunk;
  attend_run<V>(r, G, hd, kv, scale, scratch, &part);
}

// What attend_group does with its chunks, from partials computed apart.
template <class V>
void attend_combine_impl(const AttendPartial* parts, int64_t n_parts, int m, int G, int64_t hd, float* out,
                         int64_t out_stride) {
  using namespace attention_detail;
  for (int i = 0; i < m; ++i) {
    for (int h = 0; h < G; ++h) {
      const int64_t k = i * G + h;
      float* o = out + i * out_stride + h * hd;
      std::copy_n(parts[0].out + k * hd, hd, o);
      float max = parts[0].max[k];
      double sum = parts[0].sum[k];
      for (int64_t c = 1; c < n_parts; ++c) {
        merge_partial<V>(o, max, sum, parts[c].out + k * hd, parts[c].max[k], parts[c].sum[k], hd);
      }
      normalize<V>(o, sum, hd);
    }
  }
}

}  // namespace ll3::kernels
