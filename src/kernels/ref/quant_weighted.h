// Quantizers weighted by an importance matrix: what llama-quantize runs when given --imatrix
// (ggml's quantize_row_*_impl with quant_weights). Each search minimises the error weighted per
// column by qw (the mean squared activation of that input column), so the columns the model
// leans on are reproduced more closely. The float arithmetic follows ggml's in the same order, so
// the bytes are the same as llama-quantize's.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace ll3::kernels::ref {

// Quantize one row of n values (a whole number of blocks); qw holds n importance weights.
using WeightedFromFloat = void (*)(const float* src, void* dst, int64_t n, const float* qw);

// The weighted quantizer of `type`, or nullptr for the types whose llama.cpp quantizer ignores
// the importance matrix (Q8_0, F16, BF16, F32): they quantize as without one.
WeightedFromFloat weighted_from_float(DType type);

void q2_k_from_float_weighted(const float* src, void* dst, int64_t n, const float* qw);
void q3_k_from_float_weighted(const float* src, void* dst, int64_t n, const float* qw);
void q4_k_from_float_weighted(const float* src, void* dst, int64_t n, const float* qw);
void q5_k_from_float_weighted(const float* src, void* dst, int64_t n, const float* qw);
void q6_k_from_float_weighted(const float* src, void* dst, int64_t n, const float* qw);
void q4_0_from_float_weighted(const float* src, void* dst, int64_t n, const float* qw);
void q4_1_from_float_weighted(const float* src, void* dst, int64_t n, const float* qw);
void q5_0_from_float_weighted(const float* src, void* dst, int64_t n, const float* qw);
void q5_1_from_float_weighted(const float* src, void* dst, int64_t n, const float* qw);

namespace detail {

// The three weighted searches the quantizers share (ggml's make_qx_quants with rmse_type 1,
// make_qkx3_quants and make_qp_quants).

// Symmetric: x ~ scale * (L - nmax), L in [0, 2 nmax - 1]; 19 candidate scales.
float fit_symmetric_weighted(int n, int nmax, const float* x, int8_t* L, const float* w);
// Asymmetric: x ~ scale * L - *neg_min, L in [0, nmax]; nstep + 1 candidates from rmin by rdelta.
float fit_scale_min_weighted(int n, int nmax, const float* x, const float* w, uint8_t* L,
                             float* neg_min, uint8_t* Laux, float rmin, float rdelta, int nstep);
// Non-negative x (sub-block scales or mins) ~ scale * L, L in [0, nmax], then improved one value
// at a time.
float fit_positive_weighted(int n, int nmax, const float* x, uint8_t* L, const float* w);

}  // namespace detail

}  // namespace ll3::kernels::ref
