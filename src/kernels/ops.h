// The element-wise and per-row operations of the forward pass (everything except the weight
// matrix products, which are in kernels/matmul.h, and attention, in kernels/attention.h). Plain
// C++ the compiler vectorises, except SwiGLU's exponentials; numerics follow the reference
// implementation where it matters (noted per function).
#pragma once

#include <cstdint>

namespace ll3::ops {

// out = x / sqrt(mean(x^2) + eps) * weight, over n elements. The sum of squares is accumulated
// in double, as the reference does, so long rows round the same way.
void rmsnorm(const float* x, const float* weight, float* out, int64_t n, float eps);

// Rotates the head_dim-sized heads of `x` (n_heads of them, contiguous) by the angles whose
// cos/sin are given for each of the head_dim/2 pairs. half_pairs: pair (i, i + head_dim/2)
// (Hugging Face layout) instead of (2i, 2i+1) (GGUF layout).
void rope(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin, bool half_pairs);

// cos/sin of the RoPE angles of position `pos` for the head_dim/2 pairs:
// theta_i = pos * base^(-2i/head_dim) / factors[i]. The angle is built by repeated float
// multiplication, as the reference does, so that long positions round identically.
void rope_angles(int64_t pos, int64_t head_dim, float base, const float* factors, float* cos, float* sin);

// gate = silu(gate) * up, over n elements.
void swiglu(float* gate, const float* up, int64_t n);

}  // namespace ll3::ops
