// GEMV over Q8_0 weights: blocks of 32 (an F16 scale, 32 int8), one block per lane chunk,
// dequantized as the CPU reference does (q * d, one rounding).
#include "kernels/cuda/gemv.cuh"
#include "kernels/quant_blocks.h"

namespace ll3::cuda {

namespace {

constexpr int kQ8Bytes = sizeof(quant::BlockQ8_0);

struct Q8_0Chunks {
  __device__ static void load(const uint8_t* row, int64_t c, float* v) {
    const uint8_t* b = row + c * kQ8Bytes;
    const float d = f16_to_f32(static_cast<uint16_t>(b[0] | (b[1] << 8)));
    // 34-byte blocks start on even addresses: the quants are read two at a time.
    const uint16_t* q = reinterpret_cast<const uint16_t*>(b + 2);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const uint16_t pair = __ldg(q + j);
      v[2 * j] = __fmul_rn(static_cast<float>(static_cast<int8_t>(pair & 0xFF)), d);
      v[2 * j + 1] = __fmul_rn(static_cast<float>(static_cast<int8_t>(pair >> 8)), d);
    }
  }
};

}  // namespace

Status gemv_q8_0(const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch, cudaStream_t s) {
  return launch_gemv<Q8_0Chunks>(w, static_cast<size_t>(cols / 32) * kQ8Bytes, rows, cols, x, y, batch, s);
}

}  // namespace ll3::cuda
