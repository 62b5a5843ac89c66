#include "backend/split_runner.h"

#include <algorithm>

#include "backend/cpu/cpu_runner.h"

namespace ll3 {

SplitRunner::SplitRunner(std::unique_ptr<ModelRunner> front, std::unique_ptr<ModelRunner> back,
                         std::unique_ptr<ModelRunner> head, int64_t dim, std::string where)
    : front_(std::move(front)), back_(std::move(back)), head_(std::move(head)), dim_(dim), where_(std::move(where)) {
  max_tokens_ = back_->max_batch_tokens();
  if (front_) max_tokens_ = std::min(max_tokens_, front_->max_batch_tokens());
  if (head_) max_tokens_ = std::min(max_tokens_, head_->max_batch_tokens());
  x_front_.resize(static_cast<size_t>(max_tokens_ * dim_));
  if (head_) x_back_.resize(static_cast<size_t>(max_tokens_ * dim_));
}

Status SplitRunner::forward(const BatchPlan& plan, float* logits, float* hidden) {
  return forward_part(plan, nullptr, nullptr, logits, hidden);
}

Status SplitRunner::forward_part(const BatchPlan& plan, const float* x_in, float* x_out, float* logits, float* hidden) {
  if (x_in != nullptr || x_out != nullptr) return Status::error("forward_part: a split pass runs whole steps only");
  const float* x = nullptr;
  if (front_) {
    LL3_RETURN_IF_ERROR(front_->forward_part(plan, nullptr, x_front_.data(), nullptr, nullptr));
    x = x_front_.data();
  }
  if (!head_) return back_->forward_part(plan, x, nullptr, logits, hidden);
  LL3_RETURN_IF_ERROR(back_->forward_part(plan, x, x_back_.data(), nullptr, nullptr));
  return head_->forward_part(plan, x_back_.data(), nullptr, logits, hidden);
}

std::unique_ptr<ModelRunner> with_cpu_parts(GpuPart gpu, const LlamaModel& model, KvCache& kv, ThreadPool& pool,
                                            const RunnerOptions& o) {
  const GpuPlacement& p = gpu.placement;
  const int64_t n = model.config.n_layers;
  if (p.first_layer == 0 && p.output) return std::move(gpu.runner);
  auto cpu = [&](LayerRange r) {
    return std::make_unique<CpuRunner>(model, kv, pool, o.max_batch_tokens, o.int8_activations, o.amx_prompts, r);
  };
  std::unique_ptr<ModelRunner> front, head;
  if (p.first_layer > 0) front = cpu({0, p.first_layer, false});
  if (!p.output) head = cpu({n, n, true});
  std::string where = gpu.runner->where();
  return std::make_unique<SplitRunner>(std::move(front), std::move(gpu.runner), std::move(head), model.config.dim,
                                       std::move(where));
}

}  // namespace ll3
