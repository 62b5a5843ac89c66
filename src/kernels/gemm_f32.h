// The float matrix product of prompt processing: y[t][r] = sum_k w[r][k] * x[t][k] for a block
// of weight rows (already in float) and a batch of activation rows, both contiguous along k.
// The SIMD version keeps a 4-row x 6-token tile of accumulators in registers, so each weight
// and activation load feeds several FMAs instead of one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace ll3::kernels {

using GemmF32Fn = void (*)(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy,
                           int64_t rows, int64_t n, int64_t k);

namespace ref {
void gemm_f32(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, int64_t rows,
              int64_t n, int64_t k);
}
namespace avx2 {
void gemm_f32(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, int64_t rows,
              int64_t n, int64_t k);
}
namespace avx512 {
void gemm_f32(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, int64_t rows,
              int64_t n, int64_t k);
}

// The fastest version this CPU runs.
GemmF32Fn gemm_f32();

// The same products in broadcast form over lane-major packs (avx512/gemm_f32_lanes.cpp), with
// the same bits: for each lane l of kernels/float_dot_order.h, a block of 16 or 32 weight rows
// times a tile of kLaneTokens tokens is a GEMM whose fma chains run in order of k, one vector
// of rows per weight load and one broadcast per token. Packs, per group j of 16 columns:
//   x: tiles of kLaneTokens tokens (the last padded with zeros), each [lane l][group j][token]
//   w: a block of 16 or 32 rows, [lane l][group j][row]
// (entry (l, j) exists where 16 j + l < k).
constexpr int kLaneTokens = 12;
inline int64_t lane_groups(int64_t k) { return (k + 15) / 16; }
inline size_t lanes_x_tile_floats(int64_t k) { return static_cast<size_t>(16 * lane_groups(k) * kLaneTokens); }
inline size_t lanes_x_floats(int64_t n, int64_t k) {
  return static_cast<size_t>((n + kLaneTokens - 1) / kLaneTokens) * lanes_x_tile_floats(k);
}
inline size_t lanes_w_floats(int64_t rows, int64_t k) { return static_cast<size_t>(16 * lane_groups(k) * rows); }

struct GemmF32Lanes {
  // Tokens [0, n) of x (row-major, ldx) into tiles; n a multiple of kLaneTokens except in the
  // last call of a product (so that tiles can be packed in parallel).
  void (*pack_x)(const float* x, size_t ldx, int64_t n, int64_t k, float* xp);
  // 16 or 32 rows of w, row_bytes apart, into wp (64-byte aligned): F16 and BF16 rows are
  // converted on the way (exactly), any other type is taken as F32. BF16 rows are packed
  // deinterleaved for their pair order (k a multiple of 32; x then deinterleaved too, by
  // kernels::bf16_pairs_deinterleave).
  void (*pack_w)(DType type, const void* w, size_t row_bytes, int64_t rows, int64_t k, float* wp);
  // pack_w of the rows of 1 or 2 consecutive F16 panels (kernels/panels.h): converted only,
  // the panels holding each k's 16 rows together as the packs do.
  void (*pack_w_f16_panels)(const void* panels, int64_t rows, int64_t k, float* wp);
  // y[t * ldy + r] for the packed rows and tokens [0, n).
  void (*gemm)(const float* wp, int64_t rows, const float* xp, int64_t n, int64_t k, float* y, size_t ldy);
  // The BF16 pair order at the rate of `vdpbf16ps`, for x of bf16 values (k a multiple of 32):
  // the same tiles with pairs of bf16 for entries, per group of 32 columns. pack_x_pairs takes
  // x deinterleaved (as pack_x does for BF16), pack_w_pairs BF16 rows as they are stored; the
  // bits of pack_x / pack_w / gemm.
  void (*pack_x_pairs)(const float* x, size_t ldx, int64_t n, int64_t k, float* xp);
  void (*pack_w_pairs)(const void* w, size_t row_bytes, int64_t rows, int64_t k, float* wp);
  void (*gemm_pairs)(const float* wp, int64_t rows, const float* xp, int64_t n, int64_t k, float* y, size_t ldy);
};

namespace avx512 {
void pack_x_lanes(const float* x, size_t ldx, int64_t n, int64_t k, float* xp);
void pack_w_lanes(DType type, const void* w, size_t row_bytes, int64_t rows, int64_t k, float* wp);
void pack_w_f16_panels(const void* panels, int64_t rows, int64_t k, float* wp);
void gemm_f32_lanes(const float* wp, int64_t rows, const float* xp, int64_t n, int64_t k, float* y, size_t ldy);
void pack_x_pairs(const float* x, size_t ldx, int64_t n, int64_t k, float* xp);
void pack_w_pairs(const void* w, size_t row_bytes, int64_t rows, int64_t k, float* wp);
void gemm_pairs(const float* wp, int64_t rows, const float* xp, int64_t n, int64_t k, float* y, size_t ldy);
}  // namespace avx512

// nullptr where the CPU has no AVX-512.
const GemmF32Lanes* gemm_f32_lanes();

}  // namespace ll3::kernels
