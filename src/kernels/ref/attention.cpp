#include <algorithm>
#include <cmath>

#include "core/half.h"
#include "kernels/attention.h"
#include "kernels/quant_blocks.h"

namespace ll3::kernels::ref {

namespace {

// Element i of a head's row slice; Q8_0 and Q4_0 as their dequantization does it (q * d).
float element(const uint8_t* row, int64_t i, DType t) {
  switch (t) {
    case DType::F32: return reinterpret_cast<const float*>(row)[i];
    case DType::Q8_0: {
      const quant::BlockQ8_0& b = reinterpret_cast<const quant::BlockQ8_0*>(row)[i / quant::kQK];
      return b.qs[i % quant::kQK] * f16_to_f32(b.d);
    }
    case DType::Q4_0: {
      const quant::BlockQ4_0& b = reinterpret_cast<const quant::BlockQ4_0*>(row)[i / quant::kQK];
      const int j = static_cast<int>(i % quant::kQK);
      const int q = j < 16 ? b.qs[j] & 0x0F : b.qs[j - 16] >> 4;
      return static_cast<float>(q - 8) * f16_to_f32(b.d);
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

namespace {

// Token i's partial over chunk c (kernels/attention.h): part's entries for its G heads.
void chunk_partial(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, int64_t c, float scale,
                   float* scores, float* out, float* max, double* sum) {
  const int64_t chunk = attend_chunk_positions(kv.block_size);
  const int64_t p0 = c * chunk, p1 = std::min(n, p0 + chunk);
  for (int h = 0; h < G; ++h) {
    float* o = out + h * hd;
    std::fill_n(o, hd, 0.0f);
    max[h] = -INFINITY;
    sum[h] = 0.0;
    for (int64_t p = p0; p < p1; ++p) {
      const uint8_t* k = row_at(kv.k, kv, p);
      float dot = 0.0f;
      for (int64_t d = 0; d < hd; ++d) dot += q[h * hd + d] * element(k, d, kv.type);
      scores[p - p0] = dot * scale;
      max[h] = std::fmax(max[h], scores[p - p0]);
    }
    for (int64_t p = p0; p < p1; ++p) {
      const float w = std::exp(scores[p - p0] - max[h]);
      sum[h] += w;
      const uint8_t* v = row_at(kv.v, kv, p);
      for (int64_t d = 0; d < hd; ++d) o[d] += w * element(v, d, kv.type);
    }
  }
}

void merge_partial(float* out, float& max, double& sum, const float* o, float m, double l, int64_t hd) {
  if (l == 0.0) return;
  const float top = std::max(max, m);
  const float a = std::exp(max - top), b = std::exp(m - top);
  for (int64_t d = 0; d < hd; ++d) out[d] = out[d] * a + o[d] * b;
  sum = sum * a + l * b;
  max = top;
}

void normalize(float* out, double sum, int64_t hd) {
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t d = 0; d < hd; ++d) out[d] *= inv;
}

}  // namespace

void attend_chunk(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                  int64_t c, float scale, float* scratch, const AttendPartial& part) {
  for (int i = 0; i < m; ++i) {
    chunk_partial(q + i * q_stride, G, hd, kv, n + i, c, scale, scratch, part.out + i * G * hd, part.max + i * G,
                  part.sum + i * G);
  }
}

void attend_combine(const AttendPartial* parts, int64_t n_parts, int m, int G, int64_t hd, float* out,
                    int64_t out_stride) {
  for (int i = 0; i < m; ++i) {
    for (int h = 0; h < G; ++h) {
      const int64_t k = i * G + h;
      float* o = out + i * out_stride + h * hd;
      std::copy_n(parts[0].out + k * hd, hd, o);
      float max = parts[0].max[k];
      double sum = parts[0].sum[k];
      for (int64_t c = 1; c < n_parts; ++c) {
        merge_partial(o, max, sum, parts[c].out + k * hd, parts[c].max[k], parts[c].sum[k], hd);
      }
      normalize(o, sum, hd);
    }
  }
}

// Token by token, chunk by chunk: the partials in the scratch after the scores.
void attend_rows(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                 float scale, float* scratch, float* out) {
  const int64_t chunk = attend_chunk_positions(kv.block_size);
  float* tmp = scratch + chunk;
  float tmax[1], max[1];
  double tsum[1], sum[1];
  for (int i = 0; i < m; ++i) {
    const float* qi = q + i * q_stride;
    float* oi = out + i * q_stride;
    const int64_t ni = n + i, chunks = attend_chunks(ni, kv.block_size);
    for (int h = 0; h < G; ++h) {  // one head at a time: its partials are hd floats
      chunk_partial(qi + h * hd, 1, hd, kv, ni, 0, scale, scratch, oi + h * hd, max, sum);
      for (int64_t c = 1; c < chunks; ++c) {
        chunk_partial(qi + h * hd, 1, hd, kv, ni, c, scale, scratch, tmp, tmax, tsum);
        merge_partial(oi + h * hd, max[0], sum[0], tmp, tmax[0], tsum[0], hd);
      }
      normalize(oi + h * hd, sum[0], hd);
    }
  }
}

}  // namespace ll3::kernels::ref
