// What runs the model for the engine: one forward step over a BatchPlan. The CPU runner
// (model/llama_forward.h) and the CUDA one (backend/gpu_runner.h) implement it; the engine,
// its scheduler and the KV cache's block tables are the same for both.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "model/batch_plan.h"

namespace ll3 {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // The most tokens one step may carry.
  virtual int64_t max_batch_tokens() const = 0;

  // Runs one step. logits: (plan.logit_rows.size(), n_vocab), on the host. The new positions'
  // K and V are in the engine's KvCache when it returns. Fails, without touching the cache, on
  // a plan that does not fit (too many tokens, a token id out of range, block tables too short).
  virtual Status forward(const BatchPlan& plan, float* logits) = 0;

  // Where the steps run, for logs and `ll3 bench`: "cpu", "cuda:0 NVIDIA H200, 32 of 32 layers".
  virtual std::string where() const = 0;
};

// The checks every runner makes before a step: at most max_tokens tokens, ids below n_vocab,
// sequences covering the batch in order, block tables long enough and their ids below n_blocks
// (bs positions each), logit rows inside the batch.
Status validate_plan(const BatchPlan& plan, int64_t max_tokens, int64_t n_vocab, int64_t bs, int64_t n_blocks);

}  // namespace ll3
