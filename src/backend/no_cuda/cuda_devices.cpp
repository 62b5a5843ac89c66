// The CUDA queries of a build without CUDA (LL3_CUDA=OFF or no nvcc).
#include "backend/backend.h"

namespace ll3 {

std::vector<CudaDeviceInfo> cuda_devices(std::string* why) {
  if (why != nullptr) *why = "this ll3 was built without CUDA";
  return {};
}

std::string cuda_compiled_archs() { return ""; }

}  // namespace ll3
