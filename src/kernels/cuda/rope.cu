// RoPE: one thread per rotated pair, the angle built as the CPU builds it (ops::rope_angles)
// and the rotation rounded as ops::rope does (an fma for the first product).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace ll3::cuda {

namespace {

__global__ void rope_kernel(float* x, const int32_t* pos, int64_t rows, int n_heads, int head_dim, float theta_scale,
                            const float* factors, bool half_pairs) {
  const int half = head_dim / 2;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= rows * n_heads * half) return;
  const int i = static_cast<int>(idx % half);
  const int64_t head = idx / half;  // row * n_heads + h
  const int64_t row = head / n_heads;
  float theta = static_cast<float>(pos[row]);
  for (int k = 0; k < i; ++k) theta *= theta_scale;
  const float t = factors != nullptr ? theta / factors[i] : theta;
  float sn, cs;
  sincosf(t, &sn, &cs);
  float* v = x + head * head_dim;
  const int a = half_pairs ? i : 2 * i, b = half_pairs ? i + half : 2 * i + 1;
  const float x0 = v[a], x1 = v[b];
  v[a] = fmaf(x0, cs, -(x1 * sn));
  v[b] = fmaf(x0, sn, x1 * cs);
}

}  // namespace

Status rope(float* x, const int32_t* pos, int64_t rows, int n_heads, int head_dim, float theta_scale,
            const float* factors, bool half_pairs, cudaStream_t s) {
  const int64_t n = rows * n_heads * (head_dim / 2);
  if (n <= 0) return Status();
  rope_kernel<<<blocks_for(n, 256), 256, 0, s>>>(x, pos, rows, n_heads, head_dim, theta_scale, factors, half_pairs);
  return launch_status("rope");
}

}  // namespace ll3::cuda
