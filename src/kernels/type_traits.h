// One traits entry per weight type: how to turn a row into floats, how to make one from floats,
// and the dot product of a stored row with a float activation row. The scalar versions in
// kernels/ref are the reference every SIMD kernel is tested against; type_traits() returns the
// fastest versions this CPU supports (chosen at run time, never from the build machine).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace ll3 {

struct TypeTraits {
  DType type;
  // Dequantize n elements (n a multiple of the block size) of one row.
  void (*to_float)(const void* src, float* dst, int64_t n) = nullptr;
  // Quantize n floats into one row; nullptr where ll3 cannot write the type.
  void (*from_float)(const float* src, void* dst, int64_t n) = nullptr;
  // sum_i row[i] * x[i] over n elements, F32 accumulation.
  float (*dot_f32)(const void* row, const float* x, int64_t n) = nullptr;
  // dot_f32 of nrows rows (row_stride bytes apart) against one x, y[r] for row r, each the same
  // bits as dot_f32 gives it: the decode path of the float types, several rows' chains in
  // flight at once. nullptr where the type has none on this CPU (use dot_f32).
  void (*dot_f32_wrows)(const void* rows, size_t row_stride, int64_t nrows, const float* x, int64_t n,
                        float* y) = nullptr;
  // The activation types of the integer path (Q8_0, Q8_1, Q8_K): how an activation row is
  // quantized, as llama.cpp's CPU backend does it at run time (Q8_0 / Q8_1: scale 127 / amax,
  // ties to even; from_float keeps the reference quantizer of stored weights: 1 / d, ties away).
  void (*from_float_act)(const float* src, void* dst, int64_t n) = nullptr;

  // The integer path of the quantized types (as llama.cpp computes): quantize the activation row
  // once into vec_dot_type blocks (Q8_0, Q8_1 or Q8_K) with that type's from_float, then
  // dot_q(row, xq, n) = sum_i dequant(row)[i] * dequant(xq)[i]. nullptr / F32 where there is none.
  //   const TypeTraits* a = type_traits(w->vec_dot_type);
  //   a->from_float(x, xq, n);  // xq: dtype_row_bytes(w->vec_dot_type, n) bytes, once per x
  //   for each row r: y[r] = w->dot_q(row_r, xq, n);
  DType vec_dot_type = DType::F32;
  float (*dot_q)(const void* row, const void* xq, int64_t n) = nullptr;
  // dot_q of one weight row against nx activation rows (xq_stride bytes apart), written to
  // y[j * y_stride]: the weight row is unpacked once per few activation rows instead of once per
  // row, which is what prompt processing wants. Set whenever dot_q is.
  void (*dot_q_rows)(const void* row, const void* xq, size_t xq_stride, int64_t nx, int64_t n, float* y,
                     size_t y_stride) = nullptr;
  // dot_q of nrows weight rows (row_stride bytes apart) against one activation row, y[r] for row
  // r: the decode path. The activation blocks are loaded once per few weight rows and the rows
  // give the core independent work. nullptr where the type has no such kernel (use dot_q).
  void (*dot_q_wrows)(const void* rows, size_t row_stride, int64_t nrows, const void* xq, int64_t n,
                      float* y) = nullptr;
  // dot_q over npanels consecutive 16-row panels (kernels/panels.h), y[16 * npanels]: the
  // decode path of matrices repacked at load. nullptr where the type has no panel kernel on
  // this CPU (then no matrix of the type is repacked). act: kernels::panel_act of xq for this
  // weight type.
  void (*dot_q_panels)(const void* panels, int64_t npanels, const void* xq, const void* act, int64_t n,
                       float* y) = nullptr;
  // dot_q_rows for the rows of npanels consecutive panels: y[x * y_stride + r], r < 16 *
  // npanels, x < nx. The prompt path of panel-layout matrices where the type has it (else rows
  // are unpacked for dot_q_rows).
  void (*dot_q_panel_rows)(const void* panels, int64_t npanels, const void* xq, size_t stride, int64_t nx, int64_t n,
                           float* y, size_t y_stride) = nullptr;
  // dot_f32 over npanels consecutive 16-row panels (kernels/panels.h), y[16 * npanels], each the
  // bits dot_f32 gives its row: the float decode of matrices repacked at load. nullptr where
  // the type has no panel kernel on this CPU (then no matrix of the type is repacked).
  void (*dot_f32_panels)(const void* panels, int64_t npanels, const float* x, int64_t n, float* y) = nullptr;
  // to_float rounded to bf16 (nearest even) in one pass, for the AMX prompt path; nullptr
  // where there is no such kernel (to_float, then round).
  void (*to_bf16)(const void* src, uint16_t* dst, int64_t n) = nullptr;
  // BF16 only: to_float in the pair order of kernels/float_dot_order.h (per block of 32 the
  // odd elements, then the even ones; n a multiple of 32), how the float GEMMs take BF16 rows.
  void (*to_float_pairs)(const void* src, float* dst, int64_t n) = nullptr;
};

// The fastest kernels for this CPU; nullptr when the type is not supported.
const TypeTraits* type_traits(DType t);
// The scalar reference kernels (the test oracle); nullptr when the type is not supported.
const TypeTraits* type_traits_ref(DType t);

}  // namespace ll3
