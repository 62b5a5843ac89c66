// SwiGLU, elementwise: gate = gate / (1 + exp(-gate)) * up.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace ll3::cuda {

namespace {

__global__ void swiglu_kernel(float* gate, const float* up, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  gate[i] = g / (1.0f + expf(-g)) * up[i];
}

}  // namespace

Status swiglu(float* gate, const float* up, int64_t n, cudaStream_t s) {
  if (n <= 0) return Status();
  swiglu_kernel<<<blocks_for(n, 256), 256, 0, s>>>(gate, up, n);
  return launch_status("swiglu");
}

}  // namespace ll3::cuda
