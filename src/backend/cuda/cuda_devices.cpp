// The CUDA queries through the runtime API. A missing driver or device is an answer, not an
// error: ll3 then runs on the CPU.
#include <cuda_runtime_api.h>

#include "backend/backend.h"

#ifndef LL3_CUDA_ARCHS
#define LL3_CUDA_ARCHS ""
#endif

namespace ll3 {

std::vector<CudaDeviceInfo> cuda_devices(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why != nullptr) {
      *why = e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice
                 ? std::string("no NVIDIA driver or GPU: ") + cudaGetErrorString(e)
                 : e != cudaSuccess ? std::string(cudaGetErrorString(e)) : std::string("no CUDA device");
    }
    cudaGetLastError();  // clear the sticky error of a failed query
    return {};
  }
  std::vector<CudaDeviceInfo> out;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    CudaDeviceInfo d;
    d.index = i;
    d.name = p.name;
    d.cc_major = p.major;
    d.cc_minor = p.minor;
    d.sm_count = p.multiProcessorCount;
    d.total_memory = static_cast<int64_t>(p.totalGlobalMem);
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      d.free_memory = static_cast<int64_t>(free_b);
    }
    out.push_back(d);
  }
  if (out.empty() && why != nullptr) *why = "no CUDA device answered";
  return out;
}

std::string cuda_compiled_archs() { return LL3_CUDA_ARCHS; }

}  // namespace ll3
