// Greedy sampling on the device: the argmax of each logits row (ties to the lower id), so that
// one int32 per sequence crosses PCIe instead of the 128k-float row.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace ll3::cuda {

namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ bool better(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }

__global__ void argmax_kernel(const float* __restrict__ logits, int64_t n_vocab, int32_t* __restrict__ out) {
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * n_vocab;
  float bv = -INFINITY;
  int bi = 0x7fffffff;
  for (int64_t i = threadIdx.x; i < n_vocab; i += kThreads) {
    const float v = row[i];
    if (better(v, static_cast<int>(i), bv, bi)) {
      bv = v;
      bi = static_cast<int>(i);
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (better(ov, oi, bv, bi)) {
      bv = ov;
      bi = oi;
    }
  }
  __shared__ float sv[kThreads / 32];
  __shared__ int si[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  if (lane == 0) {
    sv[warp] = bv;
    si[warp] = bi;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kThreads / 32; ++w) {
    if (better(sv[w], si[w], bv, bi)) {
      bv = sv[w];
      bi = si[w];
    }
  }
  out[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;  // an all-NaN row gives 0
}

}  // namespace

Status argmax(const float* logits, int64_t rows, int64_t n_vocab, int32_t* out, cudaStream_t s) {
  if (rows <= 0) return Status();
  if (n_vocab <= 0 || n_vocab > 0x7ffffffe) return Status::errorf("cuda argmax: vocabulary of %lld", static_cast<long long>(n_vocab));
  argmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(logits, n_vocab, out);
  return launch_status("argmax");
}

}  // namespace ll3::cuda
