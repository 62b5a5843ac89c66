#include "kernels/gemm_f32.h"

#include "core/cpu_features.h"
#include "kernels/type_traits.h"

namespace ll3::kernels {

namespace {

// Without AVX2: one dot product per output.
void gemm_f32_dots(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, int64_t rows,
                   int64_t n, int64_t k) {
  static const TypeTraits* f32 = type_traits(DType::F32);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < n; ++t) y[t * ldy + r] = f32->dot_f32(w + r * ldw, x + t * ldx, k);
}

}  // namespace

GemmF32Fn gemm_f32() {
  static const GemmF32Fn fn = cpu_features().has_avx512_set() ? avx512::gemm_f32
                              : cpu_features().has_avx2_set()   ? avx2::gemm_f32
                                                                : gemm_f32_dots;
  return fn;
}

const GemmF32Lanes* gemm_f32_lanes() {
  static const GemmF32Lanes lanes = {avx512::pack_x_lanes, avx512::pack_w_lanes,  avx512::pack_w_f16_panels,
                                     avx512::gemm_f32_lanes, avx512::pack_x_pairs, avx512::pack_w_pairs,
                                     avx512::gemm_pairs};
  static const GemmF32Lanes* p = cpu_features().has_avx512_set() ? &lanes : nullptr;
  return p;
}

}  // namespace ll3::kernels
