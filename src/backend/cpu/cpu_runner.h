// The LLaMA forward pass over a BatchPlan: tokens of one or more sequences in, logits of the
// requested rows out, K/V appended to the paged cache. All scratch is allocated once, for the
// largest batch, when the runner is made; a step allocates nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/aligned.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "model/batch_plan.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"
#include "backend/cpu/lora_products.h"
#include "backend/runner.h"

namespace ll3 {

// An observer of the forward pass's activations, for finding where two engines part: it is
// called after each op with the op's output, (rows, cols) floats, named as llama.cpp names its
// graph nodes (attn_norm, Qcur, Kcur, Vcur, kqv_out, attn_out, ffn_inp, ffn_norm, ffn_gate,
// ffn_up, ffn_swiglu, ffn_out, l_out, result_norm) so that dumps of the two compare by name.
// layer is -1 for the ops outside the layers. Also what `ll3 imatrix` collects from: attn_norm,
// kqv_out, ffn_norm, ffn_swiglu and result_norm are the float inputs of the matrix products
// (quant/imatrix.h maps them to weights), reported before any 8-bit quantization of them.
// Without a tap the pass pays one null check per op.
using ActivationTap =
    std::function<void(const char* name, int64_t layer, const float* data, int64_t rows, int64_t cols)>;

// The layers a runner computes: [begin, end), and the output layer (norm and LM head) or not.
// A runner of all of them is the whole pass; a part of a split pass otherwise
// (backend/split_runner.h): [0, F) on the CPU before a GPU's layers, or only the output layer
// after them ({n_layers, n_layers, true}).
struct LayerRange {
  int64_t begin = 0;
  int64_t end = -1;  // -1: the model's last layer
  bool output = true;
};

class CpuRunner final : public ModelRunner {
 public:
  // int8_activations, amx_prompts: see MatmulScratch (int8_activations, bf16).
  CpuRunner(const LlamaModel& model, KvCache& kv, ThreadPool& pool, int64_t max_batch_tokens,
              bool int8_activations = true, bool amx_prompts = true, LayerRange layers = {});

  int64_t max_batch_tokens() const override { return max_tokens_; }

  // Runs one step. logits: (plan.logit_rows.size(), n_vocab); hidden: (plan.hidden_rows.size(),
  // dim). Fails (without touching the cache) on a plan that does not fit: too many tokens, a
  // token id out of range, or block tables too short for the positions.
  Status forward(const BatchPlan& plan, float* logits, float* hidden) override;
  using ModelRunner::forward;
  Status forward_part(const BatchPlan& plan, const float* x_in, float* x_out, float* logits, float* hidden) override;
  std::string where() const override { return "cpu"; }
  bool supports_lora() const override { return lora_ != nullptr; }
  // Makes the scratch of LoRA products (backend/cpu/lora_products.h): steps may then carry
  // adapters. Once, before the first step that has any.
  void enable_lora();

  void set_tap(ActivationTap tap) { tap_ = std::move(tap); }
  // (run, KV head) pairs the last step split over the threads by chunks of positions.
  int64_t attention_splits() const { return static_cast<int64_t>(att_splits_.size()); }

 private:
  Status validate(const BatchPlan& plan) const;
  void plan_attention_runs(const BatchPlan& plan);
  void attention(const BatchPlan& plan, int64_t layer);
  // xb = rmsnorm(x) * weight for the T batch rows, split across the threads.
  void rmsnorm_rows(const float* weight, int64_t T);
  void add_residual(int64_t T, const float* norm_weight);
  void layer(const BatchPlan& plan, int64_t l, int64_t T);
  void output(const BatchPlan& plan, float* logits, float* hidden);
  // y += the adapters' corrections of product t (layer -1: the LM head) for the rows that have any.
  void lora(const BatchPlan& plan, const int32_t* row_seq, int64_t rows, int64_t layer, LoraTarget t, const float* x,
            int64_t x_cols, float* y, int64_t y_cols) {
    if (lora_ && LoraProducts::any(plan)) lora_->add(pool_, plan, row_seq, rows, layer, t, x, x_cols, y, y_cols);
  }
  void tap(const char* name, int64_t layer, const AlignedVector<float>& buf, int64_t rows, int64_t cols) const {
    if (tap_) tap_(name, layer, buf.data(), rows, cols);
  }

  const LlamaModel& m_;
  const LlamaConfig& c_;
  KvCache& kv_;
  ThreadPool& pool_;
  int64_t max_tokens_;
  int64_t q_dim_, kv_dim_;
  LayerRange range_;

  // Scratch, T = max_batch_tokens, on cache lines (core/aligned.h).
  AlignedVector<float> x_;        // (T, dim) residual stream
  AlignedVector<float> xb_;       // (T, dim) normed input of a sub-layer
  AlignedVector<float> q_;        // (T, n_heads * head_dim)
  AlignedVector<float> k_;        // (T, n_kv_heads * head_dim)
  AlignedVector<float> v_;        // (T, n_kv_heads * head_dim)
  AlignedVector<float> att_;      // (T, n_heads * head_dim) attention output
  AlignedVector<float> proj_;     // (T, dim) output of wo / w_down
  AlignedVector<float> gate_;     // (T, ffn_dim)
  AlignedVector<float> up_;       // (T, ffn_dim)
  AlignedVector<float> rope_cos_; // (T, head_dim / 2)
  AlignedVector<float> rope_sin_; // (T, head_dim / 2)
  AlignedVector<float> att_scratch_;  // (n_threads, att_scratch_floats_) attention scores and partials
  int64_t att_scratch_floats_ = 0;
  // Rows of one sequence attending together (plan_attention_runs): up to kMaxAttendRows.
  struct AttentionRun {
    int64_t row;  // the first batch row
    int m;        // rows
  };
  std::vector<AttentionRun> runs_;
  // The attention's jobs: a (run, KV head) pair whole, or one chunk of its positions into a
  // partial (part >= 0), merged after all the chunks by the pair's AttentionSplit.
  struct AttentionJob {
    int32_t run, head, chunk, part;
  };
  struct AttentionSplit {
    int32_t run, head, first_part, n_parts;
  };
  std::vector<AttentionJob> att_jobs_;
  std::vector<AttentionSplit> att_splits_;
  std::vector<kernels::AttendPartial> att_parts_;
  // The split pairs' partials: at most kPartialFloats (4 MiB; 1B, 128k positions, one
  // sequence: 1 MiB).
  static constexpr int64_t kPartialFloats = int64_t{1} << 20;
  AlignedVector<float> part_out_;
  AlignedVector<float> part_max_;
  std::vector<double> part_sum_;
  AlignedVector<float> wrows_;    // (n_threads, kLaneRowBlock, max cols) dequantized weight rows
  AlignedVector<float> xlanes_;   // lane-major float GEMM: packed activations (MatmulScratch::xlanes)
  AlignedVector<float> wlanes_;   // and packed weight rows per thread
  AlignedVector<uint8_t> xq_;     // (T, xq_row_bytes(max cols)) 8-bit activations
  AlignedVector<float> act_scales_;  // (T) W8A8 activation rows' scales
  AlignedVector<uint8_t> panel_act_;  // see MatmulScratch::panel_act
  AlignedVector<uint8_t> wbuf_;   // (n_threads, matmul_wbuf_bytes) weight rows unpacked from panels
  AlignedVector<float> xr_;       // 8-bit mode: activations rounded for F16 / BF16 weights (MatmulScratch::xr)
  AlignedVector<uint16_t> xbf_;   // AMX only: packed bf16 activations (see MatmulScratch)
  std::vector<int32_t> token_pos_;  // (T) position of each batch row
  std::vector<int32_t> token_seq_;  // (T) sequence index of each batch row
  std::vector<int32_t> logit_seq_;  // (T) sequence index of each logit row
  std::unique_ptr<LoraProducts> lora_;
  MatmulScratch mm_scratch_;
  ActivationTap tap_;
};

}  // namespace ll3
