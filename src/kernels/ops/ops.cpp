#include <cmath>

#include "core/cpu_features.h"
#include "kernels/activation_kernels.h"
#include "kernels/ops.h"

namespace ll3::ops {

void rmsnorm(const float* x, const float* weight, float* out, int64_t n, float eps) {
  double sum = 0.0;
  // The square in float, summed in double: llama.cpp's order (its golden logits move when one
  // activation crosses a quantization step, so its rounding is kept exactly).
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void rope_angles(int64_t pos, int64_t head_dim, float base, const float* factors, float* cos, float* sin) {
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(head_dim));
  float theta = static_cast<float>(pos);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const float t = theta / factors[i];
    cos[i] = std::cos(t);
    sin[i] = std::sin(t);
    theta *= theta_scale;
  }
}

void rope(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin, bool half_pairs) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t a = half_pairs ? i : 2 * i;
      const int64_t b = half_pairs ? i + half : 2 * i + 1;
      const float x0 = v[a], x1 = v[b];
      // One rounding for the first product and the sum: the order llama.cpp's CPU build has
      // (its `x0*cos - x1*sin`, contracted by the compiler), measured against its dumps.
      v[a] = std::fma(x0, cos[i], -(x1 * sin[i]));
      v[b] = std::fma(x0, sin[i], x1 * cos[i]);
    }
  }
}

void swiglu(float* gate, const float* up, int64_t n) {
  // The AVX-512 / AVX2 versions evaluate exp with a polynomial (kernels/activation_kernels.h).
  static const auto fn = cpu_features().has_avx512_set() ? kernels::avx512::swiglu
                         : cpu_features().has_avx2_set() ? kernels::avx2::swiglu
                                                         : kernels::ref::swiglu;
  fn(gate, up, n);
}

}  // namespace ll3::ops
