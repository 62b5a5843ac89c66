#include <cmath>

#include "core/half.h"
#include "kernels/attention.h"
#include "kernels/quant_blocks.h"

namespace ll3::kernels::ref {

namespace {

// Element i of a head's row slice; Q8_0 as its dequantization does it (q * d).
float element(const uint8_t* row, int64_t i, DType t) {
  switch (t) {
    case DType::F32: return reinterpret_cast<const float*>(row)[i];
    case DType::Q8_0: {
      const quant::BlockQ8_0& b = reinterpret_cast<const quant::BlockQ8_0*>(row)[i / quant::kQK];
      return b.qs[i % quant::kQK] * f16_to_f32(b.d);
    }
    default: return f16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
  }
}

// Position p's row slice of this head in K (or V) at base.
const uint8_t* row_at(const void* base, const KvHeadView& kv, int64_t p) {
  const int64_t slot = kv.block_table[p / kv.block_size] * kv.block_size + p % kv.block_size;
  return static_cast<const uint8_t*>(base) + static_cast<size_t>(slot) * kv.slot_bytes;
}

}  // namespace

void attend(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* scores,
            float* out) {
  for (int h = 0; h < G; ++h) {
    float* s = scores + h * n;
    float max = -INFINITY;
    for (int64_t p = 0; p < n; ++p) {
      const uint8_t* k = row_at(kv.k, kv, p);
      float dot = 0.0f;
      for (int64_t d = 0; d < hd; ++d) dot += q[h * hd + d] * element(k, d, kv.type);
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
      const uint8_t* v = row_at(kv.v, kv, p);
      const float w = s[p] * inv;
      for (int64_t d = 0; d < hd; ++d) o[d] += w * element(v, d, kv.type);
    }
  }
}

}  // namespace ll3::kernels::ref
