// Static W8A8: int8 weights (one float scale per output row) times int8 activations (one float
// scale per activation row: a calibrated static scale shared by a tensor's rows, or a dynamic
// per-row amax / 127): the products of static W8A8 models (model/w8a8_format.h, quant/w8a8.h).
//
//   y[t * y_stride + r] = (float)(sum_k w[r][k] * x[t][k]) * (w_scale[r] * x_scale[t])
//
// |w|, |x| <= 127 (never -128) and k <= 32768, so the int32 sum is exact in any order: every
// SIMD kernel equals the scalar reference bit for bit (int32 -> float, then one multiply by the
// float product w_scale[r] * x_scale[t], taken in that order).
//
// The packed weight layout (w8a8_pack; n_rows % 16 == 0, k % 64 == 0): panels of 16 rows, panel
// p (rows 16p .. 16p+15) at byte 16 p k; within a panel, k-group g (columns 4g .. 4g+3) at byte
// 64 g holds 4 bytes of each of the 16 rows, row 16p+j at 64 g + 4 j. Each byte is stored as
// w + 128 (unsigned, 1 .. 255): `vpdpbusd` multiplies unsigned bytes (its register operand, the
// weights) by signed ones (the broadcast activation), and the kernels subtract 128 * sum_k x[t][k]
// once per activation row. One 64-byte line is one zmm register: 16 rows' lanes, no horizontal
// sums; AVX2 reads it as two ymm halves (rows 0-7, 8-15). n_rows * k bytes, no side data.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ll3::kernels {

constexpr int64_t kW8A8PanelRows = 16;  // n_rows, row0 of the packed layout: multiples of this
constexpr int64_t kW8A8KAlign = 64;     // k of the packed layout: a multiple of this
constexpr int64_t kW8A8MaxK = 32768;    // the longest row whose int32 sums cannot overflow

// ---- Activation quantizers (every ISA bit for bit) --------------------------------------------
// x: (k) floats, finite; xq: (k) int8. With inv = 1.0f / scale computed once (scale > 0):
//   v = x[i] * inv;  v = v < 127 ? v : 127;  v = v > -127 ? v : -127;  xq[i] = nearbyint(v)
// (round half to even, the default rounding mode; the float clamp first, so no conversion can
// overflow). Any k.
void w8a8_quantize_static(const float* x, int64_t k, float scale, int8_t* xq);
// scale = amax / 127 (amax = max |x[i]|), then as w8a8_quantize_static; returns the scale. A row
// whose scale would be 0 or subnormal (all zeros, or |x| < 127 * FLT_MIN) gets scale 1 and zeros.
float w8a8_quantize_dynamic(const float* x, int64_t k, int8_t* xq);

// ---- Packed weights ---------------------------------------------------------------------------
// Bytes of the packed layout of an (n_rows x k) matrix: n_rows * k.
size_t w8a8_packed_bytes(int64_t n_rows, int64_t k);
// w: (n_rows, k) row-major int8 in -127..127 -> packed (w8a8_packed_bytes bytes, not overlapping
// w; 64-byte alignment is best, not required). n_rows % 16 == 0, k % 64 == 0, k <= kW8A8MaxK.
void w8a8_pack(const int8_t* w, int64_t n_rows, int64_t k, void* packed);
// Row r (any) of the packed matrix of rows of k columns back into (k) int8.
void w8a8_unpack_row(const void* packed, int64_t r, int64_t k, int8_t* row);

// ---- Product ----------------------------------------------------------------------------------
// Output rows row0 .. row0 + n_rows - 1 (row0, n_rows multiples of 16: callers split the rows
// across threads) for n_x >= 1 activation rows:
//   packed:  the whole matrix (w8a8_pack), k columns
//   w_scale: (all rows) per-row weight scales, indexed by the absolute row
//   x:       (n_x, x_stride) int8 activations in -127..127, row t at x + t * x_stride
//   x_scale: (n_x) per-activation-row scales
//   y:       column 0 of activation row 0: y[t * y_stride + r] for r in [row0, row0 + n_rows)
// The fastest kernel this CPU has (LL3_CPU caps it); no heap allocation.
void w8a8_gemm(const void* packed, const float* w_scale, int64_t row0, int64_t n_rows, const int8_t* x,
               size_t x_stride, const float* x_scale, int64_t n_x, int64_t k, float* y, size_t y_stride);

namespace ref {
void w8a8_quantize_static(const float* x, int64_t k, float scale, int8_t* xq);
float w8a8_quantize_dynamic(const float* x, int64_t k, int8_t* xq);
// The test oracle, on the plain row-major layout: w (all rows, k) with row r at w + r * k; any
// n_rows, row0 and k (k <= kW8A8MaxK).
void w8a8_gemm(const int8_t* w, const float* w_scale, int64_t row0, int64_t n_rows, const int8_t* x, size_t x_stride,
               const float* x_scale, int64_t n_x, int64_t k, float* y, size_t y_stride);
// The scalar kernel over the packed layout (what LL3_CPU=scalar runs).
void w8a8_gemm_packed(const void* packed, const float* w_scale, int64_t row0, int64_t n_rows, const int8_t* x,
                      size_t x_stride, const float* x_scale, int64_t n_x, int64_t k, float* y, size_t y_stride);
}  // namespace ref

namespace avx512 {  // AVX-512 BW + VNNI (vpdpbusd)
void w8a8_quantize_static(const float* x, int64_t k, float scale, int8_t* xq);
float w8a8_quantize_dynamic(const float* x, int64_t k, int8_t* xq);
void w8a8_gemm(const void* packed, const float* w_scale, int64_t row0, int64_t n_rows, const int8_t* x,
               size_t x_stride, const float* x_scale, int64_t n_x, int64_t k, float* y, size_t y_stride);
}  // namespace avx512

namespace avx2 {  // AVX2 (vpmaddubsw with the sign trick, then vpmaddwd)
void w8a8_quantize_static(const float* x, int64_t k, float scale, int8_t* xq);
float w8a8_quantize_dynamic(const float* x, int64_t k, int8_t* xq);
void w8a8_gemm(const void* packed, const float* w_scale, int64_t row0, int64_t n_rows, const int8_t* x,
               size_t x_stride, const float* x_scale, int64_t n_x, int64_t k, float* y, size_t y_stride);
}  // namespace avx2

}  // namespace ll3::kernels
