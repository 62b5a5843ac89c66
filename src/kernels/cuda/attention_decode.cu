// Decode attention over the paged F16 cache: a block of 4 warps per (head, sequence); each warp
// takes every 4th position with an online softmax (running max, sum and weighted V), and the
// warps' partial results are merged at the end. Lane l holds the elements l, l + 32, ... of the
// query and of the output, so each K or V row is read as coalesced 64-byte pieces.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace ll3::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kMaxPerLane = 8;  // head_dim <= 256

template <int E>  // elements per lane: head_dim / 32
__global__ void attention_decode_kernel(const float* __restrict__ q, PagedKv kv, int n_heads, float scale,
                                        float* __restrict__ out) {
  constexpr int hd = 32 * E;
  const int h = blockIdx.x, seq = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int kvh = h / (n_heads / kv.n_kv_heads);
  const int n = kv.seq_lens[seq];
  const int32_t* table = kv.block_tables + static_cast<int64_t>(seq) * kv.max_blocks;
  const float* qh = q + (static_cast<int64_t>(seq) * n_heads + h) * hd;
  float qv[E], acc[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    qv[e] = qh[lane + 32 * e];
    acc[e] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int p = warp; p < n; p += kWarps) {
    const int64_t slot = static_cast<int64_t>(table[p / kv.block_size]) * kv.block_size + p % kv.block_size;
    const int64_t off = (slot * kv.n_kv_heads + kvh) * hd;
    float dot = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) dot = fmaf(qv[e], f16_to_f32(kv.k[off + lane + 32 * e]), dot);
    const float s = warp_sum(dot) * scale;
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new), w = expf(s - m_new);
    l = l * corr + w;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[e] = fmaf(w, f16_to_f32(kv.v[off + lane + 32 * e]), acc[e] * corr);
    m = m_new;
  }
  // Merge the warps.
  __shared__ float wm[kWarps], wl[kWarps], wacc[kWarps][32 * kMaxPerLane];
  if (lane == 0) {
    wm[warp] = m;
    wl[warp] = l;
  }
#pragma unroll
  for (int e = 0; e < E; ++e) wacc[warp][lane + 32 * e] = acc[e];
  __syncthreads();
  if (warp != 0) return;
  float mx = -INFINITY;
  for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, wm[w]);
  float sum = 0.0f, f[kWarps];
  for (int w = 0; w < kWarps; ++w) {
    f[w] = wl[w] > 0.0f ? expf(wm[w] - mx) : 0.0f;  // a warp without positions adds nothing
    sum += wl[w] * f[w];
  }
  float* oh = out + (static_cast<int64_t>(seq) * n_heads + h) * hd;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w) o = fmaf(wacc[w][lane + 32 * e], f[w], o);
    oh[lane + 32 * e] = o / sum;
  }
}

}  // namespace

Status attention_decode(const float* q, const PagedKv& kv, int n_seqs, int n_heads, int head_dim, float scale,
                        float* out, cudaStream_t s) {
  if (head_dim % 32 != 0 || head_dim > 32 * kMaxPerLane) {
    return Status::errorf("cuda attention: head size %d is not a multiple of 32 up to %d", head_dim, 32 * kMaxPerLane);
  }
  if (kv.n_kv_heads <= 0 || n_heads % kv.n_kv_heads != 0) {
    return Status::errorf("cuda attention: %d heads do not share %d KV heads evenly", n_heads, kv.n_kv_heads);
  }
  if (n_seqs <= 0) return Status();
  const dim3 grid(static_cast<unsigned>(n_heads), static_cast<unsigned>(n_seqs));
  switch (head_dim / 32) {
    case 1: attention_decode_kernel<1><<<grid, 32 * kWarps, 0, s>>>(q, kv, n_heads, scale, out); break;
    case 2: attention_decode_kernel<2><<<grid, 32 * kWarps, 0, s>>>(q, kv, n_heads, scale, out); break;
    case 3: attention_decode_kernel<3><<<grid, 32 * kWarps, 0, s>>>(q, kv, n_heads, scale, out); break;
    case 4: attention_decode_kernel<4><<<grid, 32 * kWarps, 0, s>>>(q, kv, n_heads, scale, out); break;
    case 5: attention_decode_kernel<5><<<grid, 32 * kWarps, 0, s>>>(q, kv, n_heads, scale, out); break;
    case 6: attention_decode_kernel<6><<<grid, 32 * kWarps, 0, s>>>(q, kv, n_heads, scale, out); break;
    case 7: attention_decode_kernel<7><<<grid, 32 * kWarps, 0, s>>>(q, kv, n_heads, scale, out); break;
    default: attention_decode_kernel<8><<<grid, 32 * kWarps, 0, s>>>(q, kv, n_heads, scale, out); break;
  }
  return launch_status("attention_decode");
}

}  // namespace ll3::cuda
