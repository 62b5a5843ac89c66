// The matrix product of prompt processing on AMX tiles: y[t][r] = sum_k w[r][k] * x[t][k] with
// w and x rounded to bfloat16 and the sums kept in float.
//
// Why bf16: an AMX core multiplies 16x16x32 bf16 tiles at ~2.5 TFLOP/s, six times its FP32 FMA
// rate, so a prompt's product is bound by feeding the tiles, not by arithmetic. Rounding to
// bf16 (8-bit mantissa) costs less accuracy than the 8-bit activations of the integer path it
// replaces for prompts.
//
// Weights stay in their stored type; the kernel unpacks kBf16ChunkK columns of its block of
// rows at a time into an L1-resident buffer and runs every token over them before the next
// chunk, so unpacked weights never travel to L2 and back.
//
// Activations are packed once per product into AMX "B tile" order: groups of 16 tokens, each
// group (k/2, 16, 2) = for every pair of k, the pair of each of the 16 tokens; tokens past n
// in the last group are zero.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ll3::kernels {

constexpr int64_t kBf16TokenGroup = 16;  // tokens per packed activation group
constexpr int64_t kBf16RowBlock = 32;    // weight rows per gemm_bf16 call, at most
constexpr int64_t kBf16ChunkK = 256;     // columns unpacked at a time (a multiple of every block size)

// bf16 elements the packed activations of n tokens of length k take.
inline size_t bf16_packed_x_elems(int64_t n, int64_t k) {
  return static_cast<size_t>((n + kBf16TokenGroup - 1) / kBf16TokenGroup) * kBf16TokenGroup * k;
}

// A block of weight rows in their stored type and how to unpack them.
struct Bf16WeightRows {
  const uint8_t* rows = nullptr;  // first row
  size_t row_bytes = 0;           // bytes between rows
  int64_t nr = 0;                 // rows, 1..kBf16RowBlock
  size_t chunk_bytes = 0;         // bytes of kBf16ChunkK elements of a row
  // Unpacks n elements straight to bf16 (round to nearest even), or, where null, to float.
  void (*to_bf16)(const void* src, uint16_t* dst, int64_t n) = nullptr;
  void (*to_float)(const void* src, float* dst, int64_t n) = nullptr;
  // Memory the caller reads next (the next block's rows): pulled toward the core while the
  // tiles compute, so the next block does not start by waiting on DRAM.
  const uint8_t* next = nullptr;
  size_t next_bytes = 0;
};

// Packs one group: x holds n_valid <= 16 rows of k floats (stride ldx floats); out receives
// 16 * k bf16.
using PackXBf16Fn = void (*)(const float* x, size_t ldx, int64_t n_valid, int64_t k, uint16_t* out);
// y[t * ldy + r] for r < w.nr, t < n (k a multiple of 32). Uses about 100 KB of stack (the
// unpacked chunks and the parked accumulators), allocates nothing.
using GemmBf16Fn = void (*)(const Bf16WeightRows& w, const uint16_t* xp, int64_t n, int64_t k, float* y,
                            size_t ldy);

namespace ref {
void pack_x_bf16(const float* x, size_t ldx, int64_t n_valid, int64_t k, uint16_t* out);
void gemm_bf16(const Bf16WeightRows& w, const uint16_t* xp, int64_t n, int64_t k, float* y, size_t ldy);
}  // namespace ref
namespace amx {
void pack_x_bf16(const float* x, size_t ldx, int64_t n_valid, int64_t k, uint16_t* out);
void gemm_bf16(const Bf16WeightRows& w, const uint16_t* xp, int64_t n, int64_t k, float* y, size_t ldy);
}  // namespace amx

struct Bf16Gemm {
  PackXBf16Fn pack_x;
  GemmBf16Fn gemm;
};

// The AMX kernels, or nullptr where the CPU (or LL3_CPU) does not allow them.
const Bf16Gemm* bf16_gemm_amx();

}  // namespace ll3::kernels
