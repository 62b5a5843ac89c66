// Model presets: LLaMA-3-architecture shapes (tiny for tests, the real Llama 3.x sizes for
// benchmarks) written as GGUF files with seeded random weights and the real Llama-3 tokenizer,
// following llama.cpp's GGUF conventions so llama.cpp loads them too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "io/hf_config.h"  // llama3_rope_freq_factors
#include "io/llama_config.h"

namespace ll3 {

class GgufWriter;
struct TokenizerVocab;

struct ModelPreset {
  const char* name;
  const char* summary;
  LlamaConfig config;  // n_vocab is the tokenizer's
  // Llama 3.1 rope scaling: a rope_freqs.weight tensor from config.rope_scaling.
  bool rope_freqs = false;
};

const std::vector<ModelPreset>& model_presets();
const ModelPreset* find_preset(std::string_view name);

// Where the Llama-3 tokenizer (tokenizer.json + tokenizer_config.json) is: `flag` if given, else
// $LL3_SHARED/tokenizers/llama3, else shared/tokenizers/llama3 beside any parent directory of the
// ll3 executable or of the working directory (../shared next to the repository), else
// $HOME/.cache/ll3/tokenizer/llama3 (where scripts/fetch-tokenizer.sh puts it).
Result<std::string> find_llama3_tokenizer_dir(const std::string& flag = "");

struct MakeModelOptions {
  DType type = DType::F16;  // F32, F16 or BF16 for matrices and embeddings; norms stay F32
  uint64_t seed = 0;
  int threads = 0;  // 0: all cores
};

// Writes `preset` as a GGUF file. Weights are uniform random with the std the shapes call for
// (1/sqrt(fan_in) for layer matrices, 0.02 for embeddings, norms near 1, the final norm scaled so
// that the logits are not flat); the same seed gives the same bytes on any thread count.
Status write_preset_model(const ModelPreset& preset, const TokenizerVocab& vocab,
                          const MakeModelOptions& opt, const std::string& out_path);

// What every make-model writer shares (model/copy_model.h writes other weights): the checks of
// its options and vocabulary, and the llama.* and tokenizer.* metadata in llama.cpp's order.
Status check_make_model_inputs(const MakeModelOptions& opt, const TokenizerVocab& vocab);
void set_preset_metadata(GgufWriter& w, const ModelPreset& preset, const TokenizerVocab& vocab,
                         DType type, const std::string& general_name);

}  // namespace ll3
