// Hugging Face config.json <-> LlamaConfig. Only LlamaForCausalLM is accepted; rope_scaling may
// be absent, "default", or "llama3" (Llama 3.1). Configs loaded from Hugging Face keep Q/K in
// rotate-half order, so rope_half_pairs is set.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/llama_config.h"

namespace ll3 {

// `origin` names the file in errors.
Result<LlamaConfig> parse_hf_config(std::string_view json_text, const std::string& origin);
// dir_or_file: a model directory (reads DIR/config.json; the name is the directory's) or the
// config.json itself.
Result<LlamaConfig> load_hf_config(const std::string& dir_or_file);

// Special token ids config.json carries (not part of LlamaConfig).
struct HfConfigTokens {
  int64_t bos_id = -1;           // -1: omitted
  std::vector<int64_t> eos_ids;  // one id is written as a number, several as a list
};

// config.json text for `c` (torch_dtype "float32" / "float16" / "bfloat16").
std::string hf_config_json(const LlamaConfig& c, const HfConfigTokens& tokens,
                           const std::string& torch_dtype);

// Llama 3.1 per-dimension RoPE frequency divisors (head_dim / 2 of them; GGUF's
// rope_freqs.weight) from the rope_scaling parameters, computed in float exactly as llama.cpp's
// converter does.
std::vector<float> llama3_rope_freq_factors(int64_t head_dim, float rope_theta,
                                            const RopeScaling& s);

}  // namespace ll3
