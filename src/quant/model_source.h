// What the quantizer reads: the metadata to write and the tensors (GGUF names, GGUF shapes, data
// in place in a mapped file), from either a GGUF file or a Hugging Face directory. A Hugging Face
// Q or K matrix keeps its rotate-half row order on disk; its row_map gives, for each GGUF row,
// the row to read, so no permuted copy is ever made.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "io/gguf_writer.h"

namespace ll3 {
class GgufFile;
}

namespace ll3::quant {

struct SourceTensor {
  std::string name;               // GGUF name
  DType type = DType::F32;
  int n_dims = 1;
  int64_t ne[4] = {1, 1, 1, 1};   // GGUF order: ne[0] is the row length
  const uint8_t* data = nullptr;  // rows of dtype_row_bytes(type, ne[0])
  uint64_t nbytes = 0;
  std::shared_ptr<const std::vector<int64_t>> row_map;  // GGUF row -> source row; null: identity
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return n_elements() / ne[0]; }
  std::string shape_string() const;
  // The tensor's nbytes bytes in GGUF's row order (row_map applied) into dst.
  void copy_data(uint8_t* dst) const;
};

struct ModelSource {
  std::string origin;
  std::vector<std::pair<std::string, GgufWriteValue>> metadata;  // in order, without alignment
  uint32_t alignment = 32;
  std::vector<SourceTensor> tensors;
  // What the per-tensor type rules need.
  std::string arch = "llama";
  int64_t n_layer = 0, n_head = 1, n_head_kv = 1;
  // Keeps the mapped files and any tensors made here alive.
  std::vector<std::shared_ptr<const void>> keep;
};

// The GGUF's metadata and tensors (the file must outlive the source).
ModelSource source_from_gguf(const GgufFile& f);
// A Hugging Face LlamaForCausalLM directory: config.json, tokenizer.json (+ tokenizer_config.json),
// model.safetensors or shards. Metadata as llama.cpp's converter writes it; Llama 3.1 rope
// scaling becomes rope_freqs.weight.
Result<ModelSource> source_from_hf(const std::string& dir);

}  // namespace ll3::quant
