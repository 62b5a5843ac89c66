// Decode attention over the paged F16 cache: a block of 4 warps per (head, sequence); each warp
// takes every 4th position with an online softmax (running max, sum and weighted V), and the
// warps' partial results are merged at the end. Lane l holds the elements l, l + 32, ... of the
// query and of the output, so each K or V row is read as coalesced 64-byte pieces.
//
// Split (AttentionSplit, flash-decoding): a long sequence's positions go in chunks of `chunk`,
// one block each (grid z), which write their unnormalized partial (max, sum, weighted V) for a
// second kernel to merge in chunk order. How a row is split depends on its own length only, so
// it stays batch-invariant; a sequence of one chunk takes the one-block path bit for bit.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace ll3::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kMaxPerLane = 8;  // head_dim <= 256

template <int E>  // elements per lane: head_dim / 32
__global__ void attention_decode_kernel(const float* __restrict__ q, PagedKv kv, int n_heads, float scale,
                                        float* __restrict__ out, AttentionSplit split) {
  constexpr int hd = 32 * E;
  const int h = blockIdx.x, seq = blockIdx.y, c = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int kvh = h / (n_heads / kv.n_kv_heads);
  const int len = kv.seq_lens[seq];
  const int chunks = split.chunk > 0 ? (len + split.chunk - 1) / split.chunk : 1;
  if (c >= chunks) return;
  const int p0 = chunks > 1 ? c * split.chunk : 0;
  const int n = chunks > 1 ? min(len, p0 + split.chunk) : len;
  const int32_t* table = kv.block_tables + static_cast<int64_t>(seq) * kv.max_blocks;
  const float* qh = q + (static_cast<int64_t>(seq) * n_heads + h) * hd;
  float qv[E], acc[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    qv[e] = qh[lane + 32 * e];
    acc[e] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int p = p0 + warp; p < n; p += kWarps) {
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
  if (chunks > 1) {  // this chunk's partial: max, sum, then the unnormalized output
    float* part = split.partials + ((static_cast<int64_t>(seq) * n_heads + h) * split.max_chunks + c) * (hd + 2);
    if (lane == 0) {
      part[0] = mx;
      part[1] = sum;
    }
#pragma unroll
    for (int e = 0; e < E; ++e) {
      float o = 0.0f;
      for (int w = 0; w < kWarps; ++w) o = fmaf(wacc[w][lane + 32 * e], f[w], o);
      part[2 + lane + 32 * e] = o;
    }
    return;
  }
  float* oh = out + (static_cast<int64_t>(seq) * n_heads + h) * hd;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w) o = fmaf(wacc[w][lane + 32 * e], f[w], o);
    oh[lane + 32 * e] = o / sum;
  }
}

// The chunks' partials of a split (head, sequence) merged in chunk order, one warp; sequences of
// one chunk were written whole by the first kernel.
template <int E>
__global__ void attention_merge_kernel(PagedKv kv, int n_heads, AttentionSplit split, float* __restrict__ out) {
  constexpr int hd = 32 * E;
  const int h = blockIdx.x, seq = blockIdx.y, lane = threadIdx.x;
  const int chunks = (kv.seq_lens[seq] + split.chunk - 1) / split.chunk;
  if (chunks <= 1) return;
  const float* part = split.partials + (static_cast<int64_t>(seq) * n_heads + h) * split.max_chunks * (hd + 2);
  float mx = -INFINITY;
  for (int c = 0; c < chunks; ++c) mx = fmaxf(mx, part[c * (hd + 2)]);
  float sum = 0.0f, o[E];
#pragma unroll
  for (int e = 0; e < E; ++e) o[e] = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    const float* pc = part + c * (hd + 2);
    const float f = pc[1] > 0.0f ? expf(pc[0] - mx) : 0.0f;
    sum = fmaf(pc[1], f, sum);
#pragma unroll
    for (int e = 0; e < E; ++e) o[e] = fmaf(pc[2 + lane + 32 * e], f, o[e]);
  }
  float* oh = out + (static_cast<int64_t>(seq) * n_heads + h) * hd;
#pragma unroll
  for (int e = 0; e < E; ++e) oh[lane + 32 * e] = o[e] / sum;
}

}  // namespace

Status attention_decode(const float* q, const PagedKv& kv, int n_seqs, int n_heads, int head_dim, float scale,
                        float* out, cudaStream_t s, const AttentionSplit& split) {
  if (head_dim % 32 != 0 || head_dim > 32 * kMaxPerLane) {
    return Status::errorf("cuda attention: head size %d is not a multiple of 32 up to %d", head_dim, 32 * kMaxPerLane);
  }
  if (kv.n_kv_heads <= 0 || n_heads % kv.n_kv_heads != 0) {
    return Status::errorf("cuda attention: %d heads do not share %d KV heads evenly", n_heads, kv.n_kv_heads);
  }
  const bool splits = split.chunk > 0;
  if (splits && (split.max_chunks <= 0 || split.partials == nullptr || split.chunk % kWarps != 0)) {
    return Status::error("cuda attention: a split needs chunks of a multiple of 4 positions, max_chunks and partials");
  }
  if (n_seqs <= 0) return Status();
  const dim3 grid(static_cast<unsigned>(n_heads), static_cast<unsigned>(n_seqs), static_cast<unsigned>(splits ? split.max_chunks : 1));
  const dim3 merge(static_cast<unsigned>(n_heads), static_cast<unsigned>(n_seqs));
#define LL3_ATTENTION_CASE(E)                                                                   \
  case E:                                                                                       \
    attention_decode_kernel<E><<<grid, 32 * kWarps, 0, s>>>(q, kv, n_heads, scale, out, split); \
    if (splits) attention_merge_kernel<E><<<merge, 32, 0, s>>>(kv, n_heads, split, out);       \
    break;
  switch (head_dim / 32) {
    LL3_ATTENTION_CASE(1)
    LL3_ATTENTION_CASE(2)
    LL3_ATTENTION_CASE(3)
    LL3_ATTENTION_CASE(4)
    LL3_ATTENTION_CASE(5)
    LL3_ATTENTION_CASE(6)
    LL3_ATTENTION_CASE(7)
    default:
    LL3_ATTENTION_CASE(8)
  }
#undef LL3_ATTENTION_CASE
  return launch_status("attention_decode");
}

}  // namespace ll3::cuda
