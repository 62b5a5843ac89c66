// Scalar W8A8 (kernels/w8a8.h): the quantizers' rule written out, the test oracle over the plain
// row-major layout, and the scalar kernel over the packed layout.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "kernels/w8a8.h"

namespace ll3::kernels::ref {

namespace {

// The clamp in the order the SIMD versions take it (vminps, then vmaxps: an unordered compare
// yields the constant, so a NaN becomes +127 everywhere), then round half to even.
inline int8_t quantize_one(float x, float inv) {
  float v = x * inv;
  v = v < 127.0f ? v : 127.0f;
  v = v > -127.0f ? v : -127.0f;
  return static_cast<int8_t>(std::nearbyint(v));
}

// The two float steps of every output, kept apart so that no compiler can fuse or reorder them.
inline float scale_sum(int32_t sum, float ws, float xs) {
  const float s = ws * xs;
  return static_cast<float>(sum) * s;
}

}  // namespace

void w8a8_quantize_static(const float* x, int64_t k, float scale, int8_t* xq) {
  const float inv = 1.0f / scale;
  for (int64_t i = 0; i < k; ++i) xq[i] = quantize_one(x[i], inv);
}

float w8a8_quantize_dynamic(const float* x, int64_t k, int8_t* xq) {
  float amax = 0.0f;
  for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = amax / 127.0f;
  if (!(scale >= FLT_MIN)) {
    std::memset(xq, 0, static_cast<size_t>(k));
    return 1.0f;
  }
  w8a8_quantize_static(x, k, scale, xq);
  return scale;
}

void w8a8_gemm(const int8_t* w, const float* w_scale, int64_t row0, int64_t n_rows, const int8_t* x, size_t x_stride,
               const float* x_scale, int64_t n_x, int64_t k, float* y, size_t y_stride) {
  LL3_CHECK(k <= kW8A8MaxK);
  for (int64_t t = 0; t < n_x; ++t) {
    const int8_t* xt = x + t * x_stride;
    for (int64_t r = row0; r < row0 + n_rows; ++r) {
      const int8_t* wr = w + r * k;
      int32_t sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += static_cast<int32_t>(wr[i]) * static_cast<int32_t>(xt[i]);
      y[t * y_stride + r] = scale_sum(sum, w_scale[r], x_scale[t]);
    }
  }
}

void w8a8_gemm_packed(const void* packed, const float* w_scale, int64_t row0, int64_t n_rows, const int8_t* x,
                      size_t x_stride, const float* x_scale, int64_t n_x, int64_t k, float* y, size_t y_stride) {
  LL3_CHECK(row0 % kW8A8PanelRows == 0 && n_rows % kW8A8PanelRows == 0 && k % kW8A8KAlign == 0 && k <= kW8A8MaxK);
  const uint8_t* p = static_cast<const uint8_t*>(packed);
  constexpr int R = static_cast<int>(kW8A8PanelRows);
  for (int64_t t = 0; t < n_x; ++t) {
    const int8_t* xt = x + t * x_stride;
    for (int64_t r0 = row0; r0 < row0 + n_rows; r0 += R) {
      const uint8_t* panel = p + r0 * k;  // panel r0 / 16 starts at 16 (r0 / 16) k
      int32_t sum[R] = {};
      for (int64_t g = 0; g < k / 4; ++g) {
        for (int j = 0; j < R; ++j) {
          for (int b = 0; b < 4; ++b) {
            const int32_t wv = static_cast<int32_t>(panel[64 * g + 4 * j + b]) - 128;
            sum[j] += wv * static_cast<int32_t>(xt[4 * g + b]);
          }
        }
      }
      for (int j = 0; j < R; ++j) y[t * y_stride + r0 + j] = scale_sum(sum[j], w_scale[r0 + j], x_scale[t]);
    }
  }
}

}  // namespace ll3::kernels::ref
