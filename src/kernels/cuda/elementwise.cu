// The small elementwise ops of the GPU forward pass: the residual add, row gathers, F32 to
// F16 / BF16 conversion (the tensor-core GEMM's input) and the store of new K / V rows into the
// paged F16 cache.
#include <cuda_bf16.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace ll3::cuda {

namespace {

__global__ void add_kernel(float* x, const float* r, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += r[i];
}

__global__ void gather_rows_kernel(const float* x, const int32_t* rows, int64_t n_rows, int64_t cols, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  out[i] = x[static_cast<int64_t>(rows[r]) * cols + c];
}

template <bool kBf16>
__global__ void to_half_kernel(const float* x, uint16_t* out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = kBf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x[i])) : __half_as_ushort(__float2half_rn(x[i]));
}

// Element e of row r: K and V rows (rows, row_elems) F32 into cache slot slots[r], F16.
__global__ void kv_store_kernel(const float* k, const float* v, const int32_t* slots, int64_t rows, int64_t row_elems,
                                uint16_t* kc, uint16_t* vc) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * row_elems) return;
  const int64_t r = i / row_elems, e = i % row_elems;
  const int64_t dst = static_cast<int64_t>(slots[r]) * row_elems + e;
  kc[dst] = __half_as_ushort(__float2half_rn(k[i]));
  vc[dst] = __half_as_ushort(__float2half_rn(v[i]));
}

}  // namespace

Status add(float* x, const float* r, int64_t n, cudaStream_t s) {
  if (n <= 0) return Status();
  add_kernel<<<blocks_for(n, 256), 256, 0, s>>>(x, r, n);
  return launch_status("add");
}

Status gather_rows(const float* x, const int32_t* rows, int64_t n_rows, int64_t cols, float* out, cudaStream_t s) {
  if (n_rows <= 0 || cols <= 0) return Status();
  gather_rows_kernel<<<blocks_for(n_rows * cols, 256), 256, 0, s>>>(x, rows, n_rows, cols, out);
  return launch_status("gather_rows");
}

Status to_half(const float* x, uint16_t* out, int64_t n, bool bf16, cudaStream_t s) {
  if (n <= 0) return Status();
  if (bf16) {
    to_half_kernel<true><<<blocks_for(n, 256), 256, 0, s>>>(x, out, n);
  } else {
    to_half_kernel<false><<<blocks_for(n, 256), 256, 0, s>>>(x, out, n);
  }
  return launch_status("to_half");
}

Status kv_store(const float* k, const float* v, const int32_t* slots, int64_t rows, int64_t row_elems, uint16_t* k_cache,
                uint16_t* v_cache, cudaStream_t s) {
  if (rows <= 0 || row_elems <= 0) return Status();
  kv_store_kernel<<<blocks_for(rows * row_elems, 256), 256, 0, s>>>(k, v, slots, rows, row_elems, k_cache, v_cache);
  return launch_status("kv_store");
}

}  // namespace ll3::cuda
