// The second product of a LoRA correction (model/lora.h), added into the base product's
// output: for each of `rows` rows r and the columns j in [j0, j1),
//
//   y_r[j] += s · (Σ_k u_r[k] · B[j][k])     the sum in k order, one fused multiply-add per k,
//                                            then scaled and added (two roundings)
//
// with u = A x (rows, rank) and B (out, rank) in F32 panels of Bᵀ: kLoraPanel columns of all
// ranks, contiguous, so the inner loop's SIMD lanes are output columns, each doing the scalar
// reference's operations in its order (the versions give the same bits, whatever the number
// of rows), and a range of columns is one stream through memory. Bᵀ as plain rows instead
// (`rank` streams, 64 bytes of each per step) decoded with a rank-64 adapter at 0.70x the
// base's speed; in panels at 0.78x, where its bytes beside the base's allow 0.82x (Zen 3).
#pragma once

#include <cstdint>

namespace ll3::kernels {

constexpr int64_t kLoraPanel = 16;
// Floats of B (out, rank) in panels (the last one padded with zeros).
inline int64_t lora_panel_floats(int64_t out, int64_t rank) { return (out + kLoraPanel - 1) / kLoraPanel * kLoraPanel * rank; }
// Where B[j][k] sits in them.
inline int64_t lora_panel_at(int64_t j, int64_t k, int64_t rank) {
  return ((j / kLoraPanel) * rank + k) * kLoraPanel + j % kLoraPanel;
}

// j0 a multiple of kLoraPanel; j1 anything up to the columns.
using LoraExpandFn = void (*)(const float* panels, int64_t rank, const float* u, int64_t rows, float s,
                              float* const* y_rows, int64_t j0, int64_t j1);

namespace ref {
void lora_expand(const float* panels, int64_t rank, const float* u, int64_t rows, float s, float* const* y_rows,
                 int64_t j0, int64_t j1);
}  // namespace ref
namespace avx2 {
void lora_expand(const float* panels, int64_t rank, const float* u, int64_t rows, float s, float* const* y_rows,
                 int64_t j0, int64_t j1);
}  // namespace avx2
namespace avx512 {
void lora_expand(const float* panels, int64_t rank, const float* u, int64_t rows, float s, float* const* y_rows,
                 int64_t j0, int64_t j1);
}  // namespace avx512

// The fastest version for this CPU (as LL3_CPU caps it).
LoraExpandFn lora_expand();

}  // namespace ll3::kernels
