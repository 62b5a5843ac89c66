#include "kernels/float_dot_order.h"
#include "kernels/gemm_f32.h"

namespace ll3::kernels::ref {

void gemm_f32(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, int64_t rows,
              int64_t n, int64_t k) {
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* wr = w + r * ldw;
      y[t * ldy + r] = float_dot_ref([wr](int64_t i) { return wr[i]; }, x + t * ldx, k);
    }
  }
}

}  // namespace ll3::kernels::ref
