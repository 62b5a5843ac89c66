#include "model/model_tokenizer.h"

#include "io/gguf.h"
#include "tokenizer/vocab.h"

namespace ll3 {

Result<std::unique_ptr<Tokenizer>> load_model_tokenizer(const LlamaModel& model) {
  Result<TokenizerVocab> vocab =
      model.is_gguf() ? load_vocab_from_gguf(*model.gguf()) : load_vocab_from_hf(model.path);
  if (!vocab.ok()) return vocab.status().with_context("tokenizer: " + model.path + ": ");
  if (static_cast<int64_t>(vocab->tokens.size()) > model.config.n_vocab) {
    return Status::errorf("tokenizer: %s: %zu tokens but the model's embedding has only %lld rows",
                          model.path.c_str(), vocab->tokens.size(), static_cast<long long>(model.config.n_vocab));
  }
  return Tokenizer::create(std::move(vocab.value()));
}

}  // namespace ll3
