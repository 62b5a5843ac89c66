// The batch-invariant product on the tensor cores: y (n, rows) = x (n, cols) . W^T for any n,
// one kernel for a decode step of one sequence and a prompt of hundreds of tokens alike.
//
// Why one kernel: a server steps many sequences together, and how many share a step depends on
// the traffic. If the arithmetic changed with the step's size (a GEMV for a few rows, cuBLAS for
// more, cuBLAS's own kernel choice by shape), a request's tokens would depend on who else was
// being served (`ll3 bench-serve` saw streamed answers differ from the same requests run alone).
// Here every output element y[t][r] is the same sequence of operations for every n: the same
// 32-wide chunks of K in the same order, the same mma.sync instructions (an element of an MMA's
// result depends on its own row and column only), the same fixed split of K over the warps of a
// block, summed in warp order. Neither n nor the other rows of x change a bit of it.
//
// Layout of the work: a warp owns 16 weight rows and a slab of up to 64 tokens (8 MMA tiles of
// 8); K is split over the warps of a block (split_for: from the matrix shape alone). Weights are
// read straight from global memory into MMA A fragments, each thread taking 8 consecutive K of
// a row per 32-chunk (a 16-byte load for F16); the K order inside an MMA is permuted to match,
// in A and B alike, which leaves each dot product unchanged. Activations are F32 in memory and
// rounded to F16 (BF16 for BF16 weights) as they are loaded. Quantized weights enter the MMA as
// their integer levels, exact in F16, and the chunk's scale is applied to its F32 partial sum:
//   Q8_0: y += d * sum(q x)                 Q4_K, Q5_K: y += (d sc) * sum(q x) - (dmin m) * sum(x)
//   Q6_K: y += (d sc1) * sum over the first 16 (q x) + (d sc2) * sum over the second 16
// where sum(x) comes from one more MMA with an all-ones A.
#include <cuda_bf16.h>

#include <cstring>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/quant_blocks.h"

namespace ll3::cuda {

namespace {

constexpr int kTileTokens = 8, kMaxTiles = 8, kSlabTokens = kTileTokens * kMaxTiles;
constexpr int kQ4KBytes = sizeof(quant::BlockQ4_K), kQ5KBytes = sizeof(quant::BlockQ5_K), kQ6KBytes = sizeof(quant::BlockQ6_K);
constexpr int kQ8Bytes = sizeof(quant::BlockQ8_0);

// D += A . B for one m16n8k16 tile, F32 accumulators.
template <bool kBf16>
__device__ __forceinline__ void mma(float c[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ uint32_t pack2(float a, float b, bool bf16) {
  if (bf16) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  const __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Four bytes b0..b3 (each 0..255) as two F16 pairs (1024 + b0, 1024 + b1), (1024 + b2, 1024 + b3),
// minus `bias`: exact small integers.
__device__ __forceinline__ void bytes_to_half(uint32_t w, float bias, uint32_t& lo, uint32_t& hi) {
  const __half2 b = __float2half2_rn(bias);
  __half2 l, h;
  const uint32_t pl = __byte_perm(w, 0x64646464u, 0x5140), ph = __byte_perm(w, 0x64646464u, 0x7362);
  l = __hsub2(*reinterpret_cast<const __half2*>(&pl), b);
  h = __hsub2(*reinterpret_cast<const __half2*>(&ph), b);
  lo = *reinterpret_cast<const uint32_t*>(&l);
  hi = *reinterpret_cast<const uint32_t*>(&h);
}

// What a thread holds of its two rows (g and g + 8 of the warp's 16) for one step of 64 K (two
// 32-chunks): 8 consecutive K of each row per chunk as four packed pairs, and for the quantized
// types each chunk's scale (and Q4_K's min).
struct Frag {
  uint32_t a[2][2][4];  // [chunk][row g, g + 8][pair]
  float scale[2][2], min[2][2];
  float scale2[2][2];  // kHalves: the scale of the chunk's second 16 weights (scale: its first 16)
};

// The weight types. load() reads step s (K 64 s .. 64 s + 63) of row `row` for thread group
// position q (K 8q .. 8q + 7 of each chunk; with kHalves, whose scales cover 16 weights, K 4q ..
// 4q + 3 and 16 + 4q .. 16 + 4q + 3, so that each of a chunk's two MMAs sums one 16 alone).
struct HalfW {  // F16 or BF16 as stored
  static constexpr bool kScaled = false, kHalves = false;
  __device__ static void load(const uint8_t* w, int64_t rows, int64_t cols, int64_t row, int64_t s, int q, int r,
                              Frag& f) {
    const uint4* p = reinterpret_cast<const uint4*>(w + (row * cols + s * 64 + 8 * q) * 2);
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const uint4 v = __ldg(p + 4 * c);  // chunk c starts 32 halves (4 uint4) later
      f.a[c][r][0] = v.x, f.a[c][r][1] = v.y, f.a[c][r][2] = v.z, f.a[c][r][3] = v.w;
    }
  }
};

// Q8_0 in the device layout (q8_0_split): int8 levels (rows, cols), then F16 scales (rows, cols / 32).
struct Q8W {
  static constexpr bool kScaled = true, kMin = false, kHalves = false;
  __device__ static void load(const uint8_t* w, int64_t rows, int64_t cols, int64_t row, int64_t s, int q, int r,
                              Frag& f) {
    const uint8_t* qs = w + row * cols + s * 64 + 8 * q;
    const auto* sc = reinterpret_cast<const uint16_t*>(w + rows * cols) + row * (cols / 32) + s * 2;
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(qs + 32 * c));
      bytes_to_half(v.x ^ 0x80808080u, 1152.0f, f.a[c][r][0], f.a[c][r][1]);
      bytes_to_half(v.y ^ 0x80808080u, 1152.0f, f.a[c][r][2], f.a[c][r][3]);
      f.scale[c][r] = f16_to_f32(__ldg(sc + c));
    }
  }
};

// Q4_K and Q5_K as stored: a step is one pair of sub-blocks (2p, 2p + 1) of a super-block, whose
// 32 bytes of qs hold sub-block 2p in the low nibbles and 2p + 1 in the high ones. Q5_K adds a
// fifth bit per weight, bit 2p + c of qh[j] for weight j of sub-block 2p + c: levels 0..31, as
// exact in F16 as Q4_K's 0..15. Both share the 6-bit scales and mins.
template <bool kFifthBit>
struct K45W {
  static constexpr bool kScaled = true, kMin = true, kHalves = false;
  static constexpr int kBytes = kFifthBit ? kQ5KBytes : kQ4KBytes;
  static constexpr int kQs = kFifthBit ? 48 : 16;  // after d, dmin, scales[12] (and qh[32])
  __device__ static void load(const uint8_t* w, int64_t rows, int64_t cols, int64_t row, int64_t s, int q, int r,
                              Frag& f) {
    const uint8_t* b = w + row * (cols / 256) * kBytes + (s / 4) * kBytes;
    const int p = static_cast<int>(s % 4);
    const uint4 head = __ldg(reinterpret_cast<const uint4*>(b));
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(b + kQs + 32 * p + 8 * q));
    uint2 h = {0, 0};  // qh[8q .. 8q + 7]
    if constexpr (kFifthBit) h = __ldg(reinterpret_cast<const uint2*>(b + 16 + 8 * q));
    uint8_t sc[12];
    memcpy(sc, reinterpret_cast<const uint8_t*>(&head) + 4, 12);
    const float d = f16_to_f32(static_cast<uint16_t>(head.x & 0xFFFF)), dmin = f16_to_f32(static_cast<uint16_t>(head.x >> 16));
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      uint8_t sv, mv;
      quant::k4_scale_min(2 * p + c, sc, &sv, &mv);
      f.scale[c][r] = __fmul_rn(d, static_cast<float>(sv));
      f.min[c][r] = __fmul_rn(dmin, static_cast<float>(mv));
      uint32_t lo = (c == 0 ? v.x : v.x >> 4) & 0x0F0F0F0Fu, hi = (c == 0 ? v.y : v.y >> 4) & 0x0F0F0F0Fu;
      if constexpr (kFifthBit) {
        lo |= ((h.x >> (2 * p + c)) & 0x01010101u) << 4;
        hi |= ((h.y >> (2 * p + c)) & 0x01010101u) << 4;
      }
      bytes_to_half(lo, 1024.0f, f.a[c][r][0], f.a[c][r][1]);
      bytes_to_half(hi, 1024.0f, f.a[c][r][2], f.a[c][r][3]);
    }
  }
};
using Q4KW = K45W<false>;
using Q5KW = K45W<true>;

// Q6_K as stored (210-byte blocks, so 2-byte loads): weight e = 128 n + 32 j + l of a
// super-block is (ql[64 n + 32 (j & 1) + l] >> 4 (j >> 1)) & 15 | ((qh[32 n + l] >> 2 j) & 3) << 4,
// minus 32, times d * scales[e / 16]. A step is one pair j = 2 (s % 2), + 1 of half n = s % 4 / 2;
// its chunks' 16s have a scale each (kHalves).
struct Q6KW {
  static constexpr bool kScaled = true, kHalves = true;
  __device__ static uint32_t bytes4(const uint8_t* p) {  // p 2-byte aligned
    const auto* h = reinterpret_cast<const uint16_t*>(p);
    return static_cast<uint32_t>(__ldg(h)) | static_cast<uint32_t>(__ldg(h + 1)) << 16;
  }
  __device__ static void load(const uint8_t* w, int64_t rows, int64_t cols, int64_t row, int64_t s, int q, int r,
                              Frag& f) {
    const uint8_t* b = w + row * (cols / 256) * kQ6KBytes + (s / 4) * kQ6KBytes;
    const int n = static_cast<int>(s % 4) / 2;
    const float d = f16_to_f32(__ldg(reinterpret_cast<const uint16_t*>(b + 208)));
    const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int j = 2 * static_cast<int>(s % 2) + c;
      const uint8_t* ql = b + 64 * n + 32 * (j & 1) + 4 * q;
      const uint8_t* qh = b + 128 + 32 * n + 4 * q;
      const int lo_shift = 4 * (j >> 1), hi_shift = 2 * j;
      const uint32_t first = ((bytes4(ql) >> lo_shift) & 0x0F0F0F0Fu) | (((bytes4(qh) >> hi_shift) & 0x03030303u) << 4);
      const uint32_t second =
          ((bytes4(ql + 16) >> lo_shift) & 0x0F0F0F0Fu) | (((bytes4(qh + 16) >> hi_shift) & 0x03030303u) << 4);
      bytes_to_half(first, 1056.0f, f.a[c][r][0], f.a[c][r][1]);  // levels 0..63, less 32
      bytes_to_half(second, 1056.0f, f.a[c][r][2], f.a[c][r][3]);
      const int sub = 8 * n + 2 * j;  // the 16s of weights 32 j .. 32 j + 15 and 32 j + 16 .. 32 j + 31
      f.scale[c][r] = __fmul_rn(d, static_cast<float>(__ldg(sc + sub)));
      f.scale2[c][r] = __fmul_rn(d, static_cast<float>(__ldg(sc + sub + 1)));
    }
  }
};

// Block: `split` warps on the same 16 rows and token slab, warp w taking steps
// [steps w / split, steps (w + 1) / split). blockIdx.x = row group * slabs + slab, so that the
// blocks re-reading one row group's weights for other slabs run together (the L2 serves them).
template <class W, bool kBf16, int kTiles>
__global__ void matmul_mma_kernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols, const float* __restrict__ x,
                                  int64_t n, float* __restrict__ y, int slabs, int split) {
  extern __shared__ float part[];  // [split - 1][kTiles][32][4]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int64_t group = blockIdx.x / slabs, slab = blockIdx.x % slabs;
  const int64_t row0 = group * 16;
  const int64_t rg = min(row0 + g, rows - 1), rg8 = min(row0 + g + 8, rows - 1);
  const int64_t t0 = slab * kSlabTokens;
  const int64_t steps = cols / 64, s_begin = steps * warp / split, s_end = steps * (warp + 1) / split;
  // Token g of each tile, as this thread loads it for the B fragment (clamped: columns past n
  // compute on a copy of the last row and are not stored).
  const float* xt[kTiles];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) xt[t] = x + min(t0 + t * kTileTokens + g, n - 1) * cols + (W::kHalves ? 4 : 8) * q;
  const uint32_t ones = kBf16 ? 0x3F803F80u : 0x3C003C00u;

  float acc[kTiles][4];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;

  Frag cur, nxt;
  if (s_begin < s_end) {
    W::load(w, rows, cols, rg, s_begin, q, 0, cur);
    W::load(w, rows, cols, rg8, s_begin, q, 1, cur);
  }
  for (int64_t s = s_begin; s < s_end; ++s) {
    if (s + 1 < s_end) {  // the next step's weights in flight while this one multiplies
      W::load(w, rows, cols, rg, s + 1, q, 0, nxt);
      W::load(w, rows, cols, rg8, s + 1, q, 1, nxt);
    }
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const float4* xp = reinterpret_cast<const float4*>(xt[t] + s * 64 + 32 * c);
        const float4 u = __ldg(xp), v = __ldg(xp + (W::kHalves ? 4 : 1));  // the second four: K + 4, or + 16
        const uint32_t b0 = pack2(u.x, u.y, kBf16), b1 = pack2(u.z, u.w, kBf16), b2 = pack2(v.x, v.y, kBf16),
                       b3 = pack2(v.z, v.w, kBf16);
        const uint32_t* ag = cur.a[c][0];
        const uint32_t* ag8 = cur.a[c][1];
        if constexpr (!W::kScaled) {
          mma<kBf16>(acc[t], ag[0], ag8[0], ag[1], ag8[1], b0, b1);
          mma<kBf16>(acc[t], ag[2], ag8[2], ag[3], ag8[3], b2, b3);
        } else if constexpr (W::kHalves) {  // each 16 with its own scale
          float p[4] = {0.0f, 0.0f, 0.0f, 0.0f}, p2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          mma<false>(p, ag[0], ag8[0], ag[1], ag8[1], b0, b1);
          mma<false>(p2, ag[2], ag8[2], ag[3], ag8[3], b2, b3);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            acc[t][i] = fmaf(cur.scale[c][i >> 1], p[i], acc[t][i]);
            acc[t][i] = fmaf(cur.scale2[c][i >> 1], p2[i], acc[t][i]);
          }
        } else {
          float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          mma<false>(p, ag[0], ag8[0], ag[1], ag8[1], b0, b1);
          mma<false>(p, ag[2], ag8[2], ag[3], ag8[3], b2, b3);
          acc[t][0] = fmaf(cur.scale[c][0], p[0], acc[t][0]);
          acc[t][1] = fmaf(cur.scale[c][0], p[1], acc[t][1]);
          acc[t][2] = fmaf(cur.scale[c][1], p[2], acc[t][2]);
          acc[t][3] = fmaf(cur.scale[c][1], p[3], acc[t][3]);
          if constexpr (W::kMin) {
            float sx[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // sum of the chunk's activations per token
            mma<false>(sx, ones, ones, ones, ones, b0, b1);
            mma<false>(sx, ones, ones, ones, ones, b2, b3);
            acc[t][0] = fmaf(-cur.min[c][0], sx[0], acc[t][0]);
            acc[t][1] = fmaf(-cur.min[c][0], sx[1], acc[t][1]);
            acc[t][2] = fmaf(-cur.min[c][1], sx[2], acc[t][2]);
            acc[t][3] = fmaf(-cur.min[c][1], sx[3], acc[t][3]);
          }
        }
      }
    }
    cur = nxt;
  }

  // The warps' partial sums, added in warp order.
  if (warp > 0) {
    float* mine = part + static_cast<size_t>(warp - 1) * kTiles * 128;
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
#pragma unroll
      for (int i = 0; i < 4; ++i) mine[(t * 32 + lane) * 4 + i] = acc[t][i];
    }
  }
  __syncthreads();
  if (warp != 0) return;
  for (int o = 1; o < split; ++o) {
    const float* other = part + static_cast<size_t>(o - 1) * kTiles * 128;
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][i] += other[(t * 32 + lane) * 4 + i];
    }
  }
  // c0, c1: row g, tokens 2q, 2q + 1 of the tile; c2, c3: row g + 8.
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = row0 + g + (i >= 2 ? 8 : 0), tok = t0 + t * kTileTokens + 2 * q + (i & 1);
      if (row < rows && tok < n) y[tok * rows + row] = acc[t][i];
    }
  }
}

// Warps per block splitting K: enough warps in all to keep the memory system busy (about 2048,
// whatever the card: the split must not depend on n, and is best not to depend on the device)
// while each warp keeps at least 4 steps of 64.
int split_for(int64_t rows, int64_t cols) {
  const int64_t groups = (rows + 15) / 16, steps = cols / 64;
  int split = 1;
  while (split < 8 && groups * split < 2048 && steps / (2 * split) >= 4) split *= 2;
  return split;
}

template <class W, bool kBf16, int kTiles>
void launch_tiles(const uint8_t* w, int64_t rows, int64_t cols, const float* x, int64_t n, float* y, int slabs, int split,
                  unsigned grid, cudaStream_t s) {
  const size_t smem = static_cast<size_t>(split - 1) * kTiles * 128 * sizeof(float);
  matmul_mma_kernel<W, kBf16, kTiles><<<grid, 32 * split, smem, s>>>(w, rows, cols, x, n, y, slabs, split);
}

template <class W, bool kBf16>
Status launch(const void* w, int64_t rows, int64_t cols, const float* x, int64_t n, float* y, cudaStream_t s) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const int split = split_for(rows, cols);
  const int64_t groups = (rows + 15) / 16;
  // Full slabs of 64 tokens, then the rest in one launch of as many tiles as it needs: the tile
  // count changes only which columns a warp computes, never how.
  const int64_t full = n / kSlabTokens, rest = n % kSlabTokens;
  if (full > 0) {
    launch_tiles<W, kBf16, kMaxTiles>(wb, rows, cols, x, full * kSlabTokens, y, static_cast<int>(full), split,
                                      static_cast<unsigned>(groups * full), s);
  }
  if (rest > 0) {
    const float* xr = x + full * kSlabTokens * cols;
    float* yr = y + full * kSlabTokens * rows;
    const unsigned grid = static_cast<unsigned>(groups);
    switch ((rest + kTileTokens - 1) / kTileTokens) {
      case 1: launch_tiles<W, kBf16, 1>(wb, rows, cols, xr, rest, yr, 1, split, grid, s); break;
      case 2: launch_tiles<W, kBf16, 2>(wb, rows, cols, xr, rest, yr, 1, split, grid, s); break;
      case 3: launch_tiles<W, kBf16, 3>(wb, rows, cols, xr, rest, yr, 1, split, grid, s); break;
      case 4: launch_tiles<W, kBf16, 4>(wb, rows, cols, xr, rest, yr, 1, split, grid, s); break;
      case 5: launch_tiles<W, kBf16, 5>(wb, rows, cols, xr, rest, yr, 1, split, grid, s); break;
      case 6: launch_tiles<W, kBf16, 6>(wb, rows, cols, xr, rest, yr, 1, split, grid, s); break;
      case 7: launch_tiles<W, kBf16, 7>(wb, rows, cols, xr, rest, yr, 1, split, grid, s); break;
      default: launch_tiles<W, kBf16, 8>(wb, rows, cols, xr, rest, yr, 1, split, grid, s); break;
    }
  }
  return launch_status("matmul_mma");
}

}  // namespace

bool matmul_mma_supported(DType type, int64_t cols) {
  switch (type) {
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0: return cols % 64 == 0;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return cols % 256 == 0;
    default: return false;
  }
}

void q8_0_split(const uint8_t* blocks, int64_t n_rows, int64_t cols, uint8_t* levels, uint16_t* scales) {
  const int64_t nb = cols / 32;
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = blocks + (r * nb + b) * kQ8Bytes;
      std::memcpy(&scales[r * nb + b], blk, 2);
      std::memcpy(levels + r * cols + b * 32, blk + 2, 32);
    }
  }
}

Status matmul_mma(DType type, const void* w, int64_t rows, int64_t cols, const float* x, int64_t n, float* y,
                  cudaStream_t s) {
  if (!matmul_mma_supported(type, cols)) {
    return Status::errorf("cuda matmul_mma: %s weights with %lld columns have no tensor-core kernel",
                          std::string(dtype_name(type)).c_str(), static_cast<long long>(cols));
  }
  if (rows <= 0 || n <= 0) return Status();
  switch (type) {
    case DType::F16: return launch<HalfW, false>(w, rows, cols, x, n, y, s);
    case DType::BF16: return launch<HalfW, true>(w, rows, cols, x, n, y, s);
    case DType::Q8_0: return launch<Q8W, false>(w, rows, cols, x, n, y, s);
    case DType::Q5_K: return launch<Q5KW, false>(w, rows, cols, x, n, y, s);
    case DType::Q6_K: return launch<Q6KW, false>(w, rows, cols, x, n, y, s);
    default: return launch<Q4KW, false>(w, rows, cols, x, n, y, s);
  }
}

}  // namespace ll3::cuda
