#include "model/llama_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <unordered_map>

#include "io/gguf.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "kernels/w8a8.h"
#include "model/w8a8_format.h"

namespace ll3 {

LlamaModel::~LlamaModel() = default;

namespace {

// Bytes of the checkpoint: the file, or a directory's .safetensors shards.
uint64_t checkpoint_bytes(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    const uintmax_t n = fs::file_size(path, ec);
    return ec ? 0 : static_cast<uint64_t>(n);
  }
  uint64_t total = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
    if (e.path().extension() == ".safetensors") total += static_cast<uint64_t>(e.file_size(ec));
  }
  return total;
}

}  // namespace

Result<std::unique_ptr<LlamaModel>> LlamaModel::load(const std::string& path, const LoadOptions& options) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->path = path;
  switch (options.weights) {
    case WeightMemory::kMap: m->map_mode_ = MapMode::kMap; break;
    case WeightMemory::kHugePages: m->map_mode_ = MapMode::kHugeCopy; break;
    case WeightMemory::kAuto: m->map_mode_ = auto_map_mode(checkpoint_bytes(path)); break;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    LL3_RETURN_IF_ERROR(m->load_hf(path));
  } else {
    LL3_RETURN_IF_ERROR(m->load_gguf(path));
  }
  if (options.decode_panels) m->repack_panels();
  return m;
}

// The embedding table counts only as the (tied) output.
template <class Model, class F>
void LlamaModel::for_each_matrix(Model& m, F&& fn) {
  for (auto& L : m.layers) {
    for (auto* W : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) fn(*W);
  }
  fn(m.output);
}

void LlamaModel::repack_panels() {
  MmapFile* copy = gguf_ != nullptr ? gguf_->private_copy() : nullptr;
  if (copy == nullptr) return;  // mapped weights are the page cache's: never written
  const uint8_t* origin = copy->data();
  uint8_t* base = copy->unseal();
  if (base == nullptr) return;
  for_each_matrix(*this, [&](WeightMatrix& W) {
    const bool kernel = W.traits->dot_q_panels != nullptr || W.traits->dot_f32_panels != nullptr;
    if (!kernel || !kernels::panel_layout_exists(W.type, W.rows, W.cols)) return;
    kernels::panel_pack_matrix(W.type, base + (W.data - origin), W.rows, W.cols);
    W.panels = true;
    ++panel_matrices_;
  });
  if (config.tied_embeddings) tok_embd.panels = output.panels;  // the same bytes
  copy->seal();
}

size_t LlamaModel::max_row_bytes() const {
  size_t n = tok_embd.row_bytes;
  for_each_matrix(*this, [&](const WeightMatrix& W) { n = std::max(n, W.row_bytes); });
  return n;
}

bool LlamaModel::has_float_weights() const {
  bool any = false;
  for_each_matrix(*this, [&](const WeightMatrix& W) {
    any = any || W.type == DType::F32 || W.type == DType::F16 || W.type == DType::BF16;
  });
  return any;
}

bool LlamaModel::has_w8a8_weights() const {
  bool any = false;
  for_each_matrix(*this, [&](const WeightMatrix& W) { any = any || W.type == DType::W8A8; });
  return any;
}

namespace {

// Reads a required positive integer hyper-parameter.
Status need_int(const GgufFile& f, const std::string& key, int64_t* out) {
  std::optional<int64_t> v = f.get_int(key);
  if (!v) {
    return Status::errorf("missing or non-integer metadata '%s'", key.c_str());
  }
  if (*v <= 0 || *v > (int64_t{1} << 31)) {
    return Status::errorf("metadata '%s' = %lld is out of range", key.c_str(), static_cast<long long>(*v));
  }
  *out = *v;
  return Status();
}

// Converts a 1-D float-typed tensor to a float vector of the expected length.
Status vector_from(const TensorRef& t, int64_t n, std::vector<float>* out) {
  if (t.ne.size() != 1 || t.ne[0] != n) {
    return Status::errorf("tensor '%s' has %zu dimensions of which the first is %lld, expected a vector of %lld",
                          t.name.c_str(), t.ne.size(), static_cast<long long>(t.ne.empty() ? 0 : t.ne[0]),
                          static_cast<long long>(n));
  }
  const TypeTraits* tr = type_traits(t.type);
  if (tr == nullptr) {
    return Status::errorf("tensor '%s' has type %s, which ll3 cannot run", t.name.c_str(),
                          std::string(dtype_name(t.type)).c_str());
  }
  out->resize(static_cast<size_t>(n));
  tr->to_float(t.data, out->data(), n);
  return Status();
}

std::string shape_str(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

// The scales of a W8A8 matrix (model/w8a8_format.h): per-row weight scales, finite and
// positive, and the input's activation scale, finite and >= 0 (0: per token).
Status bind_w8a8_scales(const std::unordered_map<std::string, const TensorRef*>& by_name, WeightMatrix* W) {
  const std::string& name = W->name;
  if (W->rows % kernels::kW8A8PanelRows != 0 || W->cols % kernels::kW8A8KAlign != 0 || W->cols > kernels::kW8A8MaxK) {
    return Status::errorf("W8A8 tensor '%s' is %lld x %lld; the format needs rows a multiple of 16 and columns a "
                          "multiple of 64, at most 32768", name.c_str(), static_cast<long long>(W->rows),
                          static_cast<long long>(W->cols));
  }
  const std::string stem = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0
                               ? name.substr(0, name.size() - 7) : name;
  const std::string ws_name = name + w8a8_format::kWeightScaleSuffix, is_name = stem + w8a8_format::kInputScaleSuffix;
  auto f32_vector = [&](const std::string& n, int64_t len, const float** out) -> Status {
    auto it = by_name.find(n);
    if (it == by_name.end()) return Status::errorf("W8A8 tensor '%s' has no '%s'", name.c_str(), n.c_str());
    const TensorRef& t = *it->second;
    if (t.type != DType::F32 || t.ne.size() != 1 || t.ne[0] != len) {
      return Status::errorf("tensor '%s' is %s %s, expected f32 [%lld]", n.c_str(), std::string(dtype_name(t.type)).c_str(),
                            shape_str(t.ne).c_str(), static_cast<long long>(len));
    }
    *out = reinterpret_cast<const float*>(t.data);
    return Status();
  };
  const float* input_scale = nullptr;
  LL3_RETURN_IF_ERROR(f32_vector(ws_name, W->rows, &W->row_scales));
  LL3_RETURN_IF_ERROR(f32_vector(is_name, 1, &input_scale));
  for (int64_t r = 0; r < W->rows; ++r) {
    if (!(std::isfinite(W->row_scales[r]) && W->row_scales[r] > 0)) {
      return Status::errorf("tensor '%s' row %lld: scale %g is not a positive number", ws_name.c_str(),
                            static_cast<long long>(r), static_cast<double>(W->row_scales[r]));
    }
  }
  if (!(std::isfinite(*input_scale) && *input_scale >= 0)) {
    return Status::errorf("tensor '%s' = %g: expected a scale >= 0", is_name.c_str(), static_cast<double>(*input_scale));
  }
  W->input_scale = *input_scale;
  return Status();
}

// W8A8 matrices (model/w8a8_format.h) run on their own kernels (kernels/w8a8.h), not through
// type traits: this entry only names the type.
const TypeTraits kW8A8Traits{DType::W8A8};

Status matrix_from(const TensorRef& t, int64_t rows, int64_t cols, WeightMatrix* out) {
  // GGUF order: ne[0] = cols (inputs, contiguous), ne[1] = rows (outputs).
  if (t.ne.size() != 2 || t.ne[0] != cols || t.ne[1] != rows) {
    return Status::errorf("tensor '%s' has shape %s, expected [%lld, %lld]", t.name.c_str(),
                          shape_str(t.ne).c_str(), static_cast<long long>(cols), static_cast<long long>(rows));
  }
  const TypeTraits* tr = t.type == DType::W8A8 ? &kW8A8Traits : type_traits(t.type);
  if (tr == nullptr) {
    return Status::errorf("tensor '%s' has type %s, which ll3 cannot run yet", t.name.c_str(),
                          std::string(dtype_name(t.type)).c_str());
  }
  out->name = t.name;
  out->type = t.type;
  out->rows = rows;
  out->cols = cols;
  out->row_bytes = dtype_row_bytes(t.type, cols);
  out->data = t.data;
  out->traits = tr;
  return Status();
}

}  // namespace

Status LlamaModel::load_gguf(const std::string& file) {
  Result<std::unique_ptr<GgufFile>> g = GgufFile::open(file, map_mode_);
  if (!g.ok()) return g.status();
  gguf_ = std::move(g.value());
  const GgufFile& f = *gguf_;
  auto ctx = [&](const Status& s) { return s.with_context("model: " + file + ": "); };

  std::optional<std::string_view> arch = f.get_string("general.architecture");
  if (!arch) return ctx(Status::error("missing metadata 'general.architecture'"));
  if (*arch != "llama") {
    return ctx(Status::errorf("architecture '%.*s' is not supported (ll3 runs 'llama')",
                              static_cast<int>(arch->size()), arch->data()));
  }
  LlamaConfig& c = config;
  if (auto name = f.get_string("general.name")) c.name = std::string(*name);
  LL3_RETURN_IF_ERROR(ctx(need_int(f, "llama.embedding_length", &c.dim)));
  LL3_RETURN_IF_ERROR(ctx(need_int(f, "llama.block_count", &c.n_layers)));
  LL3_RETURN_IF_ERROR(ctx(need_int(f, "llama.attention.head_count", &c.n_heads)));
  LL3_RETURN_IF_ERROR(ctx(need_int(f, "llama.feed_forward_length", &c.ffn_dim)));
  c.n_kv_heads = c.n_heads;
  if (f.find("llama.attention.head_count_kv")) {
    LL3_RETURN_IF_ERROR(ctx(need_int(f, "llama.attention.head_count_kv", &c.n_kv_heads)));
  }
  c.context_length = f.get_int("llama.context_length").value_or(8192);
  if (c.context_length <= 0) c.context_length = 8192;
  if (c.dim % c.n_heads != 0 && !f.find("llama.attention.key_length")) {
    return ctx(Status::errorf("embedding length %lld is not a multiple of the head count %lld",
                              static_cast<long long>(c.dim), static_cast<long long>(c.n_heads)));
  }
  c.head_dim = c.dim / c.n_heads;
  if (f.find("llama.attention.key_length")) {
    LL3_RETURN_IF_ERROR(ctx(need_int(f, "llama.attention.key_length", &c.head_dim)));
    int64_t vlen = f.get_int("llama.attention.value_length").value_or(c.head_dim);
    if (vlen != c.head_dim) return ctx(Status::error("key and value head sizes differ; not supported"));
  }
  if (auto rd = f.get_int("llama.rope.dimension_count"); rd && *rd != c.head_dim) {
    return ctx(Status::errorf("partial RoPE (dimension_count %lld of head size %lld) is not supported",
                              static_cast<long long>(*rd), static_cast<long long>(c.head_dim)));
  }
  if (auto eps = f.get_float("llama.attention.layer_norm_rms_epsilon")) c.norm_eps = static_cast<float>(*eps);
  if (auto theta = f.get_float("llama.rope.freq_base")) c.rope_theta = static_cast<float>(*theta);
  c.rope_half_pairs = false;  // GGUF permutes Q/K rows for adjacent-pair rotation

  tensors_.reserve(f.tensors().size());
  for (const GgufTensorInfo& t : f.tensors()) {
    TensorRef r;
    r.name = t.name;
    r.type = t.type;
    r.ne.assign(t.ne, t.ne + t.n_dims);
    r.data = t.data;
    r.nbytes = t.nbytes;
    tensors_.push_back(std::move(r));
  }
  if (const GgufTensorInfo* te = f.find_tensor("token_embd.weight"); te && te->n_dims == 2) {
    c.n_vocab = te->ne[1];
  }
  if (auto nv = f.get_int("llama.vocab_size"); nv && *nv != c.n_vocab && c.n_vocab != 0) {
    return ctx(Status::errorf("llama.vocab_size %lld does not match token_embd.weight's %lld rows",
                              static_cast<long long>(*nv), static_cast<long long>(c.n_vocab)));
  }
  LL3_RETURN_IF_ERROR(ctx(bind_weights()));
  if (has_w8a8_weights()) {
    // A later layout would be read wrongly: refuse any version but this build's.
    const int64_t v = f.get_int(w8a8_format::kVersionKey).value_or(0);
    if (v != w8a8_format::kVersion) {
      return ctx(Status::errorf("W8A8 format version %lld (%s); this ll3 reads version %u", static_cast<long long>(v),
                                f.find(w8a8_format::kVersionKey) ? "ll3.w8a8.version" : "no ll3.w8a8.version key",
                                w8a8_format::kVersion));
    }
  }
  return Status();
}

Status LlamaModel::bind_weights() {
  LlamaConfig& c = config;
  if (c.n_heads % c.n_kv_heads != 0) {
    return Status::errorf("head count %lld is not a multiple of the KV head count %lld",
                          static_cast<long long>(c.n_heads), static_cast<long long>(c.n_kv_heads));
  }
  if (c.head_dim % 2 != 0) return Status::errorf("head size %lld is odd", static_cast<long long>(c.head_dim));
  std::unordered_map<std::string, const TensorRef*> by_name;
  for (const TensorRef& t : tensors_) by_name[t.name] = &t;
  auto find = [&](const std::string& name, const TensorRef** out) -> Status {
    auto it = by_name.find(name);
    if (it == by_name.end()) return Status::errorf("missing tensor '%s'", name.c_str());
    *out = it->second;
    return Status();
  };
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, WeightMatrix* m) -> Status {
    const TensorRef* t = nullptr;
    LL3_RETURN_IF_ERROR(find(name, &t));
    LL3_RETURN_IF_ERROR(matrix_from(*t, rows, cols, m));
    return m->type == DType::W8A8 ? bind_w8a8_scales(by_name, m) : Status();
  };
  auto vec = [&](const std::string& name, int64_t n, std::vector<float>* v) -> Status {
    const TensorRef* t = nullptr;
    LL3_RETURN_IF_ERROR(find(name, &t));
    return vector_from(*t, n, v);
  };

  const TensorRef* te = nullptr;
  LL3_RETURN_IF_ERROR(find("token_embd.weight", &te));
  if (te->ne.size() != 2 || te->ne[0] != c.dim) {
    return Status::errorf("tensor 'token_embd.weight' has shape %s, expected [%lld, n_vocab]",
                          shape_str(te->ne).c_str(), static_cast<long long>(c.dim));
  }
  c.n_vocab = te->ne[1];
  LL3_RETURN_IF_ERROR(matrix("token_embd.weight", c.n_vocab, c.dim, &tok_embd));
  if (tok_embd.type == DType::W8A8) {
    return Status::error("token_embd.weight is W8A8; the embedding table is read by rows, so it needs a row type");
  }
  c.tied_embeddings = by_name.count("output.weight") == 0;
  if (c.tied_embeddings) {
    output = tok_embd;
  } else {
    LL3_RETURN_IF_ERROR(matrix("output.weight", c.n_vocab, c.dim, &output));
  }
  LL3_RETURN_IF_ERROR(vec("output_norm.weight", c.dim, &output_norm));

  int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  layers.resize(static_cast<size_t>(c.n_layers));
  for (int64_t l = 0; l < c.n_layers; ++l) {
    LlamaLayer& L = layers[static_cast<size_t>(l)];
    std::string p = "blk." + std::to_string(l) + ".";
    LL3_RETURN_IF_ERROR(vec(p + "attn_norm.weight", c.dim, &L.attn_norm));
    LL3_RETURN_IF_ERROR(matrix(p + "attn_q.weight", q_dim, c.dim, &L.wq));
    LL3_RETURN_IF_ERROR(matrix(p + "attn_k.weight", kv_dim, c.dim, &L.wk));
    LL3_RETURN_IF_ERROR(matrix(p + "attn_v.weight", kv_dim, c.dim, &L.wv));
    LL3_RETURN_IF_ERROR(matrix(p + "attn_output.weight", c.dim, q_dim, &L.wo));
    LL3_RETURN_IF_ERROR(vec(p + "ffn_norm.weight", c.dim, &L.ffn_norm));
    LL3_RETURN_IF_ERROR(matrix(p + "ffn_gate.weight", c.ffn_dim, c.dim, &L.w_gate));
    LL3_RETURN_IF_ERROR(matrix(p + "ffn_up.weight", c.ffn_dim, c.dim, &L.w_up));
    LL3_RETURN_IF_ERROR(matrix(p + "ffn_down.weight", c.dim, c.ffn_dim, &L.w_down));
  }

  // RoPE frequency divisors: the rope_freqs tensor (GGUF, Llama 3.1), else computed from the
  // config's rope_scaling (Hugging Face), else none.
  if (by_name.count("rope_freqs.weight")) {
    LL3_RETURN_IF_ERROR(vec("rope_freqs.weight", c.head_dim / 2, &rope_factors));
  } else if (c.rope_scaling.enabled) {
    rope_factors = llama3_rope_freq_factors(c.head_dim, c.rope_theta, c.rope_scaling);
  } else {
    rope_factors.assign(static_cast<size_t>(c.head_dim / 2), 1.0f);
  }
  return Status();
}

size_t LlamaModel::weight_bytes() const {
  size_t n = 0;
  for (const TensorRef& t : tensors_) n += t.nbytes;
  return n;
}

size_t LlamaModel::bytes_per_token() const {
  size_t n = weight_bytes();
  if (!config.tied_embeddings) n -= static_cast<size_t>(tok_embd.rows) * tok_embd.row_bytes - tok_embd.row_bytes;
  return n;
}

std::string LlamaModel::file_type_name() const {
  if (gguf_) {
    // llama.cpp's LLAMA_FTYPE numbering.
    static const std::map<int64_t, const char*> kNames = {
        {0, "f32"},     {1, "f16"},     {2, "q4_0"},    {3, "q4_1"},    {7, "q8_0"},    {8, "q5_0"},
        {9, "q5_1"},    {10, "q2_k"},   {11, "q3_k_s"}, {12, "q3_k_m"}, {13, "q3_k_l"}, {14, "q4_k_s"},
        {15, "q4_k_m"}, {16, "q5_k_s"}, {17, "q5_k_m"}, {18, "q6_k"},   {32, "bf16"},
        {w8a8_format::kFileType, "w8a8"}};
    if (auto ft = gguf_->get_int("general.file_type")) {
      auto it = kNames.find(*ft);
      if (it != kNames.end()) return it->second;
    }
  }
  std::string s = type_summary();
  return s.substr(0, s.find(' '));
}

std::string LlamaModel::type_summary() const {
  // The type holding the most bytes among the matrices, and how many types there are.
  std::map<std::string, size_t> bytes;
  for (const TensorRef& t : tensors_) {
    if (t.ne.size() >= 2) bytes[std::string(dtype_name(t.type))] += t.nbytes;
  }
  std::string best;
  size_t most = 0;
  for (const auto& [name, b] : bytes) {
    if (b > most) {
      most = b;
      best = name;
    }
  }
  if (bytes.size() > 1) best += " (mixed: " + std::to_string(bytes.size()) + " types)";
  return best;
}

}  // namespace ll3
