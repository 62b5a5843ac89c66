// The CUDA ops: host functions that launch one kernel each on a stream, over device pointers.
// Each returns the launch's status (a bad configuration or a sticky device error becomes a
// message, never an abort). Shapes are row-major, as the CPU kernels take them; every op has
// a test against the CPU reference (tests/cuda). backend/cuda/cuda_runner.cpp strings them
// together into the forward pass.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace ll3::cuda {

// y (rows, n) = x / sqrt(mean(x^2) + eps) * w. With r: x += r first (x updated in place), the
// residual add fused into the norm.
Status rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps, cudaStream_t s);
Status add_rmsnorm(float* x, const float* r, const float* w, float* y, int64_t rows, int64_t n, float eps,
                   cudaStream_t s);

// RoPE in place on x (rows, n_heads * head_dim) at positions pos (rows, int32): angle i of a
// head is pos * theta_scale^i / factors[i] (theta_scale = base^(-2 / head_dim), built by repeated
// multiplication as the CPU does; factors may be null), pairs (2i, 2i + 1) or, with half_pairs,
// (i, i + head_dim / 2).
Status rope(float* x, const int32_t* pos, int64_t rows, int n_heads, int head_dim, float theta_scale,
            const float* factors, bool half_pairs, cudaStream_t s);

// gate = silu(gate) * up over n floats.
Status swiglu(float* gate, const float* up, int64_t n, cudaStream_t s);

// y (batch, rows) = x (batch, cols) . W^T for W (rows, cols) stored as `type` (F32, F16, BF16,
// Q8_0, Q4_K), dequantized in the kernel, F32 activations, each row computed alone: the runner's
// product for F32 weights and widths matmul_mma does not take (batch 1..8 per call).
inline constexpr int kMaxGemvBatch = 8;
bool gemv_supported(DType type);
Status gemv(DType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch,
            cudaStream_t s);

// y (n, rows) = x (n, cols) . W^T on the tensor cores for any n, batch-invariant: each element
// of y is computed the same way whatever n is and whatever the other rows of x hold (the
// runner's one product for decode and prompts; matmul_mma.cu says how). x is rounded to F16
// (BF16 for BF16 weights) as it is read; F32 sums. W is F16, BF16, Q4_K as stored, or Q8_0 in
// the device layout of q8_0_split; cols a multiple of 64 (256 for Q4_K).
bool matmul_mma_supported(DType type, int64_t cols);
Status matmul_mma(DType type, const void* w, int64_t rows, int64_t cols, const float* x, int64_t n, float* y,
                  cudaStream_t s);
// Q8_0 rows (34-byte blocks) in the device layout matmul_mma reads: the int8 levels of all
// n_rows (n_rows, cols), and separately their F16 scales (n_rows, cols / 32). On the host.
void q8_0_split(const uint8_t* blocks, int64_t n_rows, int64_t cols, uint8_t* levels, uint16_t* scales);

// cuBLAS on one stream, with a workspace allocated once (nothing is allocated per call).
struct Blas;
Result<Blas*> blas_create(cudaStream_t s);
void blas_destroy(Blas* b);
// y (n, rows) F32 = x (n, cols) . W^T for W (rows, cols), both F16 (or both BF16), on the
// tensor cores with F32 accumulation: the vendor's GEMM, which ll3-cuda-bench sets beside
// matmul_mma (the runner does not use it: its kernel choice depends on the shape).
Status gemm_half(Blas* b, bool bf16, const uint16_t* w, int64_t rows, int64_t cols, const uint16_t* x, int64_t n,
                 float* y);

// x += r over n floats.
Status add(float* x, const float* r, int64_t n, cudaStream_t s);
// out (n_rows, cols) = rows rows[i] of x (., cols).
Status gather_rows(const float* x, const int32_t* rows, int64_t n_rows, int64_t cols, float* out, cudaStream_t s);
// out = x rounded to F16 (or BF16), n elements, round to nearest even.
Status to_half(const float* x, uint16_t* out, int64_t n, bool bf16, cudaStream_t s);
// Row r of k and of v (rows, row_elems) F32, rounded to F16, into cache slot slots[r] (block *
// block_size + position in the block) of one layer's caches [slot][row_elems].
Status kv_store(const float* k, const float* v, const int32_t* slots, int64_t rows, int64_t row_elems, uint16_t* k_cache,
                uint16_t* v_cache, cudaStream_t s);

// Decode attention over a paged F16 cache: one query token per sequence. q (n_seqs, n_heads,
// head_dim); k_cache / v_cache [n_blocks][block_size][n_kv_heads][head_dim] F16; block_tables
// (n_seqs, max_blocks) int32; seq_lens (n_seqs) int32, the positions each query attends to;
// out (n_seqs, n_heads, head_dim). head_dim a multiple of 32, at most 256.
struct PagedKv {
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  const int32_t* block_tables = nullptr;
  const int32_t* seq_lens = nullptr;
  int max_blocks = 0, block_size = 16, n_kv_heads = 0;
};
// Split-K over positions (flash-decoding) for long sequences: chunks of `chunk` positions (a
// multiple of 4; 0: no split), each a block of its own, merged by a second kernel through
// `partials` (n_seqs * n_heads * max_chunks * (head_dim + 2) floats); max_chunks covers the
// longest sequence. A sequence of one chunk is computed as without a split, bit for bit.
struct AttentionSplit {
  int chunk = 0;
  int max_chunks = 0;
  float* partials = nullptr;
};
Status attention_decode(const float* q, const PagedKv& kv, int n_seqs, int n_heads, int head_dim, float scale,
                        float* out, cudaStream_t s, const AttentionSplit& split = {});

// out[r] = argmax of logits row r (rows, n_vocab), ties to the lower id: greedy sampling on the
// device, so that only token ids come back.
Status argmax(const float* logits, int64_t rows, int64_t n_vocab, int32_t* out, cudaStream_t s);

// Reads `bytes` (a multiple of 16) at p once, folding them into out[0 .. blocks) (zeroed by the
// caller): the device's read bandwidth, which decode is bound by.
Status read_probe(const void* p, size_t bytes, uint32_t* out, int blocks, cudaStream_t s);

}  // namespace ll3::cuda
