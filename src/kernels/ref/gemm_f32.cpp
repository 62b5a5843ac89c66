#include "kernels/gemm_f32.h"

namespace ll3::kernels::ref {

void gemm_f32(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, int64_t rows,
              int64_t n, int64_t k) {
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      float s = 0.0f;
      for (int64_t i = 0; i < k; ++i) s += w[r * ldw + i] * x[t * ldx + i];
      y[t * ldy + r] = s;
    }
  }
}

}  // namespace ll3::kernels::ref
