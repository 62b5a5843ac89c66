#include "kernels/type_traits.h"

#include <array>

#include "core/cpu_features.h"
#include "kernels/float_kernels.h"

namespace ll3 {

namespace {

constexpr size_t kMaxType = 40;
using Table = std::array<TypeTraits, kMaxType>;

// Quantized types register here (kernels/quant_traits.cpp); a type with no to_float is unsupported.
Table make_ref_table() {
  Table t{};
  for (size_t i = 0; i < kMaxType; ++i) t[i].type = static_cast<DType>(i);
  using namespace kernels::ref;
  t[size_t(DType::F32)] = {DType::F32, f32_to_float, f32_from_float, f32_dot};
  t[size_t(DType::F16)] = {DType::F16, f16_to_float, f16_from_float, f16_dot};
  t[size_t(DType::BF16)] = {DType::BF16, bf16_to_float, bf16_from_float, bf16_dot};
  return t;
}

Table make_best_table() {
  Table t = make_ref_table();
  const CpuFeatures& cpu = cpu_features();
  if (cpu.has_avx2_set()) {
    t[size_t(DType::F32)].dot_f32 = kernels::avx2::f32_dot;
    t[size_t(DType::F16)].dot_f32 = kernels::avx2::f16_dot;
    t[size_t(DType::F16)].to_float = kernels::avx2::f16_to_float;
    t[size_t(DType::BF16)].dot_f32 = kernels::avx2::bf16_dot;
  }
  if (cpu.has_avx512_set()) {
    t[size_t(DType::F32)].dot_f32 = kernels::avx512::f32_dot;
    t[size_t(DType::F16)].dot_f32 = kernels::avx512::f16_dot;
    t[size_t(DType::BF16)].dot_f32 = kernels::avx512::bf16_dot;
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
