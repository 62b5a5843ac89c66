// The plain-data description of one forward step: which tokens of which sequences to process,
// where their KV lives, and which rows want logits. The scheduler builds it; the runner only
// reads it. There is no separate prefill or decode mode: a sequence with n_past computed tokens
// contributes n_tokens new ones (many for a prompt, one when generating).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ll3 {

struct SeqBatch {
  int32_t n_past = 0;       // tokens of this sequence already in the KV cache
  int32_t token_begin = 0;  // index of its first new token in BatchPlan::tokens
  int32_t n_tokens = 0;     // new tokens; their positions are n_past .. n_past + n_tokens - 1
  // KV blocks holding positions 0 .. n_past + n_tokens - 1 (block_size positions each).
  std::span<const int32_t> block_table;
};

struct LoraAdapter;
// The LoRA adapters (model/lora.h) one sequence runs with, each at a scale (times the adapter's
// own alpha / rank), applied in this order.
struct LoraUseOf {
  const LoraAdapter* adapter = nullptr;
  float scale = 1.0f;
};
struct LoraSet {
  std::vector<LoraUseOf> uses;
};

struct BatchPlan {
  std::span<const int32_t> tokens;      // all sequences' new tokens, sequence after sequence
  std::span<const SeqBatch> seqs;
  std::span<const int32_t> logit_rows;  // indices into tokens whose logits are wanted, in order
  // Indices into tokens whose final hidden state (after the output norm: what the LM head
  // reads) is wanted, in order: embedding requests pool them. Usually empty.
  std::span<const int32_t> hidden_rows;
  // LoRA: the adapter sets this step's sequences run with, and per sequence (seqs' order) an
  // index into them, or -1 for the base model alone. Both empty: every sequence is the base's.
  std::span<const LoraSet* const> lora_sets = {};
  std::span<const int32_t> seq_lora = {};
};

}  // namespace ll3
