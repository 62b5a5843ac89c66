#include <cmath>

#include "kernels/lora_kernels.h"

namespace ll3::kernels::ref {

void lora_expand(const float* panels, int64_t rank, const float* u, int64_t rows, float s, float* const* y_rows,
                 int64_t j0, int64_t j1) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = j0; j < j1; ++j) {
      float acc = 0.0f;
      for (int64_t k = 0; k < rank; ++k) acc = std::fma(u[r * rank + k], panels[lora_panel_at(j, k, rank)], acc);
      const float p = acc * s;
      y_rows[r][j] = y_rows[r][j] + p;
    }
  }
}

}  // namespace ll3::kernels::ref
