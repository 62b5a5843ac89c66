#include "kernels/type_traits.h"

#include <array>
#include <type_traits>

#include "core/cpu_features.h"
#include "kernels/float_dot_order.h"
#include "kernels/float_kernels.h"
#include "kernels/quant_kernels.h"

namespace ll3 {

namespace {

constexpr size_t kMaxType = 40;
using Table = std::array<TypeTraits, kMaxType>;
using DotQ = float (*)(const void*, const void*, int64_t);

// dot_q_rows for kernels without a batched version: one dot_q per activation row.
template <DotQ Dot>
void rows_by_dot(const void* row, const void* xq, size_t stride, int64_t nx, int64_t n, float* y,
                 size_t y_stride) {
  const uint8_t* a = static_cast<const uint8_t*>(xq);
  for (int64_t j = 0; j < nx; ++j) y[j * y_stride] = Dot(row, a + j * stride, n);
}

// dot_q_wrows reference: one dot_q per weight row.
template <DotQ Dot>
void wrows_by_dot(const void* rows, size_t row_stride, int64_t nrows, const void* xq, int64_t n, float* y) {
  const uint8_t* w = static_cast<const uint8_t*>(rows);
  for (int64_t r = 0; r < nrows; ++r) y[r] = Dot(w + r * row_stride, xq, n);
}

// Every supported type registers here; a type with no to_float is unsupported.
Table make_ref_table() {
  Table t{};
  for (size_t i = 0; i < kMaxType; ++i) t[i].type = static_cast<DType>(i);
  using namespace kernels::ref;
  t[size_t(DType::F32)] = {DType::F32, f32_to_float, f32_from_float, f32_dot};
  t[size_t(DType::F16)] = {DType::F16, f16_to_float, f16_from_float, f16_dot};
  t[size_t(DType::BF16)] = {DType::BF16, bf16_to_float, bf16_from_float, bf16_dot};
  t[size_t(DType::BF16)].to_float_pairs = kernels::bf16_row_to_pairs;
  t[size_t(DType::Q4_0)] = {DType::Q4_0, q4_0_to_float, q4_0_from_float, q4_0_dot};
  t[size_t(DType::Q4_1)] = {DType::Q4_1, q4_1_to_float, q4_1_from_float, q4_1_dot};
  t[size_t(DType::Q5_0)] = {DType::Q5_0, q5_0_to_float, q5_0_from_float, q5_0_dot};
  t[size_t(DType::Q5_1)] = {DType::Q5_1, q5_1_to_float, q5_1_from_float, q5_1_dot};
  t[size_t(DType::Q8_0)] = {DType::Q8_0, q8_0_to_float, q8_0_from_float, q8_0_dot};
  t[size_t(DType::Q2_K)] = {DType::Q2_K, q2_k_to_float, q2_k_from_float, q2_k_dot};
  t[size_t(DType::Q3_K)] = {DType::Q3_K, q3_k_to_float, q3_k_from_float, q3_k_dot};
  t[size_t(DType::Q4_K)] = {DType::Q4_K, q4_k_to_float, q4_k_from_float, q4_k_dot};
  t[size_t(DType::Q5_K)] = {DType::Q5_K, q5_k_to_float, q5_k_from_float, q5_k_dot};
  t[size_t(DType::Q6_K)] = {DType::Q6_K, q6_k_to_float, q6_k_from_float, q6_k_dot};
  t[size_t(DType::Q8_K)] = {DType::Q8_K, q8_k_to_float, q8_k_from_float, q8_k_dot};
  t[size_t(DType::Q8_1)] = {DType::Q8_1, q8_1_to_float, q8_1_from_float, q8_1_dot};
  t[size_t(DType::Q8_0)].from_float_act = q8_0_from_float_act;
  t[size_t(DType::Q8_1)].from_float_act = q8_1_from_float_act;
  t[size_t(DType::Q8_K)].from_float_act = q8_k_from_float;
  // The integer path: activation block type and weight x quantized-activation dot.
#define LL3_INT_PATH(T, A, dot)                                   \
  t[size_t(DType::T)].vec_dot_type = DType::A;                    \
  t[size_t(DType::T)].dot_q = dot;                                \
  t[size_t(DType::T)].dot_q_rows = rows_by_dot<dot>;
  LL3_INT_PATH(Q4_0, Q8_0, q4_0_dot_q8_0)
  LL3_INT_PATH(Q4_1, Q8_1, q4_1_dot_q8_1)
  LL3_INT_PATH(Q5_0, Q8_0, q5_0_dot_q8_0)
  LL3_INT_PATH(Q5_1, Q8_1, q5_1_dot_q8_1)
  LL3_INT_PATH(Q8_0, Q8_0, q8_0_dot_q8_0)
  LL3_INT_PATH(Q2_K, Q8_K, q2_k_dot_q8_k)
  LL3_INT_PATH(Q3_K, Q8_K, q3_k_dot_q8_k)
  LL3_INT_PATH(Q4_K, Q8_K, q4_k_dot_q8_k)
  LL3_INT_PATH(Q5_K, Q8_K, q5_k_dot_q8_k)
  LL3_INT_PATH(Q6_K, Q8_K, q6_k_dot_q8_k)
#undef LL3_INT_PATH
  t[size_t(DType::Q4_K)].dot_q_wrows = wrows_by_dot<q4_k_dot_q8_k>;
  t[size_t(DType::Q6_K)].dot_q_wrows = wrows_by_dot<q6_k_dot_q8_k>;
  t[size_t(DType::Q8_0)].dot_q_wrows = wrows_by_dot<q8_0_dot_q8_0>;
  return t;
}

// The quantized types' SIMD kernels (to_float is exact in every version; from_float stays scalar).
struct Avx2 {};
struct Avx512 {};
template <class Isa>
void set_quant_kernels(Table& t) {
#define LL3_SET(T, lower, act)                                               \
  if constexpr (std::is_same_v<Isa, Avx2>) {                                 \
    t[size_t(DType::T)].to_float = kernels::avx2::lower##_to_float;          \
    t[size_t(DType::T)].dot_f32 = kernels::avx2::lower##_dot;                \
    t[size_t(DType::T)].dot_q = kernels::avx2::lower##_dot_##act;            \
    t[size_t(DType::T)].dot_q_rows = rows_by_dot<kernels::avx2::lower##_dot_##act>; \
  } else {                                                                   \
    t[size_t(DType::T)].to_float = kernels::avx512::lower##_to_float;        \
    t[size_t(DType::T)].dot_f32 = kernels::avx512::lower##_dot;              \
    t[size_t(DType::T)].dot_q = kernels::avx512::lower##_dot_##act;          \
    t[size_t(DType::T)].dot_q_rows = rows_by_dot<kernels::avx512::lower##_dot_##act>; \
    t[size_t(DType::T)].to_bf16 = kernels::avx512::lower##_to_bf16;          \
  }
  LL3_SET(Q4_0, q4_0, q8_0)
  LL3_SET(Q4_1, q4_1, q8_1)
  LL3_SET(Q5_0, q5_0, q8_0)
  LL3_SET(Q5_1, q5_1, q8_1)
  LL3_SET(Q8_0, q8_0, q8_0)
  LL3_SET(Q2_K, q2_k, q8_k)
  LL3_SET(Q3_K, q3_k, q8_k)
  LL3_SET(Q4_K, q4_k, q8_k)
  LL3_SET(Q5_K, q5_k, q8_k)
  LL3_SET(Q6_K, q6_k, q8_k)
#undef LL3_SET
  if constexpr (std::is_same_v<Isa, Avx2>) {  // the decode loop over rows keeps this ISA's dot_q
    t[size_t(DType::Q8_K)].from_float = kernels::avx2::q8_k_from_float;  // bit-identical to the reference
    t[size_t(DType::Q8_K)].from_float_act = kernels::avx2::q8_k_from_float;
    t[size_t(DType::Q8_0)].from_float_act = kernels::avx2::q8_0_from_float_act;
    t[size_t(DType::Q4_K)].dot_q_wrows = wrows_by_dot<kernels::avx2::q4_k_dot_q8_k>;
    t[size_t(DType::Q6_K)].dot_q_wrows = wrows_by_dot<kernels::avx2::q6_k_dot_q8_k>;
    t[size_t(DType::Q8_0)].dot_q_wrows = wrows_by_dot<kernels::avx2::q8_0_dot_q8_0>;
    t[size_t(DType::Q4_K)].dot_q_panels = kernels::avx2::q4_k_dot_q8_k_panels;
    t[size_t(DType::Q6_K)].dot_q_panels = kernels::avx2::q6_k_dot_q8_k_panels;
    t[size_t(DType::Q8_0)].dot_q_panels = kernels::avx2::q8_0_dot_q8_0_panels;
    t[size_t(DType::Q4_K)].dot_q_rows = kernels::avx2::q4_k_dot_q8_k_rows;
    t[size_t(DType::Q6_K)].dot_q_rows = kernels::avx2::q6_k_dot_q8_k_rows;
    t[size_t(DType::Q8_0)].dot_q_rows = kernels::avx2::q8_0_dot_q8_0_rows;
    t[size_t(DType::Q4_K)].dot_q_panel_rows = kernels::avx2::q4_k_dot_q8_k_panel_rows;
    t[size_t(DType::Q6_K)].dot_q_panel_rows = kernels::avx2::q6_k_dot_q8_k_panel_rows;
    t[size_t(DType::Q8_0)].dot_q_panel_rows = kernels::avx2::q8_0_dot_q8_0_panel_rows;
  }
  if constexpr (std::is_same_v<Isa, Avx512>) {
    // Activation quantizers (bit-identical to the reference ones, so results do not depend on
    // the CPU), and the batched kernels of the common types.
    t[size_t(DType::Q8_K)].from_float = kernels::avx512::q8_k_from_float;
    t[size_t(DType::Q8_K)].from_float_act = kernels::avx512::q8_k_from_float;
    t[size_t(DType::Q8_0)].from_float_act = kernels::avx512::q8_0_from_float_act;
    t[size_t(DType::Q2_K)].dot_q_rows = kernels::avx512::q2_k_dot_q8_k_rows;
    t[size_t(DType::Q3_K)].dot_q_rows = kernels::avx512::q3_k_dot_q8_k_rows;
    t[size_t(DType::Q4_0)].dot_q_rows = kernels::avx512::q4_0_dot_q8_0_rows;
    t[size_t(DType::Q4_K)].dot_q_rows = kernels::avx512::q4_k_dot_q8_k_rows;
    t[size_t(DType::Q5_K)].dot_q_rows = kernels::avx512::q5_k_dot_q8_k_rows;
    t[size_t(DType::Q6_K)].dot_q_rows = kernels::avx512::q6_k_dot_q8_k_rows;
    t[size_t(DType::Q8_0)].dot_q_rows = kernels::avx512::q8_0_dot_q8_0_rows;
    t[size_t(DType::Q4_K)].dot_q_panel_rows = kernels::avx512::q4_k_dot_q8_k_panel_rows;
    t[size_t(DType::Q6_K)].dot_q_panel_rows = kernels::avx512::q6_k_dot_q8_k_panel_rows;
    t[size_t(DType::Q8_0)].dot_q_panel_rows = kernels::avx512::q8_0_dot_q8_0_panel_rows;
    t[size_t(DType::Q4_K)].dot_q_wrows = kernels::avx512::q4_k_dot_q8_k_wrows;
    t[size_t(DType::Q6_K)].dot_q_wrows = kernels::avx512::q6_k_dot_q8_k_wrows;
    t[size_t(DType::Q8_0)].dot_q_wrows = kernels::avx512::q8_0_dot_q8_0_wrows;
    t[size_t(DType::Q4_0)].dot_q_wrows = kernels::avx512::q4_0_dot_q8_0_wrows;
    t[size_t(DType::Q4_K)].dot_q_panels = kernels::avx512::q4_k_dot_q8_k_panels;
    t[size_t(DType::Q6_K)].dot_q_panels = kernels::avx512::q6_k_dot_q8_k_panels;
    t[size_t(DType::Q8_0)].dot_q_panels = kernels::avx512::q8_0_dot_q8_0_panels;
  }
}

Table make_best_table() {
  Table t = make_ref_table();
  const CpuFeatures& cpu = cpu_features();
  if (cpu.has_avx2_set()) {
    t[size_t(DType::F32)].dot_f32 = kernels::avx2::f32_dot;
    t[size_t(DType::F16)].dot_f32 = kernels::avx2::f16_dot;
    t[size_t(DType::F16)].to_float = kernels::avx2::f16_to_float;
    t[size_t(DType::F16)].from_float = kernels::avx2::f16_from_float;
    t[size_t(DType::BF16)].dot_f32 = kernels::avx2::bf16_dot;
    t[size_t(DType::F32)].dot_f32_wrows = kernels::avx2::f32_dot_wrows;
    t[size_t(DType::F16)].dot_f32_wrows = kernels::avx2::f16_dot_wrows;
    t[size_t(DType::BF16)].dot_f32_wrows = kernels::avx2::bf16_dot_wrows;
    t[size_t(DType::BF16)].to_float_pairs = kernels::avx2::bf16_to_float_pairs;
    set_quant_kernels<Avx2>(t);
  }
  if (cpu.has_avx512_set()) {
    t[size_t(DType::F32)].dot_f32 = kernels::avx512::f32_dot;
    t[size_t(DType::F16)].dot_f32 = kernels::avx512::f16_dot;
    t[size_t(DType::BF16)].dot_f32 = kernels::avx512::bf16_dot;
    t[size_t(DType::F32)].dot_f32_wrows = kernels::avx512::f32_dot_wrows;
    t[size_t(DType::F16)].dot_f32_wrows = kernels::avx512::f16_dot_wrows;
    t[size_t(DType::F16)].dot_f32_panels = kernels::avx512::f16_dot_panels;
    t[size_t(DType::BF16)].dot_f32_wrows = kernels::avx512::bf16_dot_wrows;
    t[size_t(DType::F16)].to_float = kernels::avx512::f16_to_float;
    t[size_t(DType::F16)].from_float = kernels::avx512::f16_from_float;
    t[size_t(DType::BF16)].to_float = kernels::avx512::bf16_to_float;
    t[size_t(DType::BF16)].to_float_pairs = kernels::avx512::bf16_to_float_pairs;
    t[size_t(DType::F16)].to_bf16 = kernels::avx512::f16_to_bf16;
    set_quant_kernels<Avx512>(t);
  }
  if (cpu.amx_int8) {
    t[size_t(DType::Q4_K)].dot_q_panel_rows = kernels::amx::q4_k_dot_q8_k_panel_rows;
    t[size_t(DType::Q6_K)].dot_q_panel_rows = kernels::amx::q6_k_dot_q8_k_panel_rows;
    t[size_t(DType::Q8_0)].dot_q_panel_rows = kernels::amx::q8_0_dot_q8_0_panel_rows;
  }
  return t;
}

const TypeTraits* lookup(const Table& t, DType type) {
  size_t i = static_cast<size_t>(type);
  if (i >= kMaxType || t[i].to_float == nullptr) return nullptr;
  return &t[i];
}

}  // namespace

const TypeTraits* type_traits(DType type) {
  static const Table table = make_best_table();
  return lookup(table, type);
}

const TypeTraits* type_traits_ref(DType type) {
  static const Table table = make_ref_table();
  return lookup(table, type);
}

}  // namespace ll3
