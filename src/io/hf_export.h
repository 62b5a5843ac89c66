// Export of a LLaMA-3 GGUF file as the Hugging Face checkpoint directory it would have been
// converted from: config.json, model.safetensors (or shards + model.safetensors.index.json) and
// the tokenizer files. GGUF stores Q and K rows permuted for RoPE on adjacent pairs; the export
// undoes that, so the directory holds what Hugging Face would (rotate-half order).
#pragma once

#include <string>

#include "core/status.h"

namespace ll3 {

class GgufFile;

// n_shards: 1 writes model.safetensors; more split the tensors (in order, balanced by bytes)
// into model-0000K-of-0000N.safetensors with an index. tokenizer_dir: where tokenizer.json and
// tokenizer_config.json (and generation_config.json if present) are copied from; "" copies none.
// Weight types are kept (F32, F16, BF16; any other type is an error naming the tensor).
Status export_hf_directory(const GgufFile& gguf, const std::string& out_dir, int n_shards,
                           const std::string& tokenizer_dir = "");

// Row permutations between the layouts, for a Q or K matrix of n_head heads of head_dim rows
// each: HF row h*head_dim + j*(head_dim/2) + i is GGUF row h*head_dim + 2*i + j (j in {0, 1}).
int64_t gguf_row_of_hf_row(int64_t hf_row, int64_t head_dim);

}  // namespace ll3
