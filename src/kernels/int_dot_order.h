// The one order of float operations of every integer-path dot product (weight row x 8-bit
// activation row), which every kernel of every instruction set follows exactly: scalar, AVX2 and
// AVX-512; one row or many; row layout or decode panels; decode or prompt.
//
// Why: the activations of the next product are quantized to 8 bits, and a rounding step of the
// quantizer amplifies a difference of one float ulp into a whole quantization step (about 1e-3
// of the row; through a few layers 1e-2 of the logits). Two kernels that agree "to float
// rounding" therefore give visibly different answers on some prompts (measured: panels vs row
// layout, 1.4e-2 relative L2 on 64 tokens of small-llama31-q4_k_m, from one flipped quant in
// layer 0's ffn_down input). Bit-identical kernels give one answer per model whatever the path.
//
// Per weight block b, with its exact integer sums (int32) and scales:
//   acc = fma(float(isum_b), scale_b, acc)          scale_b = d_w * d_a (one float multiply)
//   acc = fma(m_w, s_a, acc)                        the "_1" types (Q4_1, Q5_1): m * s of Q8_1
//   accm = fma(float(msum_b), mscale_b, accm)       K-quants with mins (Q2_K, Q4_K, Q5_K):
//                                                   mscale_b = dmin_w * d_a
// blocks in row order, from acc = accm = 0; the result is acc, or acc - accm with mins (the
// order of llama.cpp's repacked Q4_K kernels, whose results the golden files hold). A SIMD
// kernel keeps rows (panels) or tokens in its lanes, never parts of one row. The integer sums
// are the plain sums
//   isum = sum_g sc_g * sum_{j in g} q_j a_j   (sc_g = 1 for the legacy types; q_j with its offset:
//                                               Q4_0 q - 8, Q5_0 q - 16, Q3_K, Q6_K likewise)
//   msum = sum_g m_g * sum_{j in g} a_j
// which are exact however a kernel groups them.
#pragma once

#include <cmath>
#include <cstdint>

namespace ll3::kernels {

inline float int_dot_step(float acc, int32_t isum, float scale) {
  return std::fma(static_cast<float>(isum), scale, acc);
}
inline float int_dot_min_step(float accm, int32_t msum, float mscale) {
  return std::fma(static_cast<float>(msum), mscale, accm);
}

}  // namespace ll3::kernels
