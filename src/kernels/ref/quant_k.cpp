// Scalar reference dequantization and dot products of the K-quants (Q2_K .. Q6_K, Q8_K).
// Same float operations in the same order as ggml's dequantize_row_*, hence bit-identical
// results; the quantizers are in quant_k_quantize.cpp.
#include "kernels/quant_blocks.h"
#include "kernels/quant_kernels.h"
#include "kernels/ref/quant_common.h"

namespace ll3::kernels::ref {

using namespace ll3::quant;
using detail::dot_by_blocks;
using detail::to_float_by_blocks;

namespace {

void deq_q2_k(const BlockQ2_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float dmin = f16_to_f32(b.dmin);
  const uint8_t* q = b.qs;
  int is = 0;
  for (int half = 0; half < 2; ++half) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int k = 0; k < 2; ++k) {  // two sub-blocks of 16 per 2-bit plane
        const uint8_t sc = b.scales[is++];
        const float dl = d * (sc & 0xF);
        const float ml = dmin * (sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16 * k] >> shift) & 3) - ml;
      }
    }
    q += 32;
  }
}

void deq_q3_k(const BlockQ3_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  int8_t sc[16];
  q3k_scales(b.scales, sc);
  const uint8_t* q = b.qs;
  uint8_t m = 1;
  int is = 0;
  for (int half = 0; half < 2; ++half) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int k = 0; k < 2; ++k) {
        const float dl = d * sc[is++];
        for (int l = 0; l < 16; ++l) {
          const int lo = (q[l + 16 * k] >> shift) & 3;
          const int v = lo - ((b.hmask[l + 16 * k] & m) ? 0 : 4);
          *y++ = dl * v;
        }
      }
      m <<= 1;
    }
    q += 32;
  }
}

void deq_q4_k(const BlockQ4_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float dmin = f16_to_f32(b.dmin);
  const uint8_t* q = b.qs;
  for (int is = 0; is < 8; is += 2) {
    uint8_t sc, m;
    k4_scale_min(is, b.scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    k4_scale_min(is + 1, b.scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    q += 32;
  }
}

void deq_q5_k(const BlockQ5_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float dmin = f16_to_f32(b.dmin);
  const uint8_t* ql = b.qs;
  uint8_t u1 = 1, u2 = 2;
  for (int is = 0; is < 8; is += 2) {
    uint8_t sc, m;
    k4_scale_min(is, b.scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    k4_scale_min(is + 1, b.scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (b.qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (b.qh[l] & u2 ? 16 : 0)) - m2;
    ql += 32;
    u1 <<= 2;
    u2 <<= 2;
  }
}

void deq_q6_k(const BlockQ6_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const uint8_t* ql = b.ql;
  const uint8_t* qh = b.qh;
  const int8_t* sc = b.scales;
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      // (d * scale) * q, in this order: ggml evaluates it left to right.
      y[l] = d * sc[is] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

void deq_q8_k(const BlockQ8_K& b, float* y) {
  for (int j = 0; j < kQKK; ++j) y[j] = b.d * b.qs[j];
}

}  // namespace

#define LL3_K_ROW(T, Block)                                              \
  void T##_to_float(const void* src, float* dst, int64_t n) {            \
    to_float_by_blocks<Block, kQKK>(src, dst, n, deq_##T);                \
  }                                                                      \
  float T##_dot(const void* row, const float* x, int64_t n) {            \
    return dot_by_blocks<Block, kQKK>(row, x, n, deq_##T);                \
  }

LL3_K_ROW(q2_k, BlockQ2_K)
LL3_K_ROW(q3_k, BlockQ3_K)
LL3_K_ROW(q4_k, BlockQ4_K)
LL3_K_ROW(q5_k, BlockQ5_K)
LL3_K_ROW(q6_k, BlockQ6_K)
LL3_K_ROW(q8_k, BlockQ8_K)

#undef LL3_K_ROW

}  // namespace ll3::kernels::ref
