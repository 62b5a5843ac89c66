// The tokenizer that belongs to a loaded model: from GGUF metadata, or from the tokenizer.json
// (+ tokenizer_config.json) of a Hugging Face directory.
#pragma once

#include <memory>

#include "core/status.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"

namespace ll3 {

Result<std::unique_ptr<Tokenizer>> load_model_tokenizer(const LlamaModel& model);

}  // namespace ll3
