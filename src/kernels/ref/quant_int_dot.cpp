// Reference of the integer path: Q8_1 activation rows, and weight-row x quantized-activation
// dots defined as the plain dot of both dequantized rows (the oracle the SIMD integer kernels,
// which sum int8 products exactly, are tested against).
#include <algorithm>

#include "kernels/quant_blocks.h"
#include "kernels/quant_kernels.h"
#include "kernels/ref/quant_common.h"

namespace ll3::kernels::ref {

using namespace ll3::quant;

namespace {

using ToFloat = void (*)(const void*, float*, int64_t);

template <ToFloat W, ToFloat A, int QK, size_t WBytes, size_t ABytes>
float dot_dequantized(const void* row, const void* xq, int64_t n) {
  const uint8_t* w = static_cast<const uint8_t*>(row);
  const uint8_t* a = static_cast<const uint8_t*>(xq);
  float tw[QK], ta[QK];  // one block of each, dequantized
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK; ++i) {
    W(w + i * WBytes, tw, QK);
    A(a + i * ABytes, ta, QK);
    float s = 0.0f;
    for (int j = 0; j < QK; ++j) s += tw[j] * ta[j];
    sum += s;
  }
  return sum;
}

void deq_q8_1(const BlockQ8_1& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK; ++j) y[j] = b.qs[j] * d;
}

}  // namespace

// Q8_1: Q8_0 plus s = d * sum(q), which the "_1" weight types need for their offsets.
void q8_1_from_float(const float* src, void* dst, int64_t n) {
  BlockQ8_1* y = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      sum += y[i].qs[j];
    }
    y[i].s = f32_to_f16(sum * d);
  }
}
void q8_1_to_float(const void* src, float* dst, int64_t n) {
  detail::to_float_by_blocks<BlockQ8_1, kQK>(src, dst, n, deq_q8_1);
}
float q8_1_dot(const void* row, const float* x, int64_t n) {
  return detail::dot_by_blocks<BlockQ8_1, kQK>(row, x, n, deq_q8_1);
}

float q4_0_dot_q8_0(const void* row, const void* xq, int64_t n) {
  return dot_dequantized<q4_0_to_float, q8_0_to_float, kQK, sizeof(BlockQ4_0), sizeof(BlockQ8_0)>(row, xq, n);
}
// The "_1" types take the activation sum from Q8_1's s (f16 of sum * unrounded d), as llama.cpp
// does, rather than from the dequantized values: the two differ by s's rounding.
template <class W, int (*Value)(const W&, int)>
float dot_with_q8_1(const void* row, const void* xq, int64_t n) {
  const W* w = static_cast<const W*>(row);
  const BlockQ8_1* a = static_cast<const BlockQ8_1*>(xq);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int isum = 0;
    for (int j = 0; j < kQK; ++j) isum += Value(w[i], j) * a[i].qs[j];
    sum += f16_to_f32(w[i].d) * f16_to_f32(a[i].d) * isum + f16_to_f32(w[i].m) * f16_to_f32(a[i].s);
  }
  return sum;
}

int q4_1_value(const BlockQ4_1& b, int j) { return j < 16 ? b.qs[j] & 0xF : b.qs[j - 16] >> 4; }
int q5_1_value(const BlockQ5_1& b, int j) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  const int low = j < 16 ? b.qs[j] & 0xF : b.qs[j - 16] >> 4;
  return low | static_cast<int>(((qh >> j) & 1) << 4);
}

float q4_1_dot_q8_1(const void* row, const void* xq, int64_t n) {
  return dot_with_q8_1<BlockQ4_1, q4_1_value>(row, xq, n);
}
float q5_0_dot_q8_0(const void* row, const void* xq, int64_t n) {
  return dot_dequantized<q5_0_to_float, q8_0_to_float, kQK, sizeof(BlockQ5_0), sizeof(BlockQ8_0)>(row, xq, n);
}
float q5_1_dot_q8_1(const void* row, const void* xq, int64_t n) {
  return dot_with_q8_1<BlockQ5_1, q5_1_value>(row, xq, n);
}
float q8_0_dot_q8_0(const void* row, const void* xq, int64_t n) {
  return dot_dequantized<q8_0_to_float, q8_0_to_float, kQK, sizeof(BlockQ8_0), sizeof(BlockQ8_0)>(row, xq, n);
}
float q2_k_dot_q8_k(const void* row, const void* xq, int64_t n) {
  return dot_dequantized<q2_k_to_float, q8_k_to_float, kQKK, sizeof(BlockQ2_K), sizeof(BlockQ8_K)>(row, xq, n);
}
float q3_k_dot_q8_k(const void* row, const void* xq, int64_t n) {
  return dot_dequantized<q3_k_to_float, q8_k_to_float, kQKK, sizeof(BlockQ3_K), sizeof(BlockQ8_K)>(row, xq, n);
}
float q4_k_dot_q8_k(const void* row, const void* xq, int64_t n) {
  return dot_dequantized<q4_k_to_float, q8_k_to_float, kQKK, sizeof(BlockQ4_K), sizeof(BlockQ8_K)>(row, xq, n);
}
float q5_k_dot_q8_k(const void* row, const void* xq, int64_t n) {
  return dot_dequantized<q5_k_to_float, q8_k_to_float, kQKK, sizeof(BlockQ5_K), sizeof(BlockQ8_K)>(row, xq, n);
}
float q6_k_dot_q8_k(const void* row, const void* xq, int64_t n) {
  return dot_dequantized<q6_k_to_float, q8_k_to_float, kQKK, sizeof(BlockQ6_K), sizeof(BlockQ8_K)>(row, xq, n);
}

}  // namespace ll3::kernels::ref
