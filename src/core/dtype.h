// Tensor element types, numbered as GGUF / ggml number them (the ids are part of the file format).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ll3 {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  // ll3's own: static W8A8 (kernels/w8a8.h), int8 weights in 16-row panels, one byte per
  // element, with per-row scales in a companion tensor (model/w8a8_format.h). Far outside
  // ggml's ids, so that other engines refuse the file at its first such tensor.
  W8A8 = 1024,
};

struct DTypeInfo {
  const char* name;     // "q4_k"; nullptr for ids no format defines
  int64_t block_size;   // elements per block (1 for plain types)
  size_t block_bytes;   // bytes per block
};

// Layout of a type id as stored in a file; name == nullptr when the id is unknown.
DTypeInfo dtype_info(uint32_t id);
inline DTypeInfo dtype_info(DType t) { return dtype_info(static_cast<uint32_t>(t)); }
std::string_view dtype_name(DType t);  // "q4_k", or "type#N" for unknown ids

// Bytes of a row of n elements; n must be a multiple of the block size.
inline size_t dtype_row_bytes(DType t, int64_t n) {
  DTypeInfo i = dtype_info(t);
  return static_cast<size_t>(n / i.block_size) * i.block_bytes;
}

}  // namespace ll3
