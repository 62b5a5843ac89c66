// The exponentials of the forward pass (SwiGLU's sigmoid, attention's softmax), per
// instruction set. SwiGLU evaluates exp as kernels/exp_arm.h in every version (the same bits
// everywhere). The softmax: the scalar version calls std::exp; the AVX2 / AVX-512 ones a range
// reduction and a degree-6 polynomial (kernels/cpu/vec_f32.h; within 1 ulp of std::exp over
// the float range), 8 / 16 lanes at a time: std::exp was 7% of a 128-token prompt's time.
#pragma once

#include <cstdint>

namespace ll3::kernels {
namespace ref {
void swiglu(float* gate, const float* up, int64_t n);  // gate = silu(gate) * up
double exp_sub(float* x, int64_t n, float shift);      // x = exp(x - shift); returns sum(x)
}  // namespace ref
namespace avx2 {
void swiglu(float* gate, const float* up, int64_t n);
double exp_sub(float* x, int64_t n, float shift);
}  // namespace avx2
namespace avx512 {
void swiglu(float* gate, const float* up, int64_t n);
double exp_sub(float* x, int64_t n, float shift);
}  // namespace avx512
}  // namespace ll3::kernels
