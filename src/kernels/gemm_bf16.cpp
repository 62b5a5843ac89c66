#include "kernels/gemm_bf16.h"

#include <vector>

#include "core/cpu_features.h"
#include "core/half.h"

namespace ll3::kernels {

namespace ref {

void pack_x_bf16(const float* x, size_t ldx, int64_t n_valid, int64_t k, uint16_t* out) {
  for (int64_t p = 0; p < k / 2; ++p) {
    for (int64_t t = 0; t < kBf16TokenGroup; ++t) {
      for (int64_t j = 0; j < 2; ++j) {
        out[(p * kBf16TokenGroup + t) * 2 + j] = t < n_valid ? f32_to_bf16(x[t * ldx + 2 * p + j]) : 0;
      }
    }
  }
}

// Each row dequantized whole, rounded to bf16, and dotted in double: the test oracle.
void gemm_bf16(const Bf16WeightRows& w, const uint16_t* xp, int64_t n, int64_t k, float* y, size_t ldy) {
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t r = 0; r < w.nr; ++r) {
    w.to_float(w.rows + r * w.row_bytes, row.data(), k);
    for (int64_t t = 0; t < n; ++t) {
      const uint16_t* group = xp + (t / kBf16TokenGroup) * kBf16TokenGroup * k;
      const int64_t lane = t % kBf16TokenGroup;
      double s = 0;
      for (int64_t i = 0; i < k; ++i) {
        const uint16_t xv = group[((i / 2) * kBf16TokenGroup + lane) * 2 + i % 2];
        s += static_cast<double>(bf16_to_f32(f32_to_bf16(row[i]))) * bf16_to_f32(xv);
      }
      y[t * ldy + r] = static_cast<float>(s);
    }
  }
}

}  // namespace ref

const Bf16Gemm* bf16_gemm_amx() {
  static const Bf16Gemm amx_fns{amx::pack_x_bf16, amx::gemm_bf16};
  return cpu_features().amx_bf16 ? &amx_fns : nullptr;
}

}  // namespace ll3::kernels
