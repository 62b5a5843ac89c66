#include "core/dtype.h"

#include <cstdio>

namespace ll3 {

DTypeInfo dtype_info(uint32_t id) {
  switch (static_cast<DType>(id)) {
    case DType::F32: return {"f32", 1, 4};
    case DType::F16: return {"f16", 1, 2};
    case DType::Q4_0: return {"q4_0", 32, 18};
    case DType::Q4_1: return {"q4_1", 32, 20};
    case DType::Q5_0: return {"q5_0", 32, 22};
    case DType::Q5_1: return {"q5_1", 32, 24};
    case DType::Q8_0: return {"q8_0", 32, 34};
    case DType::Q8_1: return {"q8_1", 32, 36};
    case DType::Q2_K: return {"q2_k", 256, 84};
    case DType::Q3_K: return {"q3_k", 256, 110};
    case DType::Q4_K: return {"q4_k", 256, 144};
    case DType::Q5_K: return {"q5_k", 256, 176};
    case DType::Q6_K: return {"q6_k", 256, 210};
    case DType::Q8_K: return {"q8_k", 256, 292};
    case DType::IQ2_XXS: return {"iq2_xxs", 256, 66};
    case DType::IQ2_XS: return {"iq2_xs", 256, 74};
    case DType::IQ3_XXS: return {"iq3_xxs", 256, 98};
    case DType::IQ1_S: return {"iq1_s", 256, 50};
    case DType::IQ4_NL: return {"iq4_nl", 32, 18};
    case DType::IQ3_S: return {"iq3_s", 256, 110};
    case DType::IQ2_S: return {"iq2_s", 256, 82};
    case DType::IQ4_XS: return {"iq4_xs", 256, 136};
    case DType::I8: return {"i8", 1, 1};
    case DType::I16: return {"i16", 1, 2};
    case DType::I32: return {"i32", 1, 4};
    case DType::I64: return {"i64", 1, 8};
    case DType::F64: return {"f64", 1, 8};
    case DType::IQ1_M: return {"iq1_m", 256, 56};
    case DType::BF16: return {"bf16", 1, 2};
    case DType::TQ1_0: return {"tq1_0", 256, 54};
    case DType::TQ2_0: return {"tq2_0", 256, 66};
    case DType::W8A8: return {"w8a8", 1, 1};
  }
  return {nullptr, 0, 0};
}

std::string_view dtype_name(DType t) {
  DTypeInfo i = dtype_info(t);
  if (i.name != nullptr) return i.name;
  static thread_local char buf[32];
  std::snprintf(buf, sizeof buf, "type#%u", static_cast<unsigned>(t));
  return buf;
}

}  // namespace ll3
