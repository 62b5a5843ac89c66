// Writing LoRA adapters and merging them: `ll3 make-lora` (seeded random adapters for tests and
// benchmarks, in both of the formats model/lora.h reads, with the same values) and
// `ll3 export-lora` (an adapter folded into a copy of its base: W + s · B A).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "model/lora.h"

namespace ll3 {

struct RandomLoraOptions {
  int64_t rank = 16;
  float alpha = 32;
  uint32_t seed = 1;
  DType type = DType::F32;  // F32, F16 or BF16
  std::vector<LoraTarget> targets = {LoraTarget::kQ,    LoraTarget::kK,  LoraTarget::kV,   LoraTarget::kO,
                                     LoraTarget::kGate, LoraTarget::kUp, LoraTarget::kDown};
  bool output = false;  // the LM head too
  bool rslora = false;  // PEFT's use_rslora: scale alpha / sqrt(rank) (the GGUF gets the alpha that gives it)
  // The typical size of a correction against its base product's: A has N(0, 1/in) entries, and
  // B's spread is set from the base weight's so that s · B A x is about this times W x.
  float strength = 0.3f;
};

// A seeded random adapter for `base`, written as a llama.cpp GGUF adapter (gguf_path) and/or a
// PEFT directory (peft_dir; made if missing) holding the same values, each in its own RoPE row
// order. Either path may be empty.
Status write_random_lora(const LlamaModel& base, const RandomLoraOptions& options, const std::string& gguf_path,
                         const std::string& peft_dir);

// A copy of the GGUF base with each adapter (at its scale) folded into the weights it corrects:
// rows dequantized to float, W + s · B A added in double, written as `merged_type` (F32, F16 or
// BF16), or, when that is unset (DType::Q8_K, never a weight type), as the base tensor's own
// float type, else F16 (as llama.cpp's export-lora). Every other tensor is copied as it is.
Status merge_lora(const LlamaModel& base, const std::vector<std::pair<const LoraAdapter*, float>>& adapters,
                  const std::string& out_path, DType merged_type = DType::Q8_K);

}  // namespace ll3
