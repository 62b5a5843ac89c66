// The model on a CUDA device, behind the engine's ModelRunner interface. Built only with CUDA
// (backend/cuda/cuda_runner.cpp); without it make_cuda_runner says so (backend/no_cuda).
#pragma once

#include <cstdint>
#include <memory>

#include "core/log.h"
#include "core/status.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"
#include "backend/runner.h"

namespace ll3 {

struct GpuRunnerOptions {
  int device = 0;
  int64_t max_batch_tokens = 256;
  Logger log;  // notes on weights the kernels do not read as stored
};

// Every layer on the device: the weights uploaded once (F32, F16, BF16, Q8_0 and Q4_K as
// stored; other types dequantized to F16, with a note to options.log), a device copy of the paged
// KV cache (F16, same block ids as `kv`, whose rows the runner keeps up to date so that prefix
// sharing, copy on write and sessions work unchanged), and all scratch allocated here. An error
// says why it cannot be made: built without CUDA, no device, a KV type other than F16, a shape
// the kernels do not take, or too little device memory.
Result<std::unique_ptr<ModelRunner>> make_cuda_runner(const LlamaModel& model, KvCache& kv, const GpuRunnerOptions& options);

}  // namespace ll3
