// What the panel decode kernels (kernels/panels.h) take from an activation row besides its
// quants, one entry per activation block, made once per row by kernels::panel_act (panels.cpp)
// and read by every call on every thread: a matmul hands its panels out in many runs, and each
// run preparing them again cost 1-2% of Q8_0's decode kernel time. Shared by the AVX2 and
// AVX-512 kernels.
#pragma once

#include <cstdint>

namespace ll3::kernels {

// Q4_K: the 8 sub-block sums B_t = bsums[2t] + bsums[2t+1] (|B_t| <= 32 * 127) split into two
// byte digits, B_t = 64 h_t + l_t with h_t in [-64, 64), l_t in [0, 64), so that the mins term
// runs on the byte multipliers (vpdpbusd, vpmaddubsw).
struct K4PanelAct {
  int8_t h[8], l[8];
};

// Q6_K: the 16 group sums + 2048 (in [16, 4080]) as 64 h_g + l_g, h and l in [0, 64): the
// offset term (-32 per weight) on the byte multipliers.
struct Q6PanelAct {
  uint8_t h[16], l[16];
};

// Kernels that need nothing besides the quants (for_panel_tiles then makes nothing).
struct NoPanelAct {};

// Q8_0: the activation block's scale as float and 128 times the sum of its quants (the panels
// store the weights + 128).
struct Q80PanelAct {
  float d;
  int32_t sum128;
};

}  // namespace ll3::kernels
