// Reference of the integer path: Q8_1 activation rows, and the weight-row x quantized-activation
// dots that define the integer path's results: exact integer sums per block, then the block's
// fused multiply-adds in the order of kernels/int_dot_order.h. Every SIMD kernel gives
// bit-identical results.
#include <algorithm>
#include <type_traits>

#include "kernels/int_dot_order.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_kernels.h"
#include "kernels/ref/quant_common.h"

namespace ll3::kernels::ref {

using namespace ll3::quant;

namespace {

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
// The activation quantizers as llama.cpp's CPU backend runs them (its AVX2 quantize_row_q8_0 /
// _q8_1, which every x86 build uses): d = amax / 127 stored as f16, the values scaled by
// 127 / amax (not 1 / d: the two differ in the last bit) and rounded to nearest, ties to even.
template <class B>
void q8_act_blocks(const float* src, B* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[i].d = f32_to_f16(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(detail::nearest_int(x[j] * id));
      sum += y[i].qs[j];
    }
    if constexpr (requires { y[i].s; }) y[i].s = f32_to_f16(d * static_cast<float>(sum));
  }
}
void q8_0_from_float_act(const float* src, void* dst, int64_t n) {
  q8_act_blocks(src, static_cast<BlockQ8_0*>(dst), n);
}
void q8_1_from_float_act(const float* src, void* dst, int64_t n) {
  q8_act_blocks(src, static_cast<BlockQ8_1*>(dst), n);
}

void q8_1_to_float(const void* src, float* dst, int64_t n) {
  detail::to_float_by_blocks<BlockQ8_1, kQK>(src, dst, n, deq_q8_1);
}
float q8_1_dot(const void* row, const float* x, int64_t n) {
  return detail::dot_by_blocks<BlockQ8_1, kQK>(row, x, n, deq_q8_1);
}

namespace {

// A legacy block's 32 weights as integers in element order, offsets applied.
int q4_1_value(const BlockQ4_1& b, int j) { return j < 16 ? b.qs[j] & 0xF : b.qs[j - 16] >> 4; }
int q5_1_value(const BlockQ5_1& b, int j) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  const int low = j < 16 ? b.qs[j] & 0xF : b.qs[j - 16] >> 4;
  return low | static_cast<int>(((qh >> j) & 1) << 4);
}
void vals_q4_0(const BlockQ4_0& b, int* q) {
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = (b.qs[j] & 0x0F) - 8;
    q[j + kQK / 2] = (b.qs[j] >> 4) - 8;
  }
}
void vals_q4_1(const BlockQ4_1& b, int* q) {
  for (int j = 0; j < kQK; ++j) q[j] = q4_1_value(b, j);
}
void vals_q5_0(const BlockQ5_0& b, int* q) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = ((b.qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10)) - 16;
    q[j + kQK / 2] = ((b.qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16;
  }
}
void vals_q5_1(const BlockQ5_1& b, int* q) {
  for (int j = 0; j < kQK; ++j) q[j] = q5_1_value(b, j);
}
void vals_q8_0(const BlockQ8_0& b, int* q) {
  for (int j = 0; j < kQK; ++j) q[j] = b.qs[j];
}

template <class W, class A, void (*Vals)(const W&, int*)>
int32_t legacy_isum(const W& w, const A& a) {
  int q[kQK];
  Vals(w, q);
  int32_t s = 0;
  for (int j = 0; j < kQK; ++j) s += q[j] * a.qs[j];
  return s;
}

// The "_1" types (A = Q8_1) add m * s per block, taking the activation sum from Q8_1's s (f16 of
// sum * unrounded d), as llama.cpp does, rather than from the quants: the two differ by s's
// rounding.
template <class W, class A, void (*Vals)(const W&, int*)>
float legacy_dot(const void* row, const void* xq, int64_t n) {
  const W* w = static_cast<const W*>(row);
  const A* a = static_cast<const A*>(xq);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    acc = int_dot_step(acc, legacy_isum<W, A, Vals>(w[i], a[i]), f16_to_f32(w[i].d) * f16_to_f32(a[i].d));
    if constexpr (std::is_same_v<A, BlockQ8_1>) acc = std::fma(f16_to_f32(w[i].m), f16_to_f32(a[i].s), acc);
  }
  return acc;
}

// A K-quant block as 256 integer weights with 16 group scales and mins (groups of 16 weights:
// Q4_K and Q5_K's 32-weight sub-blocks give two groups each).
struct KVals {
  int q[kQKK];
  int sc[16];
  int m[16];
};

void kvals_q2_k(const BlockQ2_K& b, KVals& v) {
  for (int e = 0; e < kQKK; ++e) {
    const int h = e / 128, s = (e % 128) / 32, k = (e % 32) / 16, l = e % 16;
    v.q[e] = (b.qs[32 * h + 16 * k + l] >> (2 * s)) & 3;
  }
  for (int g = 0; g < 16; ++g) {
    v.sc[g] = b.scales[g] & 0xF;
    v.m[g] = b.scales[g] >> 4;
  }
}
void kvals_q3_k(const BlockQ3_K& b, KVals& v) {
  int8_t sc[16];
  q3k_scales(b.scales, sc);
  for (int e = 0; e < kQKK; ++e) {
    const int h = e / 128, s = (e % 128) / 32, k = (e % 32) / 16, l = e % 16;
    const int lo = (b.qs[32 * h + 16 * k + l] >> (2 * s)) & 3;
    v.q[e] = lo - ((b.hmask[16 * k + l] & (1 << (4 * h + s))) ? 0 : 4);
  }
  for (int g = 0; g < 16; ++g) {
    v.sc[g] = sc[g];
    v.m[g] = 0;
  }
}
template <class B, bool kQ5>
void kvals_q45_k(const B& b, KVals& v) {
  for (int t = 0; t < 8; ++t) {
    uint8_t sc, m;
    k4_scale_min(t, b.scales, &sc, &m);
    v.sc[2 * t] = v.sc[2 * t + 1] = sc;
    v.m[2 * t] = v.m[2 * t + 1] = m;
    for (int l = 0; l < 32; ++l) {
      const uint8_t byte = b.qs[32 * (t / 2) + l];
      int q = t % 2 == 0 ? byte & 0xF : byte >> 4;
      if constexpr (kQ5) q += ((b.qh[l] >> t) & 1) ? 16 : 0;
      v.q[32 * t + l] = q;
    }
  }
}
void kvals_q6_k(const BlockQ6_K& b, KVals& v) {
  for (int e = 0; e < kQKK; ++e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t ql = b.ql[64 * h + l + 32 * (k % 2)];
    const int lo = k < 2 ? ql & 0xF : ql >> 4;
    const int hi = (b.qh[32 * h + l] >> (2 * k)) & 3;
    v.q[e] = (lo | (hi << 4)) - 32;
  }
  for (int g = 0; g < 16; ++g) {
    v.sc[g] = b.scales[g];
    v.m[g] = 0;
  }
}

template <class W, void (*Vals)(const W&, KVals&), bool kMins>
float k_dot_q8_k(const void* row, const void* xq, int64_t n) {
  const W* w = static_cast<const W*>(row);
  const BlockQ8_K* a = static_cast<const BlockQ8_K*>(xq);
  float acc = 0.0f, accm = 0.0f;
  KVals v;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    Vals(w[i], v);
    int32_t isum = 0, msum = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t s = 0;
      for (int j = 16 * g; j < 16 * g + 16; ++j) s += v.q[j] * a[i].qs[j];
      isum += v.sc[g] * s;
      msum += v.m[g] * a[i].bsums[g];
    }
    acc = int_dot_step(acc, isum, f16_to_f32(w[i].d) * a[i].d);
    if constexpr (kMins) accm = int_dot_min_step(accm, msum, f16_to_f32(w[i].dmin) * a[i].d);
  }
  return acc - accm;
}

}  // namespace

float q4_0_dot_q8_0(const void* row, const void* xq, int64_t n) { return legacy_dot<BlockQ4_0, BlockQ8_0, vals_q4_0>(row, xq, n); }
float q4_1_dot_q8_1(const void* row, const void* xq, int64_t n) { return legacy_dot<BlockQ4_1, BlockQ8_1, vals_q4_1>(row, xq, n); }
float q5_0_dot_q8_0(const void* row, const void* xq, int64_t n) { return legacy_dot<BlockQ5_0, BlockQ8_0, vals_q5_0>(row, xq, n); }
float q5_1_dot_q8_1(const void* row, const void* xq, int64_t n) { return legacy_dot<BlockQ5_1, BlockQ8_1, vals_q5_1>(row, xq, n); }
float q8_0_dot_q8_0(const void* row, const void* xq, int64_t n) { return legacy_dot<BlockQ8_0, BlockQ8_0, vals_q8_0>(row, xq, n); }
float q2_k_dot_q8_k(const void* row, const void* xq, int64_t n) { return k_dot_q8_k<BlockQ2_K, kvals_q2_k, true>(row, xq, n); }
float q3_k_dot_q8_k(const void* row, const void* xq, int64_t n) { return k_dot_q8_k<BlockQ3_K, kvals_q3_k, false>(row, xq, n); }
float q4_k_dot_q8_k(const void* row, const void* xq, int64_t n) {
  return k_dot_q8_k<BlockQ4_K, kvals_q45_k<BlockQ4_K, false>, true>(row, xq, n);
}
float q5_k_dot_q8_k(const void* row, const void* xq, int64_t n) {
  return k_dot_q8_k<BlockQ5_K, kvals_q45_k<BlockQ5_K, true>, true>(row, xq, n);
}
float q6_k_dot_q8_k(const void* row, const void* xq, int64_t n) { return k_dot_q8_k<BlockQ6_K, kvals_q6_k, false>(row, xq, n); }

}  // namespace ll3::kernels::ref
