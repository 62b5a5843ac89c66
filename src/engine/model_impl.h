// What a public ll3::Model holds: the weights, the tokenizer and the model's identity.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ll3/engine.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"

namespace ll3 {

struct Model::Impl {
  std::unique_ptr<LlamaModel> llama;
  std::unique_ptr<Tokenizer> tokenizer;
  // Names the weights, whatever their layout in memory: prefix-cache hash chains and session
  // files carry it, so KV of one model is never used with another.
  uint64_t id = 0;
  std::string name;
};

// The identity of a loaded model: its hyper-parameters, its matrices' types and shapes, and
// three rows of each (first, middle, last), as the file stores them.
uint64_t model_identity(const LlamaModel& m);

// The library's access to what the public Model hides.
struct ModelAccess {
  using Impl = Model::Impl;
  static const Impl& impl(const Model& m) { return *m.impl_; }
  static std::shared_ptr<const Model> make(std::unique_ptr<Impl> impl) {
    return std::shared_ptr<const Model>(new Model(std::move(impl)));
  }
};
inline const ModelAccess::Impl& model_impl(const Model& m) { return ModelAccess::impl(m); }

// Wraps a loaded model and its tokenizer.
std::shared_ptr<const Model> make_model(std::unique_ptr<LlamaModel> llama, std::unique_ptr<Tokenizer> tokenizer);
// The library's load options for the public ones.
LoadOptions load_options(const ModelLoadOptions& options);

}  // namespace ll3
