// Grouped-query attention for one token and one KV head (kernels/attention.h), 16 lanes of the
// head dimension at a time. Scores: each K row is converted once and multiplied with all G
// query heads. Weighted sum: each V row is converted once and accumulated into all G heads'
// outputs, kept in registers over the positions (G x C vectors, G * C <= 16); the softmax
// normalization is applied once at the end.
#include <immintrin.h>

#include <algorithm>

#include "kernels/activation_kernels.h"
#include "kernels/attention.h"

namespace ll3::kernels::avx512 {

namespace {

template <bool kF16>
inline __m512 load16(const void* base, int64_t i) {
  if constexpr (kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + i)));
  } else {
    return _mm512_loadu_ps(static_cast<const float*>(base) + i);
  }
}

// Calls fn(p, row element offset) for positions 0 .. n-1, walking the block table. The rows
// of the next block are prefetched (from `data`, row_bytes each) when a block starts: they
// are one head's slice of each slot, too short and far apart for the hardware prefetchers.
template <class F>
inline void for_rows(const KvHeadView& kv, const void* data, size_t elem, int64_t hd, int64_t n, F&& fn) {
  const int64_t n_blocks = (n + kv.block_size - 1) / kv.block_size;
  const char* bytes = static_cast<const char*>(data);
  const size_t row_bytes = static_cast<size_t>(hd) * elem;
  for (int64_t b = 0; b < n_blocks; ++b) {
    if (b + 1 < n_blocks) {
      const char* next = bytes + static_cast<size_t>(kv.block_table[b + 1] * kv.block_size * kv.slot_stride) * elem;
      for (int64_t j = 0; j < kv.block_size; ++j) {
        for (size_t off = 0; off < row_bytes; off += 64) {
          _mm_prefetch(next + static_cast<size_t>(j * kv.slot_stride) * elem + off, _MM_HINT_T0);
        }
      }
    }
    const int64_t p0 = b * kv.block_size;
    const int64_t base = kv.block_table[b] * kv.block_size * kv.slot_stride;
    const int64_t slots = std::min(kv.block_size, n - p0);
    for (int64_t j = 0; j < slots; ++j) fn(p0 + j, base + j * kv.slot_stride);
  }
}

// s[h * n + p] = scale * q[h] . K_p for G heads.
template <int G, bool kF16>
void scores(const float* q, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* s) {
  for_rows(kv, kv.k, kF16 ? 2 : 4, hd, n, [&](int64_t p, int64_t r) {
    __m512 acc[G];
    for (int h = 0; h < G; ++h) acc[h] = _mm512_setzero_ps();
    for (int64_t c = 0; c < hd; c += 16) {
      const __m512 k = load16<kF16>(kv.k, r + c);
      for (int h = 0; h < G; ++h) acc[h] = _mm512_fmadd_ps(_mm512_loadu_ps(q + h * hd + c), k, acc[h]);
    }
    for (int h = 0; h < G; ++h) s[h * n + p] = _mm512_reduce_add_ps(acc[h]) * scale;
  });
}

// out[h][c0 .. c0 + 16 C) = sum_p w[h * n + p] V_p[c0 ..] for G heads.
template <int G, int C, bool kF16>
void weighted_sum(const float* w, int64_t hd, const KvHeadView& kv, int64_t n, int64_t c0, float* out) {
  __m512 acc[G][C];
  for (int h = 0; h < G; ++h) {
    for (int i = 0; i < C; ++i) acc[h][i] = _mm512_setzero_ps();
  }
  for_rows(kv, kv.v, kF16 ? 2 : 4, hd, n, [&](int64_t p, int64_t r) {
    __m512 v[C];
    for (int i = 0; i < C; ++i) v[i] = load16<kF16>(kv.v, r + c0 + 16 * i);
    for (int h = 0; h < G; ++h) {
      const __m512 wp = _mm512_set1_ps(w[h * n + p]);
      for (int i = 0; i < C; ++i) acc[h][i] = _mm512_fmadd_ps(wp, v[i], acc[h][i]);
    }
  });
  for (int h = 0; h < G; ++h) {
    for (int i = 0; i < C; ++i) _mm512_storeu_ps(out + h * hd + c0 + 16 * i, acc[h][i]);
  }
}

// The largest C in {8, 4, 2, 1} with G * C <= 16 that divides the hd / 16 chunks.
template <int G, bool kF16>
void weighted_sum_all(const float* w, int64_t hd, const KvHeadView& kv, int64_t n, float* out) {
  const int64_t chunks = hd / 16;
  constexpr int kMax = 16 / G >= 8 ? 8 : (16 / G >= 4 ? 4 : (16 / G >= 2 ? 2 : 1));
  if (chunks % kMax == 0) {
    for (int64_t c = 0; c < chunks; c += kMax) weighted_sum<G, kMax, kF16>(w, hd, kv, n, 16 * c, out);
  } else if (chunks % 2 == 0 && kMax >= 2) {
    for (int64_t c = 0; c < chunks; c += 2) weighted_sum<G, (kMax >= 2 ? 2 : 1), kF16>(w, hd, kv, n, 16 * c, out);
  } else {
    for (int64_t c = 0; c < chunks; ++c) weighted_sum<G, 1, kF16>(w, hd, kv, n, 16 * c, out);
  }
}

template <int G, bool kF16>
void attend_group(const float* q, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* s, float* out) {
  scores<G, kF16>(q, hd, kv, n, scale, s);
  float inv[G];
  for (int h = 0; h < G; ++h) {
    float* sh = s + h * n;
    float max = sh[0];
    for (int64_t p = 1; p < n; ++p) max = std::max(max, sh[p]);
    inv[h] = static_cast<float>(1.0 / exp_sub(sh, n, max));
  }
  weighted_sum_all<G, kF16>(s, hd, kv, n, out);
  for (int h = 0; h < G; ++h) {
    const __m512 f = _mm512_set1_ps(inv[h]);
    for (int64_t c = 0; c < hd; c += 16) _mm512_storeu_ps(out + h * hd + c, _mm512_mul_ps(f, _mm512_loadu_ps(out + h * hd + c)));
  }
}

template <bool kF16>
void attend_heads(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* s, float* out) {
  // Up to 4 heads per pass (registers); more (e.g. 8 per KV head) in several passes.
  for (int h0 = 0; h0 < G; h0 += 4) {
    const float* qh = q + h0 * hd;
    float* oh = out + h0 * hd;
    float* sh = s + h0 * n;
    switch (std::min(4, G - h0)) {
      case 1: attend_group<1, kF16>(qh, hd, kv, n, scale, sh, oh); break;
      case 2: attend_group<2, kF16>(qh, hd, kv, n, scale, sh, oh); break;
      case 3: attend_group<3, kF16>(qh, hd, kv, n, scale, sh, oh); break;
      default: attend_group<4, kF16>(qh, hd, kv, n, scale, sh, oh); break;
    }
  }
}

}  // namespace

void attend(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* scores,
            float* out) {
  if (kv.type == DType::F16) {
    attend_heads<true>(q, G, hd, kv, n, scale, scores, out);
  } else {
    attend_heads<false>(q, G, hd, kv, n, scale, scores, out);
  }
}

}  // namespace ll3::kernels::avx512
