// What runs the model for the engine: one forward step over a BatchPlan. The CPU runner
// (backend/cpu/cpu_runner.h) and the CUDA one (backend/cuda/cuda_runner.h) implement it; the engine,
// its scheduler and the KV cache's block tables are the same for both.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/log.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/batch_plan.h"
#include "model/llama_model.h"

namespace ll3 {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // The most tokens one step may carry.
  virtual int64_t max_batch_tokens() const = 0;

  // Runs one step. logits: (plan.logit_rows.size(), n_vocab), on the host; hidden:
  // (plan.hidden_rows.size(), dim), the final normed hidden state of those rows (may be null
  // when none are asked for). The new positions' K and V are in the engine's KvCache when it
  // returns. Fails, without touching the cache, on a plan that does not fit (too many tokens, a
  // token id out of range, block tables too short).
  virtual Status forward(const BatchPlan& plan, float* logits, float* hidden) = 0;
  Status forward(const BatchPlan& plan, float* logits) { return forward(plan, logits, nullptr); }

  // One part of a pass split between devices (backend/split_runner.h): this runner's layers
  // only, from x_in, the residual stream entering its first layer ((T, dim); null for the
  // tokens' embeddings, when that layer is 0), to x_out, the stream after its last layer, when
  // the output layer is not its own, else to logits and hidden rows as forward() does.
  virtual Status forward_part(const BatchPlan& plan, const float* x_in, float* x_out, float* logits, float* hidden) = 0;

  // Where the steps run, for logs and `ll3 bench`: "cpu", "cuda:0 NVIDIA H200, 32 of 32 layers".
  virtual std::string where() const = 0;
  // Whether steps may carry LoRA adapters (BatchPlan::lora_sets): the CPU runner's products.
  virtual bool supports_lora() const { return false; }
};

// The checks every runner makes before a step: at most max_tokens tokens, ids below n_vocab,
// sequences covering the batch in order, block tables long enough and their ids below n_blocks
// (bs positions each), logit and hidden rows inside the batch; LoRA set indices inside the
// plan's sets, and none at all for a runner without LoRA products (lora false).
Status validate_plan(const BatchPlan& plan, int64_t max_tokens, int64_t n_vocab, int64_t bs, int64_t n_blocks,
                     bool lora = false);

struct RunnerOptions {
  // Layers on the CUDA device: -1 all of them when a device is usable and they fit (else the
  // CPU, saying why and how many would fit), 0 none; a positive count asks for the GPU and fails
  // without one. A count below the model's layers splits the pass: the first layers on the CPU,
  // the last ones on the GPU (backend/split_runner.h), the output layer where it fits.
  int gpu_layers = -1;
  int64_t gpu_memory = 0;        // most bytes of device memory to use; 0: what the device has free
  // The layers whose weights do not fit on the device: false, the CPU runs them; true, the GPU
  // does, reading their weights over PCIe from pinned host memory (--host-weights pinned).
  bool host_weights_pinned = false;
  int64_t max_batch_tokens = 256;
  bool int8_activations = true;  // CPU: 8-bit activations for quantized weights
  bool amx_prompts = false;      // CPU: AMX bf16 tiles for prompts where present
  bool lora = false;             // steps may carry LoRA adapters: the CPU runner, which has their products
  Logger log;                    // where the choice is reported
};

// The runner for `model` over the cache `kv`: the GPU when one is usable and asked for, else
// the CPU on `pool`.
Result<std::unique_ptr<ModelRunner>> make_runner(const LlamaModel& model, KvCache& kv, ThreadPool& pool,
                                                 const RunnerOptions& options);

}  // namespace ll3
