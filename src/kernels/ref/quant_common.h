// Helpers shared by the scalar reference quant kernels (not part of the public kernel API).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/half.h"

// Exactness needs a*b+c rounded twice, as ggml's C compiles without -mfma: never fuse into an
// FMA here, even in an -march=native build.
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace ll3::kernels::ref::detail {

// Round to nearest, ties to even, for |f| <= 2^22: adding 1.5 * 2^23 leaves the integer in the
// low mantissa bits. ggml's quantizers round this way; std::lround would round ties away.
inline int nearest_int(float f) {
  float v = f + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// A row dot product by blocks: dequantize each block into a small buffer, then accumulate in
// F32. Exact dequantization keeps this equal to to_float-then-dot up to summation order.
template <class Block, int QK, class Dequant>
float dot_by_blocks(const void* row, const float* x, int64_t n, Dequant dequant) {
  const Block* b = static_cast<const Block*>(row);
  float tmp[QK];  // one block's weights
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK; ++i) {
    dequant(b[i], tmp);
    float s = 0.0f;
    for (int j = 0; j < QK; ++j) s += tmp[j] * x[i * QK + j];
    sum += s;
  }
  return sum;
}

template <class Block, int QK, class Dequant>
void to_float_by_blocks(const void* src, float* dst, int64_t n, Dequant dequant) {
  const Block* b = static_cast<const Block*>(src);
  for (int64_t i = 0; i < n / QK; ++i) dequant(b[i], dst + i * QK);
}

}  // namespace ll3::kernels::ref::detail
