// Attention of a sequence's tokens over its cached positions, per KV head: the G query heads
// that share a KV head (grouped-query attention) are done together, and so are consecutive
// tokens of one sequence (a prompt chunk), so each K and V row is read and converted once for
// all of them; the row addresses are walked block by block through the paged cache instead of
// being recomputed per position and per head. A token's result has the same bits whichever
// tokens share its call: a prompt row equals the decode row it would have been.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace ll3::kernels {

// One KV head of one layer in the paged cache (kv/kv_cache.h fills it): position p lives in
// block block_table[p / block_size], slot p % block_size; its slice of the K row starts
// (block_table[p / block_size] * block_size + p % block_size) * slot_bytes bytes after k (v
// likewise) and holds hd elements of `type`: floats, halves, or hd / 32 Q8_0 blocks (so Q8_0
// needs hd % 32 == 0: a head's slice is whole blocks). Addressing in bytes serves all three.
struct KvHeadView {
  const void* k = nullptr;  // the layer's K at block 0, slot 0, plus this head's byte offset in a row
  const void* v = nullptr;
  size_t slot_bytes = 0;  // bytes between consecutive slots (the cache's row: all KV heads)
  int64_t block_size = 0;
  const int32_t* block_table = nullptr;
  DType type = DType::F16;  // F16, F32 or Q8_0
};

// out[h] = sum_p softmax_p(scale * q[h] . K_p) V_p for the G heads of q (G rows of hd floats;
// out likewise), over positions 0 .. n-1 (n >= 1). scores: G * n floats of scratch.
void attend(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* scores,
            float* out);

// The same for m consecutive tokens of one sequence: token i (queries at q + i * q_stride,
// output at out + i * q_stride) attends over positions 0 .. n + i - 1, with the bits attend()
// gives it alone. scores: min(m, kMaxAttendRows) * G * (n + m - 1) floats of scratch.
void attend_rows(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                 float scale, float* scores, float* out);
// Tokens the kernels take in one pass over K and V (longer runs take several).
inline constexpr int kMaxAttendRows = 16;

namespace ref {
void attend(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* scores,
            float* out);
}
namespace avx2 {
// hd a multiple of 8.
void attend_rows(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                 float scale, float* scores, float* out);
}
namespace avx512 {
// hd a multiple of 16.
void attend_rows(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                 float scale, float* scores, float* out);
}

}  // namespace ll3::kernels
