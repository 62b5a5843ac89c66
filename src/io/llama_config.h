// Hyper-parameters of a LLaMA-3-architecture model, whatever file it came from: plain data that
// the file readers fill (io/hf_config for config.json, the model loader for GGUF metadata), so
// it lives in io/, below the model layer that uses it.
#pragma once

#include <cstdint>
#include <string>

namespace ll3 {

// Llama 3.1 "llama3" RoPE scaling (rope_scaling in config.json; GGUF stores the resulting
// per-dimension factors as the rope_freqs.weight tensor instead).
struct RopeScaling {
  bool enabled = false;
  float factor = 8.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int64_t original_context = 8192;
};

struct LlamaConfig {
  std::string name;          // general.name, or the directory name
  int64_t n_vocab = 0;
  int64_t dim = 0;           // embedding width
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;      // dim / n_heads unless the file says otherwise
  int64_t ffn_dim = 0;
  int64_t context_length = 0;
  float norm_eps = 1e-5f;
  float rope_theta = 500000.0f;
  RopeScaling rope_scaling;  // from config.json (GGUF: see has_rope_freqs)
  bool tied_embeddings = false;  // no separate output projection
  // Q/K rows in Hugging Face's rotate-half order (RoPE pairs dims i and i + head_dim/2) instead
  // of GGUF's adjacent pairs (2i, 2i+1). Attention is invariant under the same permutation of Q
  // and K, so both layouts give identical logits when RoPE pairs dims to match.
  bool rope_half_pairs = false;
};

}  // namespace ll3
