// The order of float operations of every float dot product: F32 / F16 weight rows, BF16 ones
// in the pair order below (TypeTraits::dot_f32, the decode path), and the float GEMM of the
// prompt path (kernels/gemm_f32.h), on every instruction set. As for the integer path (kernels/int_dot_order.h),
// one answer per model whatever the path: a product feeding an 8-bit quantizer (or rounded to
// F16 for the next F16 weight) turns one ulp into a whole step.
//
// 16 lanes: lane l sums w[i] * x[i] for i = l (mod 16) by fma in order of i, from 0 (a last
// partial group of 16 updates only its first lanes); then the lanes are added as a tree:
//   s8[l] = v[l] + v[l + 8], s4[l] = s8[l] + s8[l + 4], s2[l] = s4[l] + s4[l + 2], s2[0] + s2[1]
// (AVX-512: one register; AVX2: lanes 0-7 and 8-15 in two).
//
// BF16 weights take the pair order instead, the order of `vdpbf16ps` (AVX512-BF16), so that
// their prompts can run at its rate: lane l sums, block of 32 by block, w[i+1] x[i+1] and then
// w[i] x[i] for i = 32 j + 2 l (each by fma; a product past n is skipped), and the lanes are
// added by the same tree. When x is a bf16 value (8-bit mode rounds the activations of BF16
// weights to bf16) each product is exact in float and one `vdpbf16ps` lane step is those two
// fmas, bit for bit, measured on Zen 4 and as Intel defines it, except that it flushes
// subnormal inputs and sums (below 1.2e-38) to zero. The pair order is also the 16-lane order
// over the vectors reordered in each block of 32 as [w1 w3 .. w31 w0 w2 .. w30]
// (bf16_pairs_deinterleave), which is how the float GEMMs take BF16 weights.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ll3::kernels {

inline float float_lanes_sum(const float* v) {
  float s8[8], s4[4];
  for (int l = 0; l < 8; ++l) s8[l] = v[l] + v[l + 8];
  for (int l = 0; l < 4; ++l) s4[l] = s8[l] + s8[l + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// The reference: w(i) gives weight i as a float.
template <class W>
float float_dot_ref(W w, const float* x, int64_t n) {
  float lane[16] = {};
  for (int64_t i = 0; i < n; ++i) lane[i % 16] = std::fma(w(i), x[i], lane[i % 16]);
  return float_lanes_sum(lane);
}

// The pair order's reference: w(i) gives weight i as a float.
template <class W>
float bf16_pair_dot_ref(W w, const float* x, int64_t n) {
  float lane[16] = {};
  for (int64_t b = 0; b < n; b += 32) {
    for (int l = 0; l < 16; ++l) {
      const int64_t i = b + 2 * l;
      if (i + 1 < n) lane[l] = std::fma(w(i + 1), x[i + 1], lane[l]);
      if (i < n) lane[l] = std::fma(w(i), x[i], lane[l]);
    }
  }
  return float_lanes_sum(lane);
}

// out = in reordered for the pair order (n a multiple of 32): in each block of 32, the odd
// elements and then the even ones.
inline void bf16_pairs_deinterleave(const float* in, float* out, int64_t n) {
  for (int64_t b = 0; b < n; b += 32) {
    for (int l = 0; l < 16; ++l) {
      out[b + l] = in[b + 2 * l + 1];
      out[b + 16 + l] = in[b + 2 * l];
    }
  }
}

// A BF16 row of n elements (n a multiple of 32) as floats, deinterleaved as above: word l of a
// block holds element 2 l in its low half and 2 l + 1 in its high half, so the odd element is
// the word with its low half cleared and the even one the word shifted up. The reference of
// TypeTraits::to_float_pairs, which has AVX2 and AVX-512 versions.
inline void bf16_row_to_pairs(const void* row, float* out, int64_t n) {
  const uint8_t* src = static_cast<const uint8_t*>(row);
  for (int64_t b = 0; b < n; b += 32) {
    uint32_t words[16], odd[16], even[16];
    std::memcpy(words, src + 2 * b, sizeof(words));
    for (int l = 0; l < 16; ++l) {
      odd[l] = words[l] & 0xffff0000u;
      even[l] = words[l] << 16;
    }
    std::memcpy(out + b, odd, sizeof(odd));
    std::memcpy(out + b + 16, even, sizeof(even));
  }
}

}  // namespace ll3::kernels
