#include <cmath>

#include "core/half.h"
#include "kernels/attention.h"

namespace ll3::kernels::ref {

namespace {

float element(const void* base, int64_t i, DType t) {
  return t == DType::F32 ? static_cast<const float*>(base)[i] : f16_to_f32(static_cast<const uint16_t*>(base)[i]);
}

// Element offset of position p's row.
int64_t row_at(const KvHeadView& kv, int64_t p) {
  return (kv.block_table[p / kv.block_size] * kv.block_size + p % kv.block_size) * kv.slot_stride;
}

}  // namespace

void attend(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* scores,
            float* out) {
  for (int h = 0; h < G; ++h) {
    float* s = scores + h * n;
    float max = -INFINITY;
    for (int64_t p = 0; p < n; ++p) {
      const int64_t r = row_at(kv, p);
      float dot = 0.0f;
      for (int64_t d = 0; d < hd; ++d) dot += q[h * hd + d] * element(kv.k, r + d, kv.type);
      s[p] = dot * scale;
      max = std::fmax(max, s[p]);
    }
    double sum = 0.0;
    for (int64_t p = 0; p < n; ++p) {
      s[p] = std::exp(s[p] - max);
      sum += s[p];
    }
    const float inv = static_cast<float>(1.0 / sum);
    float* o = out + h * hd;
    for (int64_t d = 0; d < hd; ++d) o[d] = 0.0f;
    for (int64_t p = 0; p < n; ++p) {
      const int64_t r = row_at(kv, p);
      const float w = s[p] * inv;
      for (int64_t d = 0; d < hd; ++d) o[d] += w * element(kv.v, r + d, kv.type);
    }
  }
}

}  // namespace ll3::kernels::ref
