// The decode layout of quantized weights: 16 rows interleaved ("panels"), so that one vector
// register holds 4 bytes of each of 16 rows and a decode kernel computes 16 outputs in its
// lanes. The activation is broadcast 4 bytes at a time, the per-block scales of the 16 rows are
// converted in one instruction, and no horizontal sums are left at the end: the per-row kernels
// spend most of their work on exactly those (and on decoding one row's scales at a time).
//
// A panel takes exactly the bytes of its 16 rows (a permutation, plus Q8_0's sign flip), so it
// is made in place in the huge-page copy of the weights at load time and costs no memory. Rows
// stay readable one at a time through panel_unpack_row, which the prompt paths use (they read
// each weight row once per batch, not once per token).
//
// Layouts, per unit of block columns (64-byte aligned throughout; the offsets are into the
// unit's 16 * unit_row_bytes bytes):
//   Q4_K, one block column (2304 bytes): d of the 16 rows (f16) at 0, dmin at 32, the 12 scale
//     bytes as 3 groups of 16 dwords at 64, the 128 qs bytes as 32 groups of 16 dwords at 256.
//     Group k holds dword k of rows 0..15.
//   Q6_K, two block columns (6720 bytes): d of block 2c at 0, of 2c+1 at 32; then each block
//     (at 64 and 3392) in the order its kernel reads it: the 16 scale bytes as 4 groups, then
//     per half h qh groups 8h..8h+7 (512 bytes) and ql groups 16h..16h+15 (1024 bytes). A
//     strictly sequential stream: with ql and qh in two runs per block the kernel reached 81%
//     of the streaming read against 88% now (1 GiB, 2 threads).
//   Q8_0, two block columns (1088 bytes): d of block 2c at 0, of block 2c+1 at 32, then each
//     block's 32 qs as 8 groups of 16 dwords (at 64 and 576), stored + 128 as unsigned bytes
//     (vpdpbusd multiplies unsigned by signed; the kernel subtracts 128 * sum(activation)).
//   F16 (the float decode, TypeTraits::dot_f32_panels; cols a multiple of 16): element k of
//     the 16 rows as 16 consecutive halves, k = 0, 1, ...: one stream of 32-byte vectors, each
//     converted into the 16 rows' lanes, where the row kernels read four rows at four places
//     (measured at two thirds of the streaming read on Zen 5).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace ll3::kernels {

constexpr int64_t kPanelRows = 16;
// The longest row (columns) TypeTraits::dot_q_panel_rows takes; longer rows are unpacked for
// dot_q_rows (same results).
constexpr int64_t kPanelRowsMaxCols = 32768;

// Whether a (rows x cols) matrix of type t can take the panel layout: the type has one, rows is
// a multiple of 16 and the row a whole number of units.
bool panel_layout_exists(DType t, int64_t rows, int64_t cols);

// 16 rows (row_bytes apart, at rows16) into one panel at out (16 * row_bytes bytes; not
// overlapping the input).
void panel_pack(DType t, const uint8_t* rows16, uint8_t* out, int64_t cols);
// A whole (rows x cols) matrix into panels in place (panel_layout_exists must hold).
void panel_pack_matrix(DType t, uint8_t* data, int64_t rows, int64_t cols);
// All 16 rows of a panel into rows16 (row_stride bytes apart): what the prompt paths use.
void panel_unpack(DType t, const uint8_t* panel, uint8_t* rows16, size_t row_stride, int64_t cols);
// Row r (0..15) of a panel, in the type's row layout, into row (row_bytes bytes).
void panel_unpack_row(DType t, const uint8_t* panel, int r, uint8_t* row, int64_t cols);

// What a decode kernel (TypeTraits::dot_q_panels) takes from its activation row besides the
// quants (kernels/cpu/panel_act.h): made once per row and weight type, read by every call.
// panel_act_bytes bounds it for every type, for a row of n columns.
constexpr size_t panel_act_bytes(int64_t n) { return static_cast<size_t>(n / 4 + 64); }
// From the row's 8-bit activations xq (of the weight type's vec_dot_type) into act.
void panel_act(DType weight_type, const void* xq, int64_t n, void* act);

// Groups g0 .. ngroups-1 of panel_groups_to_rows (below) one dword at a time: the SIMD
// versions' tail of fewer than 8 groups.
void panel_groups_to_rows_scalar(const uint8_t* groups, int g0, int ngroups, uint8_t* rows, size_t row_stride,
                                 bool flip, int gap);

namespace avx2 {
// As avx512::panel_groups_to_rows (with 8 x 8 transposes).
void panel_groups_to_rows(const uint8_t* groups, int ngroups, uint8_t* rows, size_t row_stride, bool flip,
                          int gap = 0);
}  // namespace avx2
namespace avx512 {
// A 16 x 16 tile of halves transposed, bit for bit: element j of src row i (src_stride halves
// apart) to element i of dst row j. F16 panels are packed and unpacked with it.
void f16_transpose16(const uint16_t* src, size_t src_stride, uint16_t* dst, size_t dst_stride);
// ngroups groups of 16 dwords (64 bytes each, consecutive) to 16 rows: dword g of row r to
// rows + r * row_stride + 4 g; flip: xor 0x80 into every byte; gap: with ngroups == 16, bytes
// skipped in the row between the first 8 groups and the last 8 (Q8_0's two blocks).
void panel_groups_to_rows(const uint8_t* groups, int ngroups, uint8_t* rows, size_t row_stride, bool flip,
                          int gap = 0);
}  // namespace avx512

}  // namespace ll3::kernels
