// kernels/lora_kernels.h's lora_expand for one vector width V (kernels/cpu/vec_f32.h). Included
// only from files compiled for that instruction set.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/vec_f32.h"
#include "kernels/lora_kernels.h"

namespace ll3::kernels {

namespace lora_detail {

// One column j of R rows, as the reference computes it (the last panel's tail).
template <int R>
inline void expand_column(const float* panels, int64_t rank, const float* u, float s, float* const* y, int64_t j) {
  for (int i = 0; i < R; ++i) {
    float acc = 0.0f;
    for (int64_t k = 0; k < rank; ++k) acc = std::fma(u[i * rank + k], panels[lora_panel_at(j, k, rank)], acc);
    const float p = acc * s;
    y[i][j] = y[i][j] + p;
  }
}

// R rows (u: R x rank, contiguous) over [j0, j1), a panel at a time: each load of it serves the
// R rows.
template <class V, int R>
inline void expand_rows(const float* panels, int64_t rank, const float* u, float s, float* const* y, int64_t j0,
                        int64_t j1) {
  using T = typename V::T;
  constexpr int W = V::kWidth, N = kLoraPanel / W;
  static_assert(N * W == kLoraPanel);
  const T vs = V::set1(s);
  int64_t j = j0;
  for (; j + kLoraPanel <= j1; j += kLoraPanel) {
    const float* p = panels + (j / kLoraPanel) * rank * kLoraPanel;
    T acc[R][N];
    for (int i = 0; i < R; ++i) {
      for (int n = 0; n < N; ++n) acc[i][n] = V::zero();
    }
    for (int64_t k = 0; k < rank; ++k, p += kLoraPanel) {
      T bv[N];
      for (int n = 0; n < N; ++n) bv[n] = V::load(p + n * W);
      for (int i = 0; i < R; ++i) {
        const T ui = V::set1(u[i * rank + k]);
        for (int n = 0; n < N; ++n) acc[i][n] = V::fmadd(ui, bv[n], acc[i][n]);
      }
    }
    for (int i = 0; i < R; ++i) {
      for (int n = 0; n < N; ++n) V::store(y[i] + j + n * W, V::add(V::load(y[i] + j + n * W), V::mul(acc[i][n], vs)));
    }
  }
  for (; j < j1; ++j) expand_column<R>(panels, rank, u, s, y, j);
}

}  // namespace lora_detail

template <class V>
void lora_expand_impl(const float* panels, int64_t rank, const float* u, int64_t rows, float s, float* const* y_rows,
                      int64_t j0, int64_t j1) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) lora_detail::expand_rows<V, 4>(panels, rank, u + r * rank, s, y_rows + r, j0, j1);
  for (; r < rows; ++r) lora_detail::expand_rows<V, 1>(panels, rank, u + r * rank, s, y_rows + r, j0, j1);
}

}  // namespace ll3::kernels
