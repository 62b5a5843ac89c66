#include "backend/runner.h"

#include <cstdlib>

#include "backend/backend.h"
#include "backend/cpu/cpu_runner.h"
#include "backend/cuda/cuda_runner.h"
#include "backend/split_runner.h"

namespace ll3 {

Status validate_plan(const BatchPlan& plan, int64_t max_tokens, int64_t n_vocab, int64_t bs, int64_t n_blocks, bool lora) {
  const int64_t n = static_cast<int64_t>(plan.tokens.size());
  if (n == 0) return Status::error("forward: empty batch");
  if (n > max_tokens) {
    return Status::errorf("forward: batch of %lld tokens exceeds the maximum of %lld",
                          static_cast<long long>(n), static_cast<long long>(max_tokens));
  }
  for (int32_t t : plan.tokens) {
    if (t < 0 || t >= n_vocab) {
      return Status::errorf("forward: token id %d is out of range (vocabulary of %lld)", t,
                            static_cast<long long>(n_vocab));
    }
  }
  int64_t covered = 0;
  for (const SeqBatch& s : plan.seqs) {
    if (s.token_begin != covered || s.n_tokens <= 0 || s.n_past < 0) {
      return Status::error("forward: sequences must cover the batch in order, each with tokens");
    }
    covered += s.n_tokens;
    const int64_t end = static_cast<int64_t>(s.n_past) + s.n_tokens;
    if (static_cast<int64_t>(s.block_table.size()) * bs < end) {
      return Status::errorf("forward: block table of %zu blocks cannot hold %lld positions",
                            s.block_table.size(), static_cast<long long>(end));
    }
    for (int32_t b : s.block_table) {
      if (b < 0 || b >= n_blocks) return Status::errorf("forward: KV block id %d out of range", b);
    }
  }
  if (covered != n) return Status::error("forward: sequences do not cover the batch");
  for (int32_t r : plan.logit_rows) {
    if (r < 0 || r >= n) return Status::errorf("forward: logit row %d out of range", r);
  }
  for (int32_t r : plan.hidden_rows) {
    if (r < 0 || r >= n) return Status::errorf("forward: hidden row %d out of range", r);
  }
  if (!plan.seq_lora.empty() || !plan.lora_sets.empty()) {
    if (!lora) return Status::error("forward: LoRA adapters run on the CPU only (this runner has no LoRA products)");
    if (plan.seq_lora.size() != plan.seqs.size()) return Status::error("forward: seq_lora must name a set (or -1) for every sequence");
    for (int32_t k : plan.seq_lora) {
      if (k < -1 || k >= static_cast<int32_t>(plan.lora_sets.size())) return Status::errorf("forward: LoRA set %d out of range", k);
    }
  }
  return Status();
}

namespace {

// The switches of GPU code that no GPU has run yet: on only when the variable is "1".
bool switched_on(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == "1";
}

}  // namespace

Result<std::unique_ptr<ModelRunner>> make_runner(const LlamaModel& model, KvCache& kv, ThreadPool& pool,
                                                 const RunnerOptions& o) {
  if (o.gpu_layers < -1) return Status::invalid("gpu_layers must be -1 (all), 0 or a layer count", "gpu_layers");
  if (o.gpu_memory < 0) return Status::invalid("gpu_memory must not be negative", "gpu_memory");
  // Static W8A8 (model/w8a8_format.h) has CPU kernels only.
  constexpr const char* kW8A8CpuOnly = "the model's W8A8 (static int8) weights have CPU kernels only";
  if (o.gpu_layers > 0 && model.has_w8a8_weights()) {
    return Status::invalid(std::string("--gpu-layers: ") + kW8A8CpuOnly + " (use --gpu-layers 0)", "gpu_layers");
  }
  constexpr const char* kLoraCpuOnly = "LoRA adapters have CPU products only";
  if (o.gpu_layers > 0 && o.lora) return Status::invalid(std::string("--gpu-layers: ") + kLoraCpuOnly + " (use --gpu-layers 0)", "gpu_layers");
  std::string why;
  if (o.gpu_layers != 0 && model.has_w8a8_weights()) {
    if (!cuda_devices(&why).empty()) o.log.warn(std::string("not on the GPU: ") + kW8A8CpuOnly);
  } else if (o.gpu_layers != 0 && o.lora) {
    if (!cuda_devices(&why).empty()) o.log.warn(std::string("not on the GPU: ") + kLoraCpuOnly);
  } else if (o.gpu_layers != 0 && !cuda_devices(&why).empty()) {
    GpuRunnerOptions go;
    go.max_batch_tokens = o.max_batch_tokens;
    go.gpu_layers = o.gpu_layers;
    go.memory_cap = o.gpu_memory;
    go.host_weights_pinned = o.host_weights_pinned;
    go.graphs = switched_on("LL3_CUDA_GRAPHS");
    go.split_attention = switched_on("LL3_CUDA_SPLIT_ATTN");
    go.q5_q6_in_place = switched_on("LL3_CUDA_Q5Q6");
    go.log = o.log;
    Result<GpuPart> g = make_cuda_runner(model, kv, go);
    if (g.ok()) {
      std::unique_ptr<ModelRunner> r = with_cpu_parts(std::move(g.value()), model, kv, pool, o);
      o.log.info("running on " + r->where());
      return r;
    }
    if (o.gpu_layers > 0) return g.status();
    o.log.warn("not on the GPU (" + g.message() + "): running on the CPU");
  } else if (o.gpu_layers > 0) {
    return Status::error("--gpu-layers: " + (cuda_compiled_archs().empty() ? std::string("this ll3 was built without CUDA") : why));
  }
  auto cpu = std::make_unique<CpuRunner>(model, kv, pool, o.max_batch_tokens, o.int8_activations, o.amx_prompts);
  if (o.lora) cpu->enable_lora();
  return std::unique_ptr<ModelRunner>(std::move(cpu));
}

}  // namespace ll3
