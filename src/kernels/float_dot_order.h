// The one order of float operations of every float dot product: F32 / F16 / BF16 weight rows
// (TypeTraits::dot_f32, the decode path) and the float GEMM of the prompt path (kernels/
// gemm_f32.h), on every instruction set. As for the integer path (kernels/int_dot_order.h),
// one answer per model whatever the path: a product feeding an 8-bit quantizer (or rounded to
// F16 for the next F16 weight) turns one ulp into a whole step.
//
// 16 lanes: lane l sums w[i] * x[i] for i = l (mod 16) by fma in order of i, from 0 (a last
// partial group of 16 updates only its first lanes); then the lanes are added as a tree:
//   s8[l] = v[l] + v[l + 8], s4[l] = s8[l] + s8[l + 4], s2[l] = s4[l] + s4[l + 2], s2[0] + s2[1]
// (AVX-512: one register; AVX2: lanes 0-7 and 8-15 in two).
#pragma once

#include <cmath>
#include <cstdint>

namespace ll3::kernels {

inline float float_lanes_sum(const float* v) {
  float s8[8], s4[4];
  for (int l = 0; l < 8; ++l) s8[l] = v[l] + v[l + 8];
  for (int l = 0; l < 4; ++l) s4[l] = s8[l] + s8[l + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// The reference: w(i) gives weight i as a float.
template <class W>
float float_dot_ref(W w, const float* x, int64_t n) {
  float lane[16] = {};
  for (int64_t i = 0; i < n; ++i) lane[i % 16] = std::fma(w(i), x[i], lane[i % 16]);
  return float_lanes_sum(lane);
}

}  // namespace ll3::kernels
