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
};

// The fastest kernels for this CPU; nullptr when the type is not supported.
const TypeTraits* type_traits(DType t);
// The scalar reference kernels (the test oracle); nullptr when the type is not supported.
const TypeTraits* type_traits_ref(DType t);

}  // namespace ll3
