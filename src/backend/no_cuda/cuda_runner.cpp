// The CUDA runner of a build without CUDA.
#include "backend/cuda/cuda_runner.h"

namespace ll3 {

Result<GpuPart> make_cuda_runner(const LlamaModel&, KvCache&, const GpuRunnerOptions&) {
  return Status::error("this ll3 was built without CUDA");
}

}  // namespace ll3
