// Row kernels of the plain float types (F32, F16, BF16), per instruction set.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ll3::kernels {

namespace ref {
void f32_to_float(const void* src, float* dst, int64_t n);
void f32_from_float(const float* src, void* dst, int64_t n);
float f32_dot(const void* row, const float* x, int64_t n);
void f16_to_float(const void* src, float* dst, int64_t n);
void f16_from_float(const float* src, void* dst, int64_t n);
float f16_dot(const void* row, const float* x, int64_t n);
void bf16_to_float(const void* src, float* dst, int64_t n);
void bf16_from_float(const float* src, void* dst, int64_t n);
float bf16_dot(const void* row, const float* x, int64_t n);
// TypeTraits::dot_f32_panels of F16 panels (kernels/panels.h): f16_dot of each row. The
// reference of the AVX-512 kernel (the traits of the scalar build keep none: no repacking).
void f16_dot_panels(const void* panels, int64_t npanels, const float* x, int64_t n, float* y);
}  // namespace ref

namespace avx2 {
float f32_dot(const void* row, const float* x, int64_t n);
float f16_dot(const void* row, const float* x, int64_t n);
float bf16_dot(const void* row, const float* x, int64_t n);
void f32_dot_wrows(const void* rows, size_t row_stride, int64_t nrows, const float* x, int64_t n, float* y);
void f16_dot_wrows(const void* rows, size_t row_stride, int64_t nrows, const float* x, int64_t n, float* y);
void bf16_dot_wrows(const void* rows, size_t row_stride, int64_t nrows, const float* x, int64_t n, float* y);
void f16_to_float(const void* src, float* dst, int64_t n);
void f16_from_float(const float* src, void* dst, int64_t n);  // bit-identical to ref
void bf16_to_float_pairs(const void* src, float* dst, int64_t n);  // TypeTraits::to_float_pairs
}  // namespace avx2

namespace avx512 {
float f32_dot(const void* row, const float* x, int64_t n);
float f16_dot(const void* row, const float* x, int64_t n);
float bf16_dot(const void* row, const float* x, int64_t n);
// TypeTraits::dot_f32_wrows.
void f32_dot_wrows(const void* rows, size_t row_stride, int64_t nrows, const float* x, int64_t n, float* y);
void f16_dot_wrows(const void* rows, size_t row_stride, int64_t nrows, const float* x, int64_t n, float* y);
void bf16_dot_wrows(const void* rows, size_t row_stride, int64_t nrows, const float* x, int64_t n, float* y);
void f16_to_float(const void* src, float* dst, int64_t n);
void f16_from_float(const float* src, void* dst, int64_t n);  // bit-identical to ref
void f16_to_bf16(const void* src, uint16_t* dst, int64_t n);  // TypeTraits::to_bf16
void f16_dot_panels(const void* panels, int64_t npanels, const float* x, int64_t n, float* y);  // dot_f32_panels
void bf16_to_float(const void* src, float* dst, int64_t n);
void bf16_to_float_pairs(const void* src, float* dst, int64_t n);  // TypeTraits::to_float_pairs
}  // namespace avx512

}  // namespace ll3::kernels
