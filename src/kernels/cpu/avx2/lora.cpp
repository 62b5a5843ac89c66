#include "kernels/cpu/lora_impl.h"
#include "kernels/lora_kernels.h"

namespace ll3::kernels::avx2 {

void lora_expand(const float* panels, int64_t rank, const float* u, int64_t rows, float s, float* const* y_rows,
                 int64_t j0, int64_t j1) {
  lora_expand_impl<F32x8>(panels, rank, u, rows, s, y_rows, j0, j1);
}

}  // namespace ll3::kernels::avx2
