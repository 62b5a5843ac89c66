// Row kernels of the quantized weight types, per instruction set. Same signatures as the
// TypeTraits fields: n is a multiple of the type's block size (32 or 256).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ll3::kernels {

#define LL3_QUANT_ROW_KERNELS(T)                                  \
  void T##_to_float(const void* src, float* dst, int64_t n);      \
  void T##_from_float(const float* src, void* dst, int64_t n);    \
  float T##_dot(const void* row, const float* x, int64_t n);

// Integer-path dots: weight row of type W times activations quantized to A (Q8_0 / Q8_1 / Q8_K).
#define LL3_QUANT_INT_DOTS                                          \
  float q4_0_dot_q8_0(const void* row, const void* xq, int64_t n);  \
  float q4_1_dot_q8_1(const void* row, const void* xq, int64_t n);  \
  float q5_0_dot_q8_0(const void* row, const void* xq, int64_t n);  \
  float q5_1_dot_q8_1(const void* row, const void* xq, int64_t n);  \
  float q8_0_dot_q8_0(const void* row, const void* xq, int64_t n);  \
  float q2_k_dot_q8_k(const void* row, const void* xq, int64_t n);  \
  float q3_k_dot_q8_k(const void* row, const void* xq, int64_t n);  \
  float q4_k_dot_q8_k(const void* row, const void* xq, int64_t n);  \
  float q5_k_dot_q8_k(const void* row, const void* xq, int64_t n);  \
  float q6_k_dot_q8_k(const void* row, const void* xq, int64_t n);

#define LL3_QUANT_SIMD_KERNELS(T)                                 \
  void T##_to_float(const void* src, float* dst, int64_t n);      \
  float T##_dot(const void* row, const float* x, int64_t n);

// The kernels of the common types that AVX2 and AVX-512 both have, for weight type W and
// activation type A: over npanels consecutive panels (kernels/panels.h) against one activation
// row (TypeTraits::dot_q_panels) or nx of them (dot_q_panel_rows), and one weight row against
// nx activation rows (dot_q_rows).
#define LL3_QUANT_PANEL_KERNELS(W, A)                                                                              \
  void W##_dot_##A##_panels(const void* panels, int64_t npanels, const void* xq, const void* act, int64_t n,      \
                            float* y);                                                                           \
  void W##_dot_##A##_panel_rows(const void* panels, int64_t npanels, const void* xq, size_t stride, int64_t nx,   \
                                int64_t n, float* y, size_t y_stride);                                           \
  void W##_dot_##A##_rows(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y,        \
                          size_t y_stride);

// Activation quantizers, bit-identical to the references (TypeTraits::from_float_act).
#define LL3_QUANT_ACT_KERNELS                                \
  void q8_k_from_float(const float* src, void* dst, int64_t n); \
  void q8_0_from_float_act(const float* src, void* dst, int64_t n);

// Dequantization straight to bf16 (TypeTraits::to_bf16).
#define LL3_QUANT_BF16_KERNELS(T) void T##_to_bf16(const void* src, uint16_t* dst, int64_t n);

namespace ref {
LL3_QUANT_ROW_KERNELS(q4_0)
LL3_QUANT_ROW_KERNELS(q4_1)
LL3_QUANT_ROW_KERNELS(q5_0)
LL3_QUANT_ROW_KERNELS(q5_1)
LL3_QUANT_ROW_KERNELS(q8_0)
LL3_QUANT_ROW_KERNELS(q2_k)
LL3_QUANT_ROW_KERNELS(q3_k)
LL3_QUANT_ROW_KERNELS(q4_k)
LL3_QUANT_ROW_KERNELS(q5_k)
LL3_QUANT_ROW_KERNELS(q6_k)
LL3_QUANT_ROW_KERNELS(q8_k)
LL3_QUANT_ROW_KERNELS(q8_1)
LL3_QUANT_INT_DOTS
// The activation quantizers of the integer path (TypeTraits::from_float_act).
void q8_0_from_float_act(const float* src, void* dst, int64_t n);
void q8_1_from_float_act(const float* src, void* dst, int64_t n);
}  // namespace ref

namespace avx2 {
LL3_QUANT_SIMD_KERNELS(q4_0)
LL3_QUANT_SIMD_KERNELS(q4_1)
LL3_QUANT_SIMD_KERNELS(q5_0)
LL3_QUANT_SIMD_KERNELS(q5_1)
LL3_QUANT_SIMD_KERNELS(q8_0)
LL3_QUANT_SIMD_KERNELS(q2_k)
LL3_QUANT_SIMD_KERNELS(q3_k)
LL3_QUANT_SIMD_KERNELS(q4_k)
LL3_QUANT_SIMD_KERNELS(q5_k)
LL3_QUANT_SIMD_KERNELS(q6_k)
LL3_QUANT_INT_DOTS
LL3_QUANT_PANEL_KERNELS(q4_k, q8_k)
LL3_QUANT_PANEL_KERNELS(q6_k, q8_k)
LL3_QUANT_PANEL_KERNELS(q8_0, q8_0)
LL3_QUANT_ACT_KERNELS
}  // namespace avx2

namespace avx512 {
LL3_QUANT_SIMD_KERNELS(q4_0)
LL3_QUANT_SIMD_KERNELS(q4_1)
LL3_QUANT_SIMD_KERNELS(q5_0)
LL3_QUANT_SIMD_KERNELS(q5_1)
LL3_QUANT_SIMD_KERNELS(q8_0)
LL3_QUANT_SIMD_KERNELS(q2_k)
LL3_QUANT_SIMD_KERNELS(q3_k)
LL3_QUANT_SIMD_KERNELS(q4_k)
LL3_QUANT_SIMD_KERNELS(q5_k)
LL3_QUANT_SIMD_KERNELS(q6_k)
LL3_QUANT_INT_DOTS
LL3_QUANT_BF16_KERNELS(q4_0)
LL3_QUANT_BF16_KERNELS(q4_1)
LL3_QUANT_BF16_KERNELS(q5_0)
LL3_QUANT_BF16_KERNELS(q5_1)
LL3_QUANT_BF16_KERNELS(q8_0)
LL3_QUANT_BF16_KERNELS(q2_k)
LL3_QUANT_BF16_KERNELS(q3_k)
LL3_QUANT_BF16_KERNELS(q4_k)
LL3_QUANT_BF16_KERNELS(q5_k)
LL3_QUANT_BF16_KERNELS(q6_k)
LL3_QUANT_ACT_KERNELS
LL3_QUANT_PANEL_KERNELS(q4_k, q8_k)
LL3_QUANT_PANEL_KERNELS(q6_k, q8_k)
LL3_QUANT_PANEL_KERNELS(q8_0, q8_0)
// panel_act (kernels/panels.h) of Q8_0 weights: each block's sum by vpsadbw, the same values.
void q8_0_panel_act(const void* xq, int64_t n, void* act);
// One weight row against nx activation rows of the other types (TypeTraits::dot_q_rows).
void q2_k_dot_q8_k_rows(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y, size_t y_stride);
void q3_k_dot_q8_k_rows(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y, size_t y_stride);
void q4_0_dot_q8_0_rows(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y, size_t y_stride);
void q5_k_dot_q8_k_rows(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y, size_t y_stride);
// Several weight rows (row_stride bytes apart) against one activation row (TypeTraits::dot_q_wrows).
void q4_k_dot_q8_k_wrows(const void* rows, size_t row_stride, int64_t nrows, const void* xq, int64_t n, float* y);
void q6_k_dot_q8_k_wrows(const void* rows, size_t row_stride, int64_t nrows, const void* xq, int64_t n, float* y);
void q8_0_dot_q8_0_wrows(const void* rows, size_t row_stride, int64_t nrows, const void* xq, int64_t n, float* y);
void q4_0_dot_q8_0_wrows(const void* rows, size_t row_stride, int64_t nrows, const void* xq, int64_t n, float* y);
}  // namespace avx512

namespace amx {
// dot_q_panel_rows on AMX-INT8 tiles (16 tokens or more; fewer go to avx512's), the same bits
// as avx512's.
void q4_k_dot_q8_k_panel_rows(const void* panels, int64_t npanels, const void* xq, size_t stride, int64_t nx,
                              int64_t n, float* y, size_t y_stride);
void q6_k_dot_q8_k_panel_rows(const void* panels, int64_t npanels, const void* xq, size_t stride, int64_t nx,
                              int64_t n, float* y, size_t y_stride);
void q8_0_dot_q8_0_panel_rows(const void* panels, int64_t npanels, const void* xq, size_t stride, int64_t nx,
                              int64_t n, float* y, size_t y_stride);
}  // namespace amx

#undef LL3_QUANT_ROW_KERNELS
#undef LL3_QUANT_SIMD_KERNELS
#undef LL3_QUANT_INT_DOTS
#undef LL3_QUANT_BF16_KERNELS
#undef LL3_QUANT_PANEL_KERNELS
#undef LL3_QUANT_ACT_KERNELS

}  // namespace ll3::kernels
