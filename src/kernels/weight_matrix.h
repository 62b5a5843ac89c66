// A 2-D weight used as y = W x, in whatever type the checkpoint stores it.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "kernels/type_traits.h"

namespace ll3 {

// `rows` outputs, `cols` inputs, each row `row_bytes` of `type`, in place in the mapped file.
struct WeightMatrix {
  std::string name;
  DType type = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  const uint8_t* data = nullptr;
  const TypeTraits* traits = nullptr;
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
};

}  // namespace ll3
