// The read bandwidth probe: every byte of a buffer read once in 16-byte loads, folded into one
// word per block so that the reads cannot be dropped. A decode step only reads its weights, so
// this, not a copy (which writes as much as it reads), is the bound decode is measured against.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace ll3::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void read_kernel(const uint4* __restrict__ p, int64_t n, uint32_t* __restrict__ out) {
  uint32_t acc = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const uint4 v = __ldcs(p + i);  // streaming: do not keep it in L2 for the next pass
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) atomicXor(out + blockIdx.x, acc);
}

}  // namespace

Status read_probe(const void* p, size_t bytes, uint32_t* out, int blocks, cudaStream_t s) {
  if (bytes % 16 != 0 || blocks <= 0) return Status::error("cuda read_probe: bytes a multiple of 16, blocks > 0");
  read_kernel<<<blocks, kThreads, 0, s>>>(static_cast<const uint4*>(p), static_cast<int64_t>(bytes / 16), out);
  return launch_status("read_probe");
}

}  // namespace ll3::cuda
