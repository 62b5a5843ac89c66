// What the panel decode kernels (kernels/panels.h) take from an activation block besides its
// quants: its block sums split into two byte digits, 64 * h + l, so that the K-quant mins and
// Q6_K's offset term run on the byte multipliers (vpdpbusd, vpmaddubsw) too. Prepared once per
// segment of activation blocks for all the panels; shared by the AVX2 and AVX-512 kernels.
#pragma once

#include <cstdint>

#include "kernels/quant_blocks.h"

namespace ll3::kernels {

// Q4_K: the 8 sub-block sums B_t = bsums[2t] + bsums[2t+1] (|B_t| <= 32 * 127):
// h = floor(B_t / 64) in [-64, 64), l in [0, 64), both int8.
inline void k4_sum_digits(const quant::BlockQ8_K& a, int8_t* h, int8_t* l) {
  for (int t = 0; t < 8; ++t) {
    const int b = a.bsums[2 * t] + a.bsums[2 * t + 1];
    h[t] = static_cast<int8_t>(b >> 6);
    l[t] = static_cast<int8_t>(b & 63);
  }
}

// Q6_K: the 16 group sums + 2048 (in [16, 4080]): h and l in [0, 64), unsigned bytes.
inline void q6_sum_digits(const quant::BlockQ8_K& a, uint8_t* h, uint8_t* l) {
  for (int g = 0; g < 16; ++g) {
    const int b = a.bsums[g] + 2048;
    h[g] = static_cast<uint8_t>(b >> 6);
    l[g] = static_cast<uint8_t>(b & 63);
  }
}

}  // namespace ll3::kernels
