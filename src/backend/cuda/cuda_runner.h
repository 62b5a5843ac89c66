// The model on a CUDA device, behind the engine's ModelRunner interface. Built only with CUDA
// (backend/cuda/cuda_runner.cpp); without it make_cuda_runner says so (backend/no_cuda).
#pragma once

#include <cstdint>
#include <memory>

#include "core/log.h"
#include "core/status.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"
#include "backend/gpu_placement.h"
#include "backend/runner.h"

namespace ll3 {

struct GpuRunnerOptions {
  int device = 0;
  int64_t max_batch_tokens = 256;
  // -1: every layer and the output layer, when they fit; N > 0: the last N layers, and the output
  // layer when it fits beside them (backend/gpu_placement.h).
  int gpu_layers = -1;
  int64_t memory_cap = 0;  // bytes of device memory at most; 0: what the device has free
  bool output_on_cpu = false;  // leave the output layer to the CPU even where it fits (tests, sweeps)
  // The layers placement leaves off the device run on it anyway, their weights in pinned host
  // memory that the kernels read over PCIe (their KV and norms on the device); not yet run on a
  // GPU. The placement then says first_layer 0 and counts them in host_weight_layers.
  bool host_weights_pinned = false;
  // Steps of up to 64 rows as CUDA graphs (backend/graph_buckets.h); not yet run on a GPU, so off
  // unless LL3_CUDA_GRAPHS=1 (make_runner) or set here.
  bool graphs = false;
  // Attention over sequences longer than 512 positions split into 512-position chunks merged by a
  // second kernel (flash-decoding; kernels/cuda/attention_decode.cu); not yet run on a GPU, so off
  // unless LL3_CUDA_SPLIT_ATTN=1 (make_runner) or set here.
  bool split_attention = false;
  // Q5_K and Q6_K weights read in place by the tensor-core product (else dequantized to F16 at
  // load); not yet run on a GPU, so off unless LL3_CUDA_Q5Q6=1 (make_runner) or set here.
  bool q5_q6_in_place = false;
  Logger log;  // notes on weights the kernels do not read as stored
};

// The GPU's part of the model and where the rest runs: layers [0, placement.first_layer) and,
// unless placement.output, the output layer are the CPU's (backend/split_runner.h).
struct GpuPart {
  int64_t host_weight_layers = 0;  // layers [0, this) read their weights from pinned host memory
  std::unique_ptr<ModelRunner> runner;
  GpuPlacement placement;
};

// The placed layers on the device: the weights uploaded once (F32, F16, BF16, Q8_0 and Q4_K as
// stored, Q5_K and Q6_K too with q5_q6_in_place; other types dequantized to F16, with a note to options.log), a device copy of those
// layers' paged KV cache (F16, same block ids as `kv`, whose rows the runner keeps up to date so
// that prefix sharing, copy on write and sessions work unchanged), and all scratch allocated
// here. An error says why it cannot be made: built without CUDA, no device, a KV type other than
// F16, a shape the kernels do not take, or too little device memory (with how many layers fit).
Result<GpuPart> make_cuda_runner(const LlamaModel& model, KvCache& kv, const GpuRunnerOptions& options);

}  // namespace ll3
