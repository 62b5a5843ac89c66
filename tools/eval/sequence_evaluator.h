// One sequence on a model, evaluated in batches through the runner, for the tools that want
// logits rather than a generated text (logits, perplexity, bench's pp/tg). Generation goes
// through the engine (ll3/engine.h), which drives the same runner with many sequences.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "kv/block_pool.h"
#include "kv/kv_cache.h"
#include "backend/cpu/cpu_runner.h"
#include "model/llama_model.h"

namespace ll3 {

struct EvaluatorOptions {
  int64_t context = 0;           // positions to hold (0: min(model context, 4096))
  int64_t batch = 256;           // prompt tokens per forward step
  int threads = 0;               // 0: all cores
  DType kv_type = DType::F16;    // F32, F16, Q8_0 or Q4_0 (head_dim % 32 == 0)
  // Quantized weights: 8-bit activations and integer dot products (fast; llama.cpp's native
  // arithmetic) or float activations (exact against dequantized weights).
  bool int8_activations = true;
  // With int8_activations: prompt batches of at least kBf16MinTokens tokens run on AMX bf16
  // tiles where the CPU has them (faster prompts; bf16 rounding instead of 8-bit activations,
  // so another answer than the decode path and every other CPU gives: off unless asked for).
  bool amx_prompts = false;
  ActivationTap tap;  // see backend/cpu/cpu_runner.h; debugging only
  // LoRA adapters the sequence runs with (model/lora.h); null: the base alone. Kept by the caller.
  const LoraSet* lora = nullptr;
};

class SequenceEvaluator {
 public:
  static Result<std::unique_ptr<SequenceEvaluator>> create(const LlamaModel& model, const EvaluatorOptions& opt);
  ~SequenceEvaluator();

  const LlamaModel& model() const { return model_; }
  int64_t n_past() const { return static_cast<int64_t>(history_.size()); }
  int64_t context() const { return context_; }
  const std::vector<int32_t>& history() const { return history_; }
  int64_t n_vocab() const { return model_.config.n_vocab; }

  // Appends tokens to the sequence. all_logits: (tokens.size(), n_vocab) wanted, else only the
  // last row's logits are kept. Fails with a clear message when the context would overflow.
  Status eval(std::span<const int32_t> tokens, bool all_logits = false);
  // Logits of the last evaluated position (n_vocab), or of every position of the last eval
  // call with all_logits (tokens.size() * n_vocab).
  const std::vector<float>& logits() const { return logits_; }
  const float* last_logits() const { return logits_.data() + logits_.size() - n_vocab(); }

  // Forgets everything after the first n tokens (e.g. to reuse a common prompt prefix).
  void truncate(int64_t n);

  ThreadPool& pool() { return *pool_; }

 private:
  SequenceEvaluator(const LlamaModel& m) : model_(m) {}
  const LlamaModel& model_;
  int64_t context_ = 0;
  int64_t batch_ = 0;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<BlockPool> pool_blocks_;  // its blocks (no prefix naming: one sequence)
  std::unique_ptr<CpuRunner> runner_;
  std::vector<int32_t> blocks_;   // block table of this sequence
  std::vector<int32_t> history_;  // tokens in the cache
  std::vector<float> logits_;
  std::vector<float> step_logits_;  // (batch, n_vocab) when all logits are wanted
  std::vector<int32_t> rows_;       // logit row indices of one step
  const LoraSet* lora_ = nullptr;   // EvaluatorOptions::lora
};

}  // namespace ll3
