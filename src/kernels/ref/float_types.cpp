// Scalar reference kernels of F32 / F16 / BF16 rows.
#include <cstring>

#include "core/half.h"
#include "kernels/float_dot_order.h"
#include "kernels/float_kernels.h"

namespace ll3::kernels::ref {

void f32_to_float(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, n * 4); }
void f32_from_float(const float* src, void* dst, int64_t n) { std::memcpy(dst, src, n * 4); }

// The dots in the order of kernels/float_dot_order.h.
float f32_dot(const void* row, const float* x, int64_t n) {
  const float* w = static_cast<const float*>(row);
  return float_dot_ref([w](int64_t i) { return w[i]; }, x, n);
}

void f16_to_float(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
}

void f16_from_float(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
}

float f16_dot(const void* row, const float* x, int64_t n) {
  const uint16_t* w = static_cast<const uint16_t*>(row);
  return float_dot_ref([w](int64_t i) { return f16_to_f32(w[i]); }, x, n);
}

void f16_dot_panels(const void* panels, int64_t npanels, const float* x, int64_t n, float* y) {
  for (int64_t p = 0; p < npanels; ++p) {
    const uint16_t* w = static_cast<const uint16_t*>(panels) + p * 16 * n;
    for (int r = 0; r < 16; ++r) y[16 * p + r] = float_dot_ref([w, r](int64_t i) { return f16_to_f32(w[i * 16 + r]); }, x, n);
  }
}

void bf16_to_float(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
}

void bf16_from_float(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
}

float bf16_dot(const void* row, const float* x, int64_t n) {
  const uint16_t* w = static_cast<const uint16_t*>(row);
  return bf16_pair_dot_ref([w](int64_t i) { return bf16_to_f32(w[i]); }, x, n);
}

}  // namespace ll3::kernels::ref
