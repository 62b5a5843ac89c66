// The weights of a LLaMA-3 model, as views into the mapped checkpoint (GGUF file or Hugging Face
// safetensors directory). Matrices are used in place, in whatever type the file stores them;
// only the small norm and RoPE vectors are converted to float at load.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mmap_file.h"
#include "core/status.h"
#include "kernels/weight_matrix.h"
#include "io/llama_config.h"

namespace ll3 {

class GgufFile;
class SafetensorsModel;

struct LlamaLayer {
  std::vector<float> attn_norm;  // (dim)
  WeightMatrix wq;               // (n_heads * head_dim, dim)
  WeightMatrix wk;               // (n_kv_heads * head_dim, dim)
  WeightMatrix wv;               // (n_kv_heads * head_dim, dim)
  WeightMatrix wo;               // (dim, n_heads * head_dim)
  std::vector<float> ffn_norm;   // (dim)
  WeightMatrix w_gate;           // (ffn_dim, dim)
  WeightMatrix w_up;             // (ffn_dim, dim)
  WeightMatrix w_down;           // (dim, ffn_dim)
};

// A tensor as a checkpoint stores it: ne[0] is the innermost (contiguous) dimension.
struct TensorRef {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> ne;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
};

// How the weights get into memory (see core/mmap_file.h for why a copy can pay).
enum class WeightMemory {
  kAuto,       // a huge-page copy when the checkpoint takes at most half the available memory
  kMap,        // mmap the checkpoint: nothing copied, pages droppable under memory pressure
  kHugePages,  // read into huge pages: faster decode, costs the read at load
};

struct LoadOptions {
  WeightMemory weights = WeightMemory::kAuto;
  // Repack the Q4_K / Q6_K / Q8_0 matrices of a copied checkpoint into 16-row panels for the
  // decode kernels (kernels/panels.h): in place, no memory; the prompt paths unpack rows.
  bool decode_panels = true;
};

class LlamaModel {
 public:
  ~LlamaModel();
  // path: a .gguf file, or a Hugging Face directory (config.json + *.safetensors).
  static Result<std::unique_ptr<LlamaModel>> load(const std::string& path, const LoadOptions& options = {});

  LlamaConfig config;
  WeightMatrix tok_embd;            // (n_vocab, dim)
  WeightMatrix output;              // (n_vocab, dim); the embedding matrix when tied
  std::vector<float> output_norm;   // (dim)
  std::vector<LlamaLayer> layers;   // (n_layers)
  std::vector<float> rope_factors;  // (head_dim / 2) divisors of the RoPE frequencies; all 1 when unscaled

  std::string path;
  bool is_gguf() const { return gguf_ != nullptr; }
  const GgufFile* gguf() const { return gguf_.get(); }
  size_t weight_bytes() const;  // bytes of all tensors of the checkpoint
  // Weight bytes one decode step streams from memory: every matrix but the embedding table, of
  // which one row is read (unless it doubles as the output projection).
  size_t bytes_per_token() const;
  // The file's quantization in llama.cpp's naming ("q4_k_m", "f16"), from general.file_type
  // when present, else the type holding the most bytes.
  std::string file_type_name() const;
  std::string type_summary() const;  // "f32", "q4_k (mixed: 2 types)", ...
  bool weights_copied() const { return map_mode_ == MapMode::kHugeCopy; }
  // Bytes of the longest row of any matrix (scratch for rows unpacked from panels).
  size_t max_row_bytes() const;
  // Whether any matrix is F32, F16 or BF16 (the float path's products, in 8-bit mode too).
  bool has_float_weights() const;
  // Whether any matrix is static W8A8 (model/w8a8_format.h; CPU kernels only).
  bool has_w8a8_weights() const;
  // Matrices repacked into decode panels at load (LoadOptions::decode_panels).
  int panel_matrices() const { return panel_matrices_; }

 private:
  LlamaModel() = default;
  Status load_gguf(const std::string& path);
  Status load_hf(const std::string& dir);
  MapMode map_mode_ = MapMode::kMap;
  int panel_matrices_ = 0;
  void repack_panels();
  // fn(WeightMatrix&) for each matrix the forward pass multiplies by (Model: const or not).
  template <class Model, class F>
  static void for_each_matrix(Model& m, F&& fn);
  // Checks config against tensors_ (GGUF names) and fills the weights.
  Status bind_weights();

  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<SafetensorsModel> safetensors_;
  std::vector<TensorRef> tensors_;  // every tensor of the checkpoint, under its GGUF name
};

}  // namespace ll3
