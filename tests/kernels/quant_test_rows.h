// Random rows of a quantized type for kernel tests (shared by the SIMD and integer-dot tests).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "kernels/type_traits.h"

namespace ll3::test {

// A row of n weights of `type`: either Gaussian data quantized by the reference quantizer, or
// random bytes whose f16 fields (byte offsets within a block) hold finite small values, so every
// bit pattern of the quants is exercised without inf/NaN scales.
inline std::vector<uint8_t> random_quant_row(DType type, const std::vector<int>& f16_fields, int64_t n,
                                             std::mt19937& rng, bool quantized) {
  const DTypeInfo info = dtype_info(type);
  std::vector<uint8_t> row(dtype_row_bytes(type, n));
  if (quantized) {
    std::normal_distribution<float> g(0.0f, 0.5f);
    std::vector<float> x(n);
    for (float& v : x) v = g(rng);
    type_traits_ref(type)->from_float(x.data(), row.data(), n);
    return row;
  }
  for (uint8_t& b : row) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  for (int64_t blk = 0; blk < n / info.block_size; ++blk) {
    for (int off : f16_fields) {
      const uint16_t h = f32_to_f16(u(rng));
      std::memcpy(row.data() + blk * info.block_bytes + off, &h, 2);
    }
  }
  return row;
}

}  // namespace ll3::test
