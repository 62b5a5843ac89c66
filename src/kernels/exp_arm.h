// exp(x) in float by the algorithm of Arm's optimized-routines expf, in the exact order of
// operations of llama.cpp's AVX-512 build (ggml_v_expf): SwiGLU's sigmoid feeds the 8-bit
// quantizer of the down projection, where one ulp can flip a quantization step, so ll3
// evaluates it with the reference's rounding (on every instruction set: the vector versions in
// kernels/cpu/vec_f32.h give the same bits).
//   z = x * log2(e) + 1.5 * 2^23 (rounds x log2 e to an integer n in z's low bits), n = z - 1.5 * 2^23
//   b = x - n * ln2_hi - n * ln2_lo
//   j = ((c4 b + c3) b^2 + (c2 b + c1)) b^2 + (c0 b + 1)    (a polynomial for exp(b) on |b| <= ln2 / 2)
//   exp(x) = j * 2^n, exactly rounded once; 0 or inf when |n| > 192.
// Within 1.5 ulp of the true exp where the result is normal.
#pragma once

#include <cmath>

namespace ll3::kernels::exp_arm {

constexpr float kShift = 0x1.8p23f;
constexpr float kLog2e = 0x1.715476p+0f;
constexpr float kLn2Hi = 0x1.62e4p-1f;
constexpr float kLn2Lo = 0x1.7f7d1cp-20f;
constexpr float kC0 = 0x1.ffffecp-1f, kC1 = 0x1.fffdb6p-2f, kC2 = 0x1.555e66p-3f;
constexpr float kC3 = 0x1.573e2ep-5f, kC4 = 0x1.0e4020p-7f;

inline float scalar(float x) {
  const float z = std::fma(x, kLog2e, kShift);
  const float n = z - kShift;
  const float b = std::fma(-n, kLn2Lo, std::fma(-n, kLn2Hi, x));
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(kC4, b, kC3), u, std::fma(kC2, b, kC1)), u, std::fma(kC0, b, 1.0f));
  if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
  if (std::isnan(n)) return n;
  // j * 2^n with one rounding, as vscalefps (denormal results included).
  return static_cast<float>(std::ldexp(static_cast<double>(j), static_cast<int>(n)));
}

// silu(g) * up as the reference computes it: g / (1 + exp(0 - g)) * up.
inline float swiglu(float g, float up) { return g / (1.0f + scalar(0.0f - g)) * up; }

}  // namespace ll3::kernels::exp_arm
