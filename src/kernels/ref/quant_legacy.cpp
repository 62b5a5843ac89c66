// Scalar reference kernels of the 32-weight block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.
// Dequantization uses exactly ggml's arithmetic (the same float operations in the same order), so
// its results are bit-identical to llama.cpp's. The quantizers follow ggml's reference
// quantizers (what llama-quantize uses without an importance matrix).
#include <algorithm>
#include <cfloat>

#include "kernels/quant_blocks.h"
#include "kernels/quant_kernels.h"
#include "kernels/ref/quant_common.h"

namespace ll3::kernels::ref {

using namespace ll3::quant;
using detail::dot_by_blocks;
using detail::to_float_by_blocks;

namespace {

inline uint32_t load_qh(const uint8_t qh[4]) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}

void deq_q4_0(const BlockQ4_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK / 2; ++j) {
    const int x0 = (b.qs[j] & 0x0F) - 8;
    const int x1 = (b.qs[j] >> 4) - 8;
    y[j] = x0 * d;
    y[j + kQK / 2] = x1 * d;
  }
}

void deq_q4_1(const BlockQ4_1& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float m = f16_to_f32(b.m);
  for (int j = 0; j < kQK / 2; ++j) {
    const int x0 = b.qs[j] & 0x0F;
    const int x1 = b.qs[j] >> 4;
    y[j] = x0 * d + m;
    y[j + kQK / 2] = x1 * d + m;
  }
}

void deq_q5_0(const BlockQ5_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  const uint32_t qh = load_qh(b.qh);
  for (int j = 0; j < kQK / 2; ++j) {
    const int h0 = ((qh >> j) << 4) & 0x10;
    const int h1 = (qh >> (j + 12)) & 0x10;
    const int x0 = ((b.qs[j] & 0x0F) | h0) - 16;
    const int x1 = ((b.qs[j] >> 4) | h1) - 16;
    y[j] = x0 * d;
    y[j + kQK / 2] = x1 * d;
  }
}

void deq_q5_1(const BlockQ5_1& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float m = f16_to_f32(b.m);
  const uint32_t qh = load_qh(b.qh);
  for (int j = 0; j < kQK / 2; ++j) {
    const int h0 = ((qh >> j) << 4) & 0x10;
    const int h1 = (qh >> (j + 12)) & 0x10;
    const int x0 = (b.qs[j] & 0x0F) | h0;
    const int x1 = (b.qs[j] >> 4) | h1;
    y[j] = x0 * d + m;
    y[j + kQK / 2] = x1 * d + m;
  }
}

void deq_q8_0(const BlockQ8_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK; ++j) y[j] = b.qs[j] * d;
}

// The value of largest magnitude (with its sign) of a block.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void min_max(const float* x, int n, float* mn, float* mx) {
  *mn = FLT_MAX;
  *mx = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    *mn = std::min(*mn, x[j]);
    *mx = std::max(*mx, x[j]);
  }
}

}  // namespace

void q4_0_to_float(const void* src, float* dst, int64_t n) {
  to_float_by_blocks<BlockQ4_0, kQK>(src, dst, n, deq_q4_0);
}
float q4_0_dot(const void* row, const float* x, int64_t n) {
  return dot_by_blocks<BlockQ4_0, kQK>(row, x, n, deq_q4_0);
}
void q4_1_to_float(const void* src, float* dst, int64_t n) {
  to_float_by_blocks<BlockQ4_1, kQK>(src, dst, n, deq_q4_1);
}
float q4_1_dot(const void* row, const float* x, int64_t n) {
  return dot_by_blocks<BlockQ4_1, kQK>(row, x, n, deq_q4_1);
}
void q5_0_to_float(const void* src, float* dst, int64_t n) {
  to_float_by_blocks<BlockQ5_0, kQK>(src, dst, n, deq_q5_0);
}
float q5_0_dot(const void* row, const float* x, int64_t n) {
  return dot_by_blocks<BlockQ5_0, kQK>(row, x, n, deq_q5_0);
}
void q5_1_to_float(const void* src, float* dst, int64_t n) {
  to_float_by_blocks<BlockQ5_1, kQK>(src, dst, n, deq_q5_1);
}
float q5_1_dot(const void* row, const float* x, int64_t n) {
  return dot_by_blocks<BlockQ5_1, kQK>(row, x, n, deq_q5_1);
}
void q8_0_to_float(const void* src, float* dst, int64_t n) {
  to_float_by_blocks<BlockQ8_0, kQK>(src, dst, n, deq_q8_0);
}
float q8_0_dot(const void* row, const float* x, int64_t n) {
  return dot_by_blocks<BlockQ8_0, kQK>(row, x, n, deq_q8_0);
}

// Symmetric 4-bit: the largest-magnitude value maps to -8 exactly (the sign is kept, so the
// full range [-8, 7] is used on the side where the extreme value lies).
void q4_0_from_float(const float* src, void* dst, int64_t n) {
  BlockQ4_0* y = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    const float d = signed_absmax(x, kQK) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void q4_1_from_float(const float* src, void* dst, int64_t n) {
  BlockQ4_1* y = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    float mn, mx;
    min_max(x, kQK, &mn, &mx);
    const float d = (mx - mn) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    y[i].m = f32_to_f16(mn);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - mn) * id + 0.5f)));
      const int q1 =
          std::min(15, static_cast<int>(static_cast<int8_t>((x[j + 16] - mn) * id + 0.5f)));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void q5_0_from_float(const float* src, void* dst, int64_t n) {
  BlockQ5_0* y = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    const float d = signed_absmax(x, kQK) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const uint32_t q0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
      const uint32_t q1 =
          std::min(31, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f)));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= ((q0 & 0x10u) >> 4) << j;
      qh |= ((q1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void q5_1_from_float(const float* src, void* dst, int64_t n) {
  BlockQ5_1* y = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    float mn, mx;
    min_max(x, kQK, &mn, &mx);
    const float d = (mx - mn) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    y[i].m = f32_to_f16(mn);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const uint32_t q0 = std::min(31u, static_cast<uint32_t>((x[j] - mn) * id + 0.5f));
      const uint32_t q1 = std::min(31u, static_cast<uint32_t>((x[j + 16] - mn) * id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= ((q0 & 0x10u) >> 4) << j;
      qh |= ((q1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void q8_0_from_float(const float* src, void* dst, int64_t n) {
  BlockQ8_0* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

}  // namespace ll3::kernels::ref
