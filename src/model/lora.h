// LoRA adapters (Hu et al., 2021): a low-rank correction beside the base model's products,
//
//   y = W x + s · B (A x),   A (rank, in), B (out, rank), s = alpha / rank (rsLoRA: alpha / √rank),
//
// times the scale a request asks for. The files (llama.cpp's GGUF adapters, PEFT directories) are
// read by io/lora_file.h; here they are checked against the base model they are loaded for and
// used in place from the mapped file: only the B of Q and K is copied when the adapter's rows are
// in the other RoPE layout than the base's (model/llama_model.h, rope_half_pairs). The runner
// applies them (backend/cpu/lora_products.h).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/aligned.h"
#include "core/status.h"
#include "kernels/weight_matrix.h"

namespace ll3 {

class LlamaModel;
struct LoraFile;

// The products of a layer an adapter may correct, in LlamaLayer's order.
enum class LoraTarget : int { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kLoraTargets = 7;
// GGUF's name of a target's weight ("attn_q"), and PEFT's module name ("q_proj").
const char* lora_target_gguf(LoraTarget t);
const char* lora_target_peft(LoraTarget t);

// One corrected product: A (rank, in) and B (out, rank) as weight matrices, and alpha / rank.
struct LoraPair {
  WeightMatrix a, b;
  // B in F32 panels of Bᵀ, what the runner's second product reads along the output columns
  // (kernels/lora_kernels.h); a copy the adapter keeps.
  const float* bt = nullptr;
  float scale = 0;
  bool present() const { return a.data != nullptr; }
};

struct LoraAdapter {
  LoraAdapter();
  ~LoraAdapter();  // out of line: the readers' types are complete there
  std::string path;
  std::string format;  // "gguf" or "peft"
  float alpha = 0;     // as the file says (0: none; the scale is then the request's alone)
  int64_t max_rank = 0;
  int64_t n_pairs = 0;
  std::vector<std::array<LoraPair, kLoraTargets>> layers;  // (n_layers) of the base
  LoraPair output;  // the LM head, when the adapter corrects it
  // Of its tensors' bytes, names and scales: what its KV (prefix cache, sessions) is keyed by, so
  // that no two adapters, and no adapter and the base, ever share cached rows.
  uint64_t fingerprint = 0;

  const LoraPair* pair(int64_t layer, LoraTarget t) const {
    const LoraPair& p = layers[static_cast<size_t>(layer)][static_cast<int>(t)];
    return p.present() ? &p : nullptr;
  }
  size_t bytes() const;  // of all its A and B, and of B's panels

  // What the views point into.
  std::unique_ptr<LoraFile> file;
  std::vector<AlignedVector<uint8_t>> copies;  // B rows moved into the base's RoPE layout, and Bᵀ
};

// Loads the adapter at `path` (a .gguf file, or a PEFT directory) for `base`. Every mismatch is
// an error that says what and where: another architecture, a tensor the base has no weight for,
// shapes that do not fit the base's, ranks of A and B that differ, a type the products cannot
// take, PEFT options ll3 does not apply (DoRA, fan_in_fan_out, bias, modules_to_save).
Result<std::unique_ptr<LoraAdapter>> load_lora(const std::string& path, const LlamaModel& base);

namespace lora_detail {
// The base weight a target corrects, or nullptr past the last layer (model/lora_write.cpp too).
const WeightMatrix* base_weight(const LlamaModel& base, int64_t layer, LoraTarget t);
}  // namespace lora_detail

}  // namespace ll3
