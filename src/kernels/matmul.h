// y = W x for a batch of activation rows, with W in any supported type, split by output rows
// across the thread pool (each thread streams its own part of W once for all the rows).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "core/thread_pool.h"
#include "kernels/gemm_bf16.h"
#include "kernels/weight_matrix.h"

namespace ll3 {

// Weight rows the float GEMM dequantizes and multiplies at a time.
constexpr int64_t kRowBlock = 16;
// The same for the lane-major float GEMM (kernels/gemm_f32.h), which takes products of at
// least kLaneMinTokens activation rows: below that, packing each block of weights (16 x 16
// transposes) costs more than the broadcast form saves.
constexpr int64_t kLaneRowBlock = 32;
constexpr int64_t kLaneMinTokens = 24;
// Float products of up to this many rows of x run the decode kernels once per row, block by
// block: a block of weights comes from memory once and from L2 for the other rows, which beats
// the GEMMs' packing and tiles. F16 panels (kernels/panels.h), against the lane-major GEMM (1B
// preset, 2 threads, Zen 5, t/s): pp2 12.3 -> 32.8, pp4 17.8 -> 47.6, pp8 38 -> 60, pp16 51 ->
// 65; at 24 and 32 the two meet. The four-row kernels of BF16 (and of F16 in the row layout)
// against the dot-form GEMM: pp2 12-14 -> 26-28, pp4 17-21 -> 34-41, but pp8 -5% and pp16 -18%.
constexpr int64_t kShortPanelProductRows = 16;
constexpr int64_t kShortRowProductRows = 4;

// Floats between the rows the float path writes for its GEMM (MatmulScratch::xr, and the
// dequantized weight rows of a block): cols padded by a cache line, so that rows of a 4 KB
// multiple do not all map to the same L1 sets and the AVX2 GEMM reads them in place.
inline int64_t float_input_ld(int64_t cols) { return cols % 16 == 0 ? cols + 16 : cols; }

// Scratch the matmul needs, sized once by the runner.
struct MatmulScratch {
  float* rows = nullptr;      // (n_threads, kLaneRowBlock, max_cols) dequantized weight rows
  int64_t max_cols = 0;
  uint8_t* xq = nullptr;      // (max_tokens, xq_row_bytes(max_cols)) quantized activations
  float* act_scales = nullptr;  // (max_tokens) W8A8: each activation row's scale
  // (kMaxSharedOutputs, kernels::panel_act_bytes(max_cols)): what the decode panel kernels
  // take from the activation row besides its quants, made once per product.
  uint8_t* panel_act = nullptr;
  // Quantize activations to 8 bits for the integer dot products of quantized weights (as
  // llama.cpp does; faster, matches its native results). Off: float activations (matches the
  // dequantized-weights reference exactly).
  bool int8_activations = true;
  // Products of at least kBf16MinTokens rows run on AMX bf16 tiles when set (only with
  // int8_activations: it is the fast mode, and bf16 rounds less than 8-bit activations).
  const kernels::Bf16Gemm* bf16 = nullptr;
  uint16_t* xbf = nullptr;   // bf16_packed_x_elems(max_tokens, max_cols) packed activations
  // (max_tokens, max_cols): with int8_activations, the activations of F16 / BF16 weights
  // rounded to the weight's type first, as llama.cpp multiplies them (its vec_dot_type); the
  // products are then exact in float. nullptr: those products take the float activations.
  // Also where BF16 products of several rows take their input deinterleaved for the pair
  // order (kernels/float_dot_order.h), in either mode; nullptr: one dot_f32 per output.
  // Rows float_input_ld(cols) apart: (max_tokens, float_input_ld(max_cols)), 64-byte aligned.
  float* xr = nullptr;
  // Per thread, kBf16RowBlock rows of the widest weight row (matmul_wbuf_bytes): rows of
  // panel-layout matrices unpacked for the prompt and float paths.
  uint8_t* wbuf = nullptr;
  size_t wbuf_thread_bytes = 0;
  // For the lane-major float GEMM (kernels::gemm_f32_lanes(), on AVX-512): the activations
  // packed (kernels::lanes_x_floats(max_tokens, max_cols)), and per thread a block of packed
  // weight rows (kernels::lanes_w_floats(kLaneRowBlock, max_cols), 64-byte aligned). nullptr:
  // the dot-form GEMM, with the same bits.
  float* xlanes = nullptr;
  float* wlanes = nullptr;
};

// Bytes of MatmulScratch::wbuf for one thread, for weight rows of at most max_row_bytes.
size_t matmul_wbuf_bytes(size_t max_row_bytes);

// Below this many activation rows a prompt product stays on the integer / float paths: the
// weights' unpacking to bf16 costs about as much as one integer dot per row.
constexpr int64_t kBf16MinTokens = 16;

// Bytes one activation row of n elements takes in any of the 8-bit activation types.
inline size_t xq_row_bytes(int64_t n) { return static_cast<size_t>((n + 255) / 256) * 320; }

// x: (n, W.cols) row-major; y: (n, W.rows) row-major.
void matmul(ThreadPool& pool, const WeightMatrix& W, const float* x, float* y, int64_t n,
            const MatmulScratch& scratch);

// One product of a group that shares its input: y = W x.
struct MatmulOutput {
  const WeightMatrix* W;
  float* y;  // (n, W->rows)
};
constexpr int kMaxSharedOutputs = 3;

// Up to kMaxSharedOutputs products of the same x (Q, K, V; gate, up), all with W->cols equal:
// the activations are quantized or packed once and the rows of all the weights are split
// across the threads in one pass (one barrier instead of one per product).
void matmul_shared(ThreadPool& pool, std::initializer_list<MatmulOutput> outputs, const float* x, int64_t n,
                   const MatmulScratch& scratch);

}  // namespace ll3
