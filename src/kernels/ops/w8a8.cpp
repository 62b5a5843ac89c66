// W8A8 (kernels/w8a8.h): the packed layout, and the run-time choice of kernels (AVX-512 VNNI,
// AVX2, scalar; LL3_CPU caps it through cpu_features()).
#include "kernels/w8a8.h"

#include "core/check.h"
#include "core/cpu_features.h"

namespace ll3::kernels {

namespace {

enum class Isa { kAvx512, kAvx2, kScalar };

Isa isa() {
  static const Isa chosen = cpu_features().has_avx512_set() ? Isa::kAvx512
                            : cpu_features().has_avx2_set() ? Isa::kAvx2
                                                            : Isa::kScalar;
  return chosen;
}

}  // namespace

void w8a8_quantize_static(const float* x, int64_t k, float scale, int8_t* xq) {
  switch (isa()) {
    case Isa::kAvx512: avx512::w8a8_quantize_static(x, k, scale, xq); break;
    case Isa::kAvx2: avx2::w8a8_quantize_static(x, k, scale, xq); break;
    case Isa::kScalar: ref::w8a8_quantize_static(x, k, scale, xq); break;
  }
}

float w8a8_quantize_dynamic(const float* x, int64_t k, int8_t* xq) {
  switch (isa()) {
    case Isa::kAvx512: return avx512::w8a8_quantize_dynamic(x, k, xq);
    case Isa::kAvx2: return avx2::w8a8_quantize_dynamic(x, k, xq);
    case Isa::kScalar: break;
  }
  return ref::w8a8_quantize_dynamic(x, k, xq);
}

size_t w8a8_packed_bytes(int64_t n_rows, int64_t k) { return static_cast<size_t>(n_rows) * static_cast<size_t>(k); }

void w8a8_pack(const int8_t* w, int64_t n_rows, int64_t k, void* packed) {
  LL3_CHECK(n_rows % kW8A8PanelRows == 0 && k % kW8A8KAlign == 0 && k <= kW8A8MaxK);
  uint8_t* out = static_cast<uint8_t*>(packed);
  constexpr int64_t R = kW8A8PanelRows;
  for (int64_t p = 0; p < n_rows / R; ++p) {
    uint8_t* panel = out + p * R * k;
    for (int64_t j = 0; j < R; ++j) {
      const int8_t* row = w + (p * R + j) * k;
      for (int64_t g = 0; g < k / 4; ++g) {
        for (int64_t b = 0; b < 4; ++b) {
          panel[64 * g + 4 * j + b] = static_cast<uint8_t>(static_cast<int32_t>(row[4 * g + b]) + 128);
        }
      }
    }
  }
}

void w8a8_unpack_row(const void* packed, int64_t r, int64_t k, int8_t* row) {
  constexpr int64_t R = kW8A8PanelRows;
  const uint8_t* panel = static_cast<const uint8_t*>(packed) + (r / R) * R * k;
  const int64_t j = r % R;
  for (int64_t g = 0; g < k / 4; ++g) {
    for (int64_t b = 0; b < 4; ++b) row[4 * g + b] = static_cast<int8_t>(static_cast<int32_t>(panel[64 * g + 4 * j + b]) - 128);
  }
}

void w8a8_gemm(const void* packed, const float* w_scale, int64_t row0, int64_t n_rows, const int8_t* x,
               size_t x_stride, const float* x_scale, int64_t n_x, int64_t k, float* y, size_t y_stride) {
  switch (isa()) {
    case Isa::kAvx512:
      avx512::w8a8_gemm(packed, w_scale, row0, n_rows, x, x_stride, x_scale, n_x, k, y, y_stride);
      break;
    case Isa::kAvx2:
      avx2::w8a8_gemm(packed, w_scale, row0, n_rows, x, x_stride, x_scale, n_x, k, y, y_stride);
      break;
    case Isa::kScalar:
      ref::w8a8_gemm_packed(packed, w_scale, row0, n_rows, x, x_stride, x_scale, n_x, k, y, y_stride);
      break;
  }
}

}  // namespace ll3::kernels
