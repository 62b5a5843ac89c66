#include <filesystem>
#include <vector>

#include "engine/model_impl.h"
#include "io/session_file.h"
#include "model/model_tokenizer.h"

namespace ll3 {

namespace {

void hash_matrix(const WeightMatrix& w, std::vector<uint8_t>& buf, uint64_t* h) {
  const int64_t shape[3] = {static_cast<int64_t>(w.type), w.rows, w.cols};
  *h = checksum64(shape, sizeof(shape), *h);
  if (w.data == nullptr || w.rows == 0) return;
  buf.resize(w.row_bytes);
  for (int64_t r : {int64_t{0}, w.rows / 2, w.rows - 1}) *h = checksum64(w.row_in(r, buf.data()), w.row_bytes, *h);
}

}  // namespace

uint64_t model_identity(const LlamaModel& m) {
  const LlamaConfig& c = m.config;
  const int64_t dims[] = {c.n_vocab, c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn_dim,
                          c.context_length, c.rope_half_pairs ? 1 : 0};
  uint64_t h = checksum64(dims, sizeof(dims), 0x6c6c33);
  const float f[] = {c.norm_eps, c.rope_theta};
  h = checksum64(f, sizeof(f), h);
  h = checksum64(m.rope_factors.data(), m.rope_factors.size() * sizeof(float), h);
  std::vector<uint8_t> buf;
  hash_matrix(m.tok_embd, buf, &h);
  hash_matrix(m.output, buf, &h);
  for (const LlamaLayer& L : m.layers) {
    for (const WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) hash_matrix(*w, buf, &h);
    h = checksum64(L.attn_norm.data(), L.attn_norm.size() * sizeof(float), h);
  }
  return h;
}

std::shared_ptr<const Model> make_model(std::unique_ptr<LlamaModel> llama, std::unique_ptr<Tokenizer> tokenizer) {
  auto impl = std::make_unique<ModelAccess::Impl>();
  impl->id = model_identity(*llama);
  impl->name = !llama->config.name.empty() ? llama->config.name
                                           : std::filesystem::path(llama->path).filename().string();
  impl->llama = std::move(llama);
  impl->tokenizer = std::move(tokenizer);
  return ModelAccess::make(std::move(impl));
}

LoadOptions load_options(const ModelLoadOptions& options) {
  LoadOptions lo;
  lo.decode_panels = !options.row_layout;
  switch (options.memory) {
    case ModelLoadOptions::Memory::kAuto: lo.weights = WeightMemory::kAuto; break;
    case ModelLoadOptions::Memory::kMapped: lo.weights = WeightMemory::kMap; break;
    case ModelLoadOptions::Memory::kHugePages: lo.weights = WeightMemory::kHugePages; break;
  }
  return lo;
}

Result<std::shared_ptr<const Model>> Model::load(const std::string& path, const ModelLoadOptions& options) {
  Result<std::unique_ptr<LlamaModel>> m = LlamaModel::load(path, load_options(options));
  if (!m.ok()) return m.status();
  Result<std::unique_ptr<Tokenizer>> t = load_model_tokenizer(*m.value());
  if (!t.ok()) return t.status();
  return make_model(std::move(m.value()), std::move(t.value()));
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

std::string Model::name() const { return impl_->name; }
int64_t Model::context_length() const { return impl_->llama->config.context_length; }
int64_t Model::n_vocab() const { return impl_->llama->config.n_vocab; }
int64_t Model::n_embd() const { return impl_->llama->config.dim; }

std::vector<int32_t> Model::encode(const std::string& text, bool add_bos, bool parse_special) const {
  return impl_->tokenizer->encode(text, add_bos, parse_special);
}

std::string Model::decode(const std::vector<int32_t>& tokens) const { return impl_->tokenizer->decode(tokens); }

}  // namespace ll3
