// Attention of a sequence's tokens over its cached positions, per KV head: the G query heads
// that share a KV head (grouped-query attention) are done together, and so are consecutive
// tokens of one sequence (a prompt chunk), so each K and V row is read and converted once for
// all of them; the row addresses are walked block by block through the paged cache instead of
// being recomputed per position and per head.
//
// A token's positions are taken in chunks of attend_chunk_positions() (whole cache blocks,
// about 1,024 positions): each chunk gives a partial result (the softmax's max, the sum of its
// weights, the unnormalized weighted sum of V), and the partials are merged in chunk order
// (flash-decoding). The chunks depend only on the token's own length, so a token's result has
// the same bits whichever tokens share its call (a prompt row equals the decode row it would
// have been) and whether its chunks run on one thread (attend_rows) or on several
// (attend_chunk, then attend_combine).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace ll3::kernels {

// One KV head of one layer in the paged cache (kv/kv_cache.h fills it): position p lives in
// block block_table[p / block_size], slot p % block_size; its slice of the K row starts
// (block_table[p / block_size] * block_size + p % block_size) * slot_bytes bytes after k (v
// likewise) and holds hd elements of `type`: floats, halves, or hd / 32 Q8_0 or Q4_0 blocks (so
// those need hd % 32 == 0: a head's slice is whole blocks). Addressing in bytes serves all.
struct KvHeadView {
  const void* k = nullptr;  // the layer's K at block 0, slot 0, plus this head's byte offset in a row
  const void* v = nullptr;
  size_t slot_bytes = 0;  // bytes between consecutive slots (the cache's row: all KV heads)
  int64_t block_size = 0;
  const int32_t* block_table = nullptr;
  DType type = DType::F16;  // F16, F32, Q8_0 or Q4_0
};

// Tokens the kernels take in one pass over K and V (longer runs take several).
inline constexpr int kMaxAttendRows = 16;

// Positions per chunk: the whole blocks nearest 1,024 (at least one). Its scores (16 tokens,
// 4 heads: 256 KiB) and its V rows (128 KiB for a 64-wide F16 head) stay in L2 for the
// weighted sum, which reads them again.
inline int64_t attend_chunk_positions(int64_t block_size) {
  return block_size >= 1024 ? block_size : 1024 / block_size * block_size;
}
// Chunks of a run whose last token attends over n_last positions.
inline int64_t attend_chunks(int64_t n_last, int64_t block_size) {
  const int64_t c = attend_chunk_positions(block_size);
  return (n_last + c - 1) / c;
}
// Floats of scratch attend_rows and attend_chunk need (per thread), for any n and m.
inline int64_t attend_scratch_floats(int G, int64_t hd, int64_t block_size) {
  return int64_t{kMaxAttendRows} * G * (attend_chunk_positions(block_size) + hd);
}

// One chunk's partial attention of m tokens and G heads: for token i and head h, the maximum
// score, the sum of exp(score - max), and sum_p exp(score_p - max) V_p (hd floats). A token
// with no position in the chunk has max -inf, sum 0 and zeros.
struct AttendPartial {
  float* out = nullptr;   // (m, G, hd)
  float* max = nullptr;   // (m, G)
  double* sum = nullptr;  // (m, G)
};

// out[h] = sum_p softmax_p(scale * q[h] . K_p) V_p for the G heads of q (G rows of hd floats;
// out likewise), over positions 0 .. n-1 (n >= 1). scratch: attend_scratch_floats.
void attend(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* scratch,
            float* out);

// The same for m consecutive tokens of one sequence: token i (queries at q + i * q_stride,
// output at out + i * q_stride) attends over positions 0 .. n + i - 1, with the bits attend()
// gives it alone.
void attend_rows(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                 float scale, float* scratch, float* out);

// Chunk c of attend_rows' work (m <= kMaxAttendRows), as a partial; attend_combine merges a
// run's partials (all attend_chunks of them, in order) into the result attend_rows gives.
void attend_chunk(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                  int64_t c, float scale, float* scratch, const AttendPartial& part);
void attend_combine(const AttendPartial* parts, int64_t n_parts, int m, int G, int64_t hd, float* out,
                    int64_t out_stride);

// One instruction set's kernels (ops/attention.cpp picks one).
namespace ref {  // scalar
void attend_rows(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                 float scale, float* scratch, float* out);
void attend_chunk(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                  int64_t c, float scale, float* scratch, const AttendPartial& part);
void attend_combine(const AttendPartial* parts, int64_t n_parts, int m, int G, int64_t hd, float* out,
                    int64_t out_stride);
// The definition, unchunked: what the kernels are tested against. scores: G * n floats.
void attend(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* scores,
            float* out);
}  // namespace ref
namespace avx2 {  // hd a multiple of 8
void attend_rows(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                 float scale, float* scratch, float* out);
void attend_chunk(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                  int64_t c, float scale, float* scratch, const AttendPartial& part);
void attend_combine(const AttendPartial* parts, int64_t n_parts, int m, int G, int64_t hd, float* out,
                    int64_t out_stride);
}  // namespace avx2
namespace avx512 {  // hd a multiple of 16
void attend_rows(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                 float scale, float* scratch, float* out);
void attend_chunk(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                  int64_t c, float scale, float* scratch, const AttendPartial& part);
void attend_combine(const AttendPartial* parts, int64_t n_parts, int m, int G, int64_t hd, float* out,
                    int64_t out_stride);
}  // namespace avx512

}  // namespace ll3::kernels
