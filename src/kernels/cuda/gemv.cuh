// The decode GEMV over any weight type: a warp per output row, each lane dequantizing 32
// consecutive elements at a time (D::load) and multiplying them with up to kMaxGemvBatch
// activation rows. Lanes read neighbouring chunks, so a warp streams the row in order.
#pragma once

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace ll3::cuda {

inline constexpr int kGemvWarps = 4;  // rows per block

template <class D, int B>
__global__ void gemv_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t rows, int64_t cols,
                            const float* __restrict__ x, float* __restrict__ y) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const uint8_t* wr = w + row * row_bytes;
  float acc[B];
#pragma unroll
  for (int b = 0; b < B; ++b) acc[b] = 0.0f;
  const int64_t chunks = cols / 32;
  for (int64_t c = lane; c < chunks; c += 32) {
    float v[32];
    D::load(wr, c, v);
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const float4* xb = reinterpret_cast<const float4*>(x + b * cols + c * 32);
      float a = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float4 q = __ldg(xb + j);
        a = fmaf(v[4 * j], q.x, a);
        a = fmaf(v[4 * j + 1], q.y, a);
        a = fmaf(v[4 * j + 2], q.z, a);
        a = fmaf(v[4 * j + 3], q.w, a);
      }
      acc[b] += a;
    }
  }
#pragma unroll
  for (int b = 0; b < B; ++b) {
    const float s = warp_sum(acc[b]);
    if (lane == 0) y[b * rows + row] = s;
  }
}

template <class D>
Status launch_gemv(const void* w, size_t row_bytes, int64_t rows, int64_t cols, const float* x, float* y, int batch,
                   cudaStream_t s) {
  if (cols % 32 != 0) return Status::errorf("cuda gemv: %lld columns are not a multiple of 32", static_cast<long long>(cols));
  if (batch < 1 || batch > kMaxGemvBatch) return Status::errorf("cuda gemv: batch %d is not in 1..%d", batch, kMaxGemvBatch);
  if (rows <= 0) return Status();
  const auto* wb = static_cast<const uint8_t*>(w);
  const unsigned grid = blocks_for(rows, kGemvWarps);
  const unsigned threads = 32 * kGemvWarps;
  switch (batch) {
    case 1: gemv_kernel<D, 1><<<grid, threads, 0, s>>>(wb, row_bytes, rows, cols, x, y); break;
    case 2: gemv_kernel<D, 2><<<grid, threads, 0, s>>>(wb, row_bytes, rows, cols, x, y); break;
    case 3: gemv_kernel<D, 3><<<grid, threads, 0, s>>>(wb, row_bytes, rows, cols, x, y); break;
    case 4: gemv_kernel<D, 4><<<grid, threads, 0, s>>>(wb, row_bytes, rows, cols, x, y); break;
    case 5: gemv_kernel<D, 5><<<grid, threads, 0, s>>>(wb, row_bytes, rows, cols, x, y); break;
    case 6: gemv_kernel<D, 6><<<grid, threads, 0, s>>>(wb, row_bytes, rows, cols, x, y); break;
    case 7: gemv_kernel<D, 7><<<grid, threads, 0, s>>>(wb, row_bytes, rows, cols, x, y); break;
    default: gemv_kernel<D, 8><<<grid, threads, 0, s>>>(wb, row_bytes, rows, cols, x, y); break;
  }
  return launch_status("gemv");
}

// The quantized types, one file each.
Status gemv_q8_0(const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch, cudaStream_t s);
Status gemv_q4_k(const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch, cudaStream_t s);

}  // namespace ll3::cuda
