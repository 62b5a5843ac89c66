// LoRA adapter files as they are stored, before any base model is involved (model/lora.h binds
// them to one): llama.cpp's GGUF adapters (general.type "adapter", adapter.type "lora",
// general.architecture, adapter.lora.alpha, tensors <weight>.lora_a [in, rank] / .lora_b
// [rank, out]) and PEFT directories (adapter_config.json: peft_type LORA, r, lora_alpha,
// target_modules, use_rslora, rank_pattern, alpha_pattern; adapter_model.safetensors:
// base_model.model.model.layers.N.<self_attn|mlp>.<module>.lora_A.weight [r, in] and .lora_B.weight
// [out, r], base_model.model.lm_head.*). Every name, key and option is checked here, and refused
// with what and where when ll3 cannot apply it; shapes against the base are the binder's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace ll3 {

class GgufFile;
class SafetensorsFile;

// The products of a layer an adapter may correct, in a layer's order (q, k, v, o, gate, up, down).
inline constexpr int kLoraTargetCount = 7;
const char* lora_target_gguf_name(int target);  // "attn_q"
const char* lora_target_peft_name(int target);  // "q_proj"

// One stored tensor of a pair.
struct LoraTensor {
  std::string name;
  DType type = DType::F32;
  int64_t rows = 0, cols = 0;  // row-major: rows of cols elements
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
};

struct LoraFilePair {
  int64_t layer = 0;  // -1: the LM head
  int target = 0;     // for a layer: 0 .. kLoraTargetCount - 1
  std::string where;  // how messages name it: 'blk.0.attn_q.weight', 'model.layers.0.self_attn.q_proj'
  LoraTensor a, b;    // A (rank, in), B (out, rank)
  double alpha = 0;   // its alpha (0: none: the request's scale alone)
  int64_t rank = 0;   // the rank the file says it has (PEFT's r or rank_pattern); 0: A's rows
  bool rslora = false;
  bool hf_rows = false;  // B's rows (of Q and K) in Hugging Face's rotate-half order, not GGUF's
};

struct LoraFile {
  std::string format;  // "gguf" or "peft"
  double alpha = 0;
  std::vector<LoraFilePair> pairs;
  std::unique_ptr<GgufFile> gguf;  // what the tensors point into
  std::unique_ptr<SafetensorsFile> safetensors;
  LoraFile();
  LoraFile(LoraFile&&) noexcept;
  ~LoraFile();
};

// From a parsed GGUF file (kept by the result).
Result<LoraFile> read_gguf_lora(std::unique_ptr<GgufFile> file);
// From adapter_config.json's text and the parsed adapter_model.safetensors (kept).
Result<LoraFile> read_peft_lora(std::string_view config_json, std::unique_ptr<SafetensorsFile> tensors);
// A .gguf file, or a PEFT directory.
Result<LoraFile> open_lora_file(const std::string& path);

}  // namespace ll3
