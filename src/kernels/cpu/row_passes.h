// The batched row kernels (TypeTraits::dot_q_rows) of every instruction set: one weight row
// against nx activation rows, taken in passes of at most kMaxRowPass rows so that a pass's
// accumulators stay in registers while each weight block is unpacked once for all of them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/panels.h"

namespace ll3::kernels {

constexpr int kMaxRowPass = 4;

// Activation row x of a batch `stride` bytes apart.
template <class A>
inline const A* act_row(const void* xq, size_t stride, int64_t x) {
  return reinterpret_cast<const A*>(static_cast<const uint8_t*>(xq) + x * stride);
}

// K<NX>::run(row, xq, stride, n, y, y_stride) for NX = 1 .. kMaxRowPass rows; this splits nx
// rows into such passes.
template <template <int> class K>
void run_row_passes(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y,
                    size_t y_stride) {
  int64_t x = 0;
  for (; x + kMaxRowPass <= nx; x += kMaxRowPass) {
    K<kMaxRowPass>::run(row, act_row<uint8_t>(xq, stride, x), stride, n, y + x * y_stride, y_stride);
  }
  const uint8_t* rest = act_row<uint8_t>(xq, stride, x);
  static_assert(kMaxRowPass == 4, "the remainder cases below cover 1 .. kMaxRowPass - 1");
  switch (nx - x) {
    case 3: K<3>::run(row, rest, stride, n, y + x * y_stride, y_stride); break;
    case 2: K<2>::run(row, rest, stride, n, y + x * y_stride, y_stride); break;
    case 1: K<1>::run(row, rest, stride, n, y + x * y_stride, y_stride); break;
    default: break;
  }
}

// The same for kernels over npanels panels of panel_bytes each (TypeTraits::dot_q_panel_rows):
// K<NX>::run(panels, npanels, xq, stride, n, y, y_stride). With more than one pass the panels
// go in runs of about 256 KB, every pass over one run before the next, so that the passes
// after the first read the run from L2, not memory (pp8: Q4_K_M 121 -> 135 t/s, Q8_0 79 -> 88).
template <template <int> class K>
void run_panel_row_passes(const void* panels, int64_t npanels, size_t panel_bytes, const void* xq, size_t stride,
                          int64_t nx, int64_t n, float* y, size_t y_stride) {
  const int64_t run = nx <= kMaxRowPass ? npanels : std::max<int64_t>(1, static_cast<int64_t>((size_t{256} << 10) / panel_bytes));
  for (int64_t p0 = 0; p0 < npanels; p0 += run) {
    const uint8_t* p = static_cast<const uint8_t*>(panels) + p0 * panel_bytes;
    const int64_t np = std::min(run, npanels - p0);
    float* yp = y + p0 * kPanelRows;
    int64_t x = 0;
    for (; x + kMaxRowPass <= nx; x += kMaxRowPass) {
      K<kMaxRowPass>::run(p, np, act_row<uint8_t>(xq, stride, x), stride, n, yp + x * y_stride, y_stride);
    }
    const uint8_t* rest = act_row<uint8_t>(xq, stride, x);
    switch (nx - x) {
      case 3: K<3>::run(p, np, rest, stride, n, yp + x * y_stride, y_stride); break;
      case 2: K<2>::run(p, np, rest, stride, n, yp + x * y_stride, y_stride); break;
      case 1: K<1>::run(p, np, rest, stride, n, yp + x * y_stride, y_stride); break;
      default: break;
    }
  }
}

// The tiled prompt kernels (avx512/quant_panel_rows.cpp, avx2/quant_panel_rows.cpp): a weight
// block unpacked once is applied to a tile of kTile tokens in register passes.
constexpr int kTile = 16;  // tokens whose accumulators one pass over a panel's blocks updates
// With more than one tile, the panels go in runs of about this many bytes, every tile over one
// run before the next, so that the tiles after the first read the run from L2, not memory.
constexpr size_t kRunBytes = size_t{256} << 10;

// pass.template operator()<NX, first>(x) for the tokens [x, nt): passes of kP tokens, then at
// most one of each smaller power of two; first: the pass at token 0, which prefetches.
template <int kP, class F>
inline void token_passes(int nt, F&& pass, int x = 0) {
  for (; x + kP <= nt; x += kP) {
    x == 0 ? pass.template operator()<kP, true>(x) : pass.template operator()<kP, false>(x);
  }
  if constexpr (kP > 1) {
    if (x < nt) token_passes<kP / 2>(nt, pass, x);
  }
}

// The loops of a tiled prompt kernel around its work on one panel: runs of panels (kRunBytes,
// when there is more than one tile), tiles of kTile tokens, and segments of kSeg activation
// blocks whose side data (a D per block: D::make where D has one, side data only a batch
// kernel needs; else panel_act of weight type t) is made once per tile and segment. Then
// panel(p, x0, nt, arow, digits, s0, s1) for every panel p of the run, with arow[x] the
// activation blocks (type A) of token x0 + x and digits[x][i - s0] block i's side data, for
// the blocks [s0, s1) of the segment.
template <class A, class D, int64_t kSeg, class F>
void for_panel_tiles(DType t, int64_t npanels, size_t panel_bytes, const void* xq, size_t stride, int64_t nx,
                     int64_t nb, int64_t block_cols, F&& panel) {
  const int64_t run =
      nx <= kTile ? npanels : std::max<int64_t>(1, static_cast<int64_t>(kRunBytes / panel_bytes));
  alignas(64) D digits[kTile][kSeg];
  const A* arow[kTile];
  for (int64_t p0 = 0; p0 < npanels; p0 += run) {
    const int64_t p1 = std::min(npanels, p0 + run);
    for (int64_t x0 = 0; x0 < nx; x0 += kTile) {
      const int nt = static_cast<int>(std::min<int64_t>(kTile, nx - x0));
      for (int x = 0; x < nt; ++x) arow[x] = act_row<A>(xq, stride, x0 + x);
      for (int64_t s0 = 0; s0 < nb; s0 += kSeg) {
        const int64_t s1 = std::min(nb, s0 + kSeg);
        if constexpr (requires(const A* a, D* d) { D::make(a, int64_t{}, d); }) {
          for (int x = 0; x < nt; ++x) D::make(arow[x] + s0, s1 - s0, digits[x]);
        } else if constexpr (!std::is_empty_v<D>) {
          for (int x = 0; x < nt; ++x) panel_act(t, arow[x] + s0, (s1 - s0) * block_cols, digits[x]);
        }
        for (int64_t p = p0; p < p1; ++p) panel(p, x0, nt, arow, digits, s0, s1);
      }
    }
  }
}

}  // namespace ll3::kernels
