// GEMV over Q4_K weights: super-blocks of 256 (F16 d and dmin, 12 bytes of 6-bit sub-block
// scales and mins, 128 bytes of 4-bit quants); a lane chunk is one sub-block of 32, dequantized
// as the CPU reference does: (d * scale) * q - dmin * min.
#include "kernels/cuda/gemv.cuh"
#include "kernels/quant_blocks.h"

namespace ll3::cuda {

namespace {

constexpr int kQ4KBytes = sizeof(quant::BlockQ4_K);

struct Q4_KChunks {
  __device__ static void load(const uint8_t* row, int64_t c, float* v) {
    const uint8_t* b = row + (c / 8) * kQ4KBytes;
    const int j = static_cast<int>(c % 8);  // sub-block
    const float d = f16_to_f32(static_cast<uint16_t>(b[0] | (b[1] << 8)));
    const float dmin = f16_to_f32(static_cast<uint16_t>(b[2] | (b[3] << 8)));
    uint8_t s, m;
    quant::k4_scale_min(j, b + 4, &s, &m);
    const float d1 = __fmul_rn(d, static_cast<float>(s)), m1 = __fmul_rn(dmin, static_cast<float>(m));
    // Sub-blocks 2p and 2p + 1 share 32 bytes: low nibbles, then high.
    const uint4* q = reinterpret_cast<const uint4*>(b + 16 + 32 * (j / 2));
    const int shift = (j % 2) * 4;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const uint4 qq = __ldg(q + k);
      const uint32_t words[4] = {qq.x, qq.y, qq.z, qq.w};
#pragma unroll
      for (int wi = 0; wi < 4; ++wi) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int nib = (words[wi] >> (8 * e + shift)) & 0xF;
          v[16 * k + 4 * wi + e] = __fmul_rn(d1, static_cast<float>(nib)) - m1;
        }
      }
    }
  }
};

}  // namespace

Status gemv_q4_k(const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch, cudaStream_t s) {
  if (cols % 256 != 0) return Status::errorf("cuda gemv: Q4_K rows of %lld are not whole super-blocks", static_cast<long long>(cols));
  return launch_gemv<Q4_KChunks>(w, static_cast<size_t>(cols / 256) * kQ4KBytes, rows, cols, x, y, batch, s);
}

}  // namespace ll3::cuda
