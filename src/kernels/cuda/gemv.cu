// GEMV dispatch by weight type, and the float types (F32, F16, BF16: 32 elements are 128 / 64
// contiguous bytes, read as 16-byte vectors).
#include <string>

#include "kernels/cuda/gemv.cuh"

namespace ll3::cuda {

namespace {

struct F32Chunks {
  __device__ static void load(const uint8_t* row, int64_t c, float* v) {
    const float4* p = reinterpret_cast<const float4*>(row) + c * 8;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float4 q = __ldg(p + j);
      v[4 * j] = q.x;
      v[4 * j + 1] = q.y;
      v[4 * j + 2] = q.z;
      v[4 * j + 3] = q.w;
    }
  }
};

template <bool kBf16>
struct Half16Chunks {
  __device__ static void load(const uint8_t* row, int64_t c, float* v) {
    const uint4* p = reinterpret_cast<const uint4*>(row) + c * 4;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint4 q = __ldg(p + j);
      const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const auto lo = static_cast<uint16_t>(words[k] & 0xFFFFu), hi = static_cast<uint16_t>(words[k] >> 16);
        v[8 * j + 2 * k] = kBf16 ? bf16_to_f32(lo) : f16_to_f32(lo);
        v[8 * j + 2 * k + 1] = kBf16 ? bf16_to_f32(hi) : f16_to_f32(hi);
      }
    }
  }
};

}  // namespace

bool gemv_supported(DType type) {
  switch (type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_K: return true;
    default: return false;
  }
}

Status gemv(DType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch,
            cudaStream_t s) {
  switch (type) {
    case DType::F32: return launch_gemv<F32Chunks>(w, static_cast<size_t>(cols) * 4, rows, cols, x, y, batch, s);
    case DType::F16: return launch_gemv<Half16Chunks<false>>(w, static_cast<size_t>(cols) * 2, rows, cols, x, y, batch, s);
    case DType::BF16: return launch_gemv<Half16Chunks<true>>(w, static_cast<size_t>(cols) * 2, rows, cols, x, y, batch, s);
    case DType::Q8_0: return gemv_q8_0(w, rows, cols, x, y, batch, s);
    case DType::Q4_K: return gemv_q4_k(w, rows, cols, x, y, batch, s);
    default: return Status::errorf("cuda gemv: weight type %s has no CUDA kernel", std::string(dtype_name(type)).c_str());
  }
}

}  // namespace ll3::cuda
