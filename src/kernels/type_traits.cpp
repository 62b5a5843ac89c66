#include "kernels/type_traits.h"

#include <array>
#include <type_traits>

#include "core/cpu_features.h"
#include "kernels/float_kernels.h"
#include "kernels/quant_kernels.h"

namespace ll3 {

namespace {

constexpr size_t kMaxType = 40;
using Table = std::array<TypeTraits, kMaxType>;

// Every supported type registers here; a type with no to_float is unsupported.
Table make_ref_table() {
  Table t{};
  for (size_t i = 0; i < kMaxType; ++i) t[i].type = static_cast<DType>(i);
  using namespace kernels::ref;
  t[size_t(DType::F32)] = {DType::F32, f32_to_float, f32_from_float, f32_dot};
  t[size_t(DType::F16)] = {DType::F16, f16_to_float, f16_from_float, f16_dot};
  t[size_t(DType::BF16)] = {DType::BF16, bf16_to_float, bf16_from_float, bf16_dot};
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
  // The integer path: activation block type and weight x quantized-activation dot.
  auto int_path = [&t](DType w, DType a, float (*dot)(const void*, const void*, int64_t)) {
    t[size_t(w)].vec_dot_type = a;
    t[size_t(w)].dot_q = dot;
  };
  int_path(DType::Q4_0, DType::Q8_0, q4_0_dot_q8_0);
  int_path(DType::Q4_1, DType::Q8_1, q4_1_dot_q8_1);
  int_path(DType::Q5_0, DType::Q8_0, q5_0_dot_q8_0);
  int_path(DType::Q5_1, DType::Q8_1, q5_1_dot_q8_1);
  int_path(DType::Q8_0, DType::Q8_0, q8_0_dot_q8_0);
  int_path(DType::Q2_K, DType::Q8_K, q2_k_dot_q8_k);
  int_path(DType::Q3_K, DType::Q8_K, q3_k_dot_q8_k);
  int_path(DType::Q4_K, DType::Q8_K, q4_k_dot_q8_k);
  int_path(DType::Q5_K, DType::Q8_K, q5_k_dot_q8_k);
  int_path(DType::Q6_K, DType::Q8_K, q6_k_dot_q8_k);
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
  } else {                                                                   \
    t[size_t(DType::T)].to_float = kernels::avx512::lower##_to_float;        \
    t[size_t(DType::T)].dot_f32 = kernels::avx512::lower##_dot;              \
    t[size_t(DType::T)].dot_q = kernels::avx512::lower##_dot_##act;          \
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
}

Table make_best_table() {
  Table t = make_ref_table();
  const CpuFeatures& cpu = cpu_features();
  if (cpu.has_avx2_set()) {
    t[size_t(DType::F32)].dot_f32 = kernels::avx2::f32_dot;
    t[size_t(DType::F16)].dot_f32 = kernels::avx2::f16_dot;
    t[size_t(DType::F16)].to_float = kernels::avx2::f16_to_float;
    t[size_t(DType::BF16)].dot_f32 = kernels::avx2::bf16_dot;
    set_quant_kernels<Avx2>(t);
  }
  if (cpu.has_avx512_set()) {
    t[size_t(DType::F32)].dot_f32 = kernels::avx512::f32_dot;
    t[size_t(DType::F16)].dot_f32 = kernels::avx512::f16_dot;
    t[size_t(DType::BF16)].dot_f32 = kernels::avx512::bf16_dot;
    set_quant_kernels<Avx512>(t);
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
