// The float matrix product of prompt processing: y[t][r] = sum_k w[r][k] * x[t][k] for a block
// of weight rows (already in float) and a batch of activation rows, both contiguous along k.
// The SIMD version keeps a 4-row x 6-token tile of accumulators in registers, so each weight
// and activation load feeds several FMAs instead of one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ll3::kernels {

using GemmF32Fn = void (*)(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy,
                           int64_t rows, int64_t n, int64_t k);

namespace ref {
void gemm_f32(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, int64_t rows,
              int64_t n, int64_t k);
}
namespace avx512 {
void gemm_f32(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, int64_t rows,
              int64_t n, int64_t k);
}

// The fastest version this CPU runs.
GemmF32Fn gemm_f32();

}  // namespace ll3::kernels
