// Loading a Hugging Face checkpoint directory (config.json + safetensors).
#include "model/llama_model.h"

namespace ll3 {

Status LlamaModel::load_hf(const std::string& dir) {
  return Status::errorf("model: %s: Hugging Face directories are not supported in this build yet", dir.c_str());
}

}  // namespace ll3
