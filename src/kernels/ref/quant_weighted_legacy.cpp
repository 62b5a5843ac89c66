// The 32-weight block types quantized against an importance matrix (llama-quantize --imatrix):
// each block's scale (and min) comes from a search weighted by qw[c] * sqrt(sigma2 + x[c]^2),
// where sigma2 is the mean square of the whole row (the K-quants use their super-block's).
// Q8_0 has no weighted form: ggml quantizes it by absmax with or without an imatrix.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant_blocks.h"
#include "kernels/ref/quant_common.h"
#include "kernels/ref/quant_weighted.h"

namespace ll3::kernels::ref {

using namespace ll3::quant;
using detail::fit_scale_min_weighted;
using detail::fit_symmetric_weighted;

namespace {

float row_sigma2(const float* x, int64_t n) {
  float sum_x2 = 0;
  for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
  return sum_x2 / n;
}

void block_weights(const float* xb, const float* qw, float sigma2, float* w) {
  for (int j = 0; j < kQK; ++j) w[j] = qw[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
}

// Element j in the low nibble of qs[j], element j + 16 in the high one; bit 4 of each into qh.
template <class L>
void pack_nibbles(const L* q, uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j)
    qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
}
template <class L>
void pack_high_bits(const L* q, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    qh |= ((static_cast<uint32_t>(static_cast<uint8_t>(q[j])) & 0x10u) >> 4) << j;
    qh |= ((static_cast<uint32_t>(static_cast<uint8_t>(q[j + 16])) & 0x10u) >> 4) << (j + kQK / 2);
  }
  std::memcpy(qh_bytes, &qh, 4);
}

}  // namespace

void q4_0_from_float_weighted(const float* x, void* dst, int64_t n, const float* qw) {
  BlockQ4_0* y = static_cast<BlockQ4_0*>(dst);
  const float sigma2 = row_sigma2(x, n);
  float w[kQK];
  int8_t L[kQK];
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    block_weights(x + kQK * ib, qw + kQK * ib, sigma2, w);
    y[ib].d = f32_to_f16(fit_symmetric_weighted(kQK, 8, x + kQK * ib, L, w));
    pack_nibbles(L, y[ib].qs);
  }
}

void q4_1_from_float_weighted(const float* x, void* dst, int64_t n, const float* qw) {
  BlockQ4_1* y = static_cast<BlockQ4_1*>(dst);
  const float sigma2 = row_sigma2(x, n);
  float w[kQK], neg_min;
  uint8_t L[kQK], Laux[kQK];
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    block_weights(x + kQK * ib, qw + kQK * ib, sigma2, w);
    const float d =
        fit_scale_min_weighted(kQK, 15, x + kQK * ib, w, L, &neg_min, Laux, -0.9f, 0.05f, 36);
    y[ib].d = f32_to_f16(d);
    y[ib].m = f32_to_f16(-neg_min);
    pack_nibbles(L, y[ib].qs);
  }
}

void q5_0_from_float_weighted(const float* x, void* dst, int64_t n, const float* qw) {
  BlockQ5_0* y = static_cast<BlockQ5_0*>(dst);
  const float sigma2 = row_sigma2(x, n);
  float w[kQK];
  int8_t L[kQK];
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    block_weights(x + kQK * ib, qw + kQK * ib, sigma2, w);
    y[ib].d = f32_to_f16(fit_symmetric_weighted(kQK, 16, x + kQK * ib, L, w));
    pack_nibbles(L, y[ib].qs);
    pack_high_bits(L, y[ib].qh);
  }
}

void q5_1_from_float_weighted(const float* x, void* dst, int64_t n, const float* qw) {
  BlockQ5_1* y = static_cast<BlockQ5_1*>(dst);
  const float sigma2 = row_sigma2(x, n);
  float w[kQK], neg_min;
  uint8_t L[kQK], Laux[kQK];
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    block_weights(x + kQK * ib, qw + kQK * ib, sigma2, w);
    const float d =
        fit_scale_min_weighted(kQK, 31, x + kQK * ib, w, L, &neg_min, Laux, -0.9f, 0.05f, 36);
    y[ib].d = f32_to_f16(d);
    y[ib].m = f32_to_f16(-neg_min);
    pack_nibbles(L, y[ib].qs);
    pack_high_bits(L, y[ib].qh);
  }
}

WeightedFromFloat weighted_from_float(DType type) {
  switch (type) {
    case DType::Q2_K:
      return q2_k_from_float_weighted;
    case DType::Q3_K:
      return q3_k_from_float_weighted;
    case DType::Q4_K:
      return q4_k_from_float_weighted;
    case DType::Q5_K:
      return q5_k_from_float_weighted;
    case DType::Q6_K:
      return q6_k_from_float_weighted;
    case DType::Q4_0:
      return q4_0_from_float_weighted;
    case DType::Q4_1:
      return q4_1_from_float_weighted;
    case DType::Q5_0:
      return q5_0_from_float_weighted;
    case DType::Q5_1:
      return q5_1_from_float_weighted;
    default:
      return nullptr;
  }
}

}  // namespace ll3::kernels::ref
