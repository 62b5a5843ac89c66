// SwiGLU and the softmax exponentials over a vector type of vec_f32.h (the AVX2 and AVX-512
// files instantiate them). SwiGLU evaluates exp as kernels/exp_arm.h (bit-identical on every
// instruction set and to the reference's rounding); the softmax's tails go through std::exp.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/vec_f32.h"

namespace ll3::kernels {

template <class V>
void swiglu_impl(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) {
    const typename V::T g = V::load(gate + i);
    const typename V::T e = exp_arm_v<V>(V::sub(V::zero(), g));
    V::store(gate + i, V::mul(V::div(g, V::add(V::set1(1.0f), e)), V::load(up + i)));
  }
  for (; i < n; ++i) gate[i] = exp_arm::swiglu(gate[i], up[i]);
}

template <class V>
double exp_sub_impl(float* x, int64_t n, float shift) {
  const typename V::T s = V::set1(shift);
  typename V::D lo = V::zero_double(), hi = lo;
  int64_t i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) {
    const typename V::T e = exp_poly<V>(V::sub(V::load(x + i), s));
    V::store(x + i, e);
    V::add_double(e, lo, hi);
  }
  double sum = V::reduce_double(lo, hi);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

}  // namespace ll3::kernels
