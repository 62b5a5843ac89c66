// A forward pass split between devices, as `-ngl N` asks when N is below the model's layers:
// the first layers on the CPU, the last N on the GPU, and the output layer on the GPU when it
// fits there, else back on the CPU. The residual stream crosses once per direction per step:
//
//   x (T, dim) = layers [0, F) of embedding(tokens)          front, CPU
//   x          = layers [F, L) of x                            back, GPU
//   logits     = W_out norm(x[logit rows])                     back, or the CPU's head part
//
// Each part writes its own layers' K and V into the engine's host KvCache (the GPU part through
// its device mirror), so the cache, prefix sharing and sessions see one model.
#pragma once

#include <memory>
#include <string>

#include "backend/cuda/cuda_runner.h"
#include "backend/runner.h"
#include "core/aligned.h"

namespace ll3 {

class SplitRunner final : public ModelRunner {
 public:
  // front: the layers [0, F) without the output layer (null when F is 0); back: [F, L), with
  // or without it; head: the output layer alone, exactly when back has none. dim: the model's
  // width.
  SplitRunner(std::unique_ptr<ModelRunner> front, std::unique_ptr<ModelRunner> back, std::unique_ptr<ModelRunner> head,
              int64_t dim, std::string where);

  int64_t max_batch_tokens() const override { return max_tokens_; }
  Status forward(const BatchPlan& plan, float* logits, float* hidden) override;
  using ModelRunner::forward;
  Status forward_part(const BatchPlan& plan, const float* x_in, float* x_out, float* logits, float* hidden) override;
  std::string where() const override { return where_; }

 private:
  std::unique_ptr<ModelRunner> front_, back_, head_;
  int64_t dim_, max_tokens_;
  std::string where_;
  AlignedVector<float> x_front_, x_back_;  // (T, dim) the stream between the parts
};

// The GPU's part of a model as one runner with the CPU's parts around it (CPU runners of o's
// settings for the layers before the GPU's and, unless the GPU holds it, the output layer); the
// GPU's runner itself when it holds everything.
std::unique_ptr<ModelRunner> with_cpu_parts(GpuPart gpu, const LlamaModel& model, KvCache& kv, ThreadPool& pool,
                                            const RunnerOptions& o);

}  // namespace ll3
