#include "model/lora.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "io/gguf.h"
#include "io/hf_export.h"
#include "io/lora_file.h"
#include "io/safetensors.h"
#include "kernels/lora_kernels.h"
#include "model/llama_model.h"

namespace ll3 {

const char* lora_target_gguf(LoraTarget t) { return lora_target_gguf_name(static_cast<int>(t)); }
const char* lora_target_peft(LoraTarget t) { return lora_target_peft_name(static_cast<int>(t)); }

LoraAdapter::LoraAdapter() = default;
LoraAdapter::~LoraAdapter() = default;

size_t LoraAdapter::bytes() const {
  size_t n = 0;
  auto add = [&](const LoraPair& p) {
    if (!p.present()) return;
    n += p.a.row_bytes * p.a.rows + p.b.row_bytes * p.b.rows;
    n += static_cast<size_t>(kernels::lora_panel_floats(p.b.rows, p.b.cols)) * sizeof(float);  // B's panels
  };
  for (const auto& layer : layers) {
    for (const LoraPair& p : layer) add(p);
  }
  add(output);
  return n;
}

namespace lora_detail {

const WeightMatrix* base_weight(const LlamaModel& base, int64_t layer, LoraTarget t) {
  if (layer < 0 || layer >= static_cast<int64_t>(base.layers.size())) return nullptr;
  const LlamaLayer& L = base.layers[static_cast<size_t>(layer)];
  const WeightMatrix* w[] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down};
  return w[static_cast<int>(t)];
}

}  // namespace lora_detail

namespace {

// A stored tensor as a matrix the products take (its type supported, its bytes all there).
Result<WeightMatrix> matrix(const LoraTensor& t) {
  const TypeTraits* tr = t.type == DType::W8A8 ? nullptr : type_traits(t.type);
  if (tr == nullptr) {
    return Status::errorf("tensor '%s' has type %s, which LoRA products cannot take (F32, F16, BF16 or Q8_0)", t.name.c_str(),
                          std::string(dtype_name(t.type)).c_str());
  }
  const DTypeInfo info = dtype_info(t.type);
  if (t.rows < 1 || t.cols < 1 || t.cols % info.block_size != 0) {
    return Status::errorf("tensor '%s' (%s) is %lld x %lld: rows must be a positive multiple of the type's block of %lld", t.name.c_str(),
                          info.name, static_cast<long long>(t.rows), static_cast<long long>(t.cols), static_cast<long long>(info.block_size));
  }
  WeightMatrix m;
  m.name = t.name;
  m.type = t.type;
  m.rows = t.rows;
  m.cols = t.cols;
  m.row_bytes = dtype_row_bytes(t.type, t.cols);
  if (t.nbytes != m.row_bytes * static_cast<uint64_t>(t.rows)) {
    return Status::errorf("tensor '%s' holds %llu bytes; %lld x %lld of %s take %zu", t.name.c_str(),
                          static_cast<unsigned long long>(t.nbytes), static_cast<long long>(t.rows), static_cast<long long>(t.cols),
                          info.name, m.row_bytes * static_cast<size_t>(t.rows));
  }
  m.data = t.data;
  m.traits = tr;
  return m;
}

// A pair checked against the base weight it corrects, with its scale.
Result<LoraPair> bind_pair(const LoraFilePair& f, const WeightMatrix& base) {
  LoraPair p;
  Result<WeightMatrix> a = matrix(f.a), b = matrix(f.b);
  if (!a.ok()) return a.status();
  if (!b.ok()) return b.status();
  p.a = std::move(*a);
  p.b = std::move(*b);
  if (p.a.cols != base.cols || p.b.rows != base.rows) {
    return Status::errorf("%s: A is %lld x %lld and B %lld x %lld, but %s is %lld x %lld (A must be rank x %lld, B %lld x rank)",
                          f.where.c_str(), static_cast<long long>(p.a.rows), static_cast<long long>(p.a.cols),
                          static_cast<long long>(p.b.rows), static_cast<long long>(p.b.cols), base.name.c_str(),
                          static_cast<long long>(base.rows), static_cast<long long>(base.cols),
                          static_cast<long long>(base.cols), static_cast<long long>(base.rows));
  }
  if (p.a.rows != p.b.cols) {
    return Status::errorf("%s: A has rank %lld and B rank %lld", f.where.c_str(), static_cast<long long>(p.a.rows),
                          static_cast<long long>(p.b.cols));
  }
  if (f.rank > 0 && f.rank != p.a.rows) {
    return Status::errorf("%s has rank %lld; adapter_config.json says %lld", f.where.c_str(), static_cast<long long>(p.a.rows),
                          static_cast<long long>(f.rank));
  }
  // alpha / rank (rsLoRA: alpha / sqrt(rank)); without an alpha, the request's scale alone (llama.cpp).
  const double r = static_cast<double>(p.a.rows);
  p.scale = f.alpha == 0 ? 1.0f : static_cast<float>(f.rslora ? f.alpha / std::sqrt(r) : f.alpha / r);
  if (!std::isfinite(p.scale)) return Status::errorf("%s: the scale (alpha / rank) is not finite", f.where.c_str());
  return p;
}

// B of Q or K with its rows moved from one RoPE layout to the other (`to_hf`: GGUF's to Hugging
// Face's), into a copy the adapter keeps.
void permute_rows(LoraAdapter* ad, WeightMatrix* b, int64_t head_dim, bool to_hf) {
  AlignedVector<uint8_t>& copy = ad->copies.emplace_back(b->row_bytes * static_cast<size_t>(b->rows));
  for (int64_t r = 0; r < b->rows; ++r) {
    const int64_t g = gguf_row_of_hf_row(r, head_dim);  // row r in Hugging Face's order is row g in GGUF's
    const int64_t dst = to_hf ? r : g, src = to_hf ? g : r;
    std::memcpy(copy.data() + dst * b->row_bytes, b->data + src * b->row_bytes, b->row_bytes);
  }
  b->data = copy.data();
}

// B in F32 panels of Bᵀ (LoraPair::bt, kernels/lora_kernels.h), from B as it runs (after any
// permutation).
void pack_b(LoraAdapter* ad, LoraPair* p) {
  const WeightMatrix& b = p->b;
  const int64_t out = b.rows, rank = b.cols;
  AlignedVector<uint8_t>& copy = ad->copies.emplace_back(static_cast<size_t>(kernels::lora_panel_floats(out, rank)) * sizeof(float));
  float* panels = reinterpret_cast<float*>(copy.data());  // value-initialized: the padding stays 0
  std::vector<float> row(static_cast<size_t>(rank));
  for (int64_t j = 0; j < out; ++j) {
    b.traits->to_float(b.data + j * b.row_bytes, row.data(), rank);
    for (int64_t k = 0; k < rank; ++k) panels[kernels::lora_panel_at(j, k, rank)] = row[static_cast<size_t>(k)];
  }
  p->bt = panels;
}

// FNV-1a over every pair's place, scale and bytes (after any permutation: what runs).
void fingerprint(LoraAdapter* ad) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  auto add = [&](const LoraPair& p, int64_t place) {
    if (!p.present()) return;
    ++ad->n_pairs;
    ad->max_rank = std::max(ad->max_rank, p.a.rows);
    mix(&place, sizeof place);
    mix(&p.scale, sizeof p.scale);
    for (const WeightMatrix* m : {&p.a, &p.b}) {
      const uint32_t type = static_cast<uint32_t>(m->type);
      mix(&type, sizeof type);
      mix(m->data, m->row_bytes * static_cast<size_t>(m->rows));
    }
  };
  for (size_t l = 0; l < ad->layers.size(); ++l) {
    for (int t = 0; t < kLoraTargets; ++t) add(ad->layers[l][t], static_cast<int64_t>(l) * kLoraTargets + t);
  }
  add(ad->output, -1);
  ad->fingerprint = h;
}

Result<std::unique_ptr<LoraAdapter>> bind(LoraFile file, const std::string& path, const LlamaModel& base) {
  auto ad = std::make_unique<LoraAdapter>();
  ad->path = path;
  ad->format = file.format;
  ad->alpha = static_cast<float>(file.alpha);
  ad->layers.resize(base.layers.size());
  ad->file = std::make_unique<LoraFile>(std::move(file));
  for (const LoraFilePair& f : ad->file->pairs) {
    const LoraTarget t = static_cast<LoraTarget>(f.target);
    const WeightMatrix* w = f.layer < 0 ? &base.output : lora_detail::base_weight(base, f.layer, t);
    if (w == nullptr) {
      return Status::errorf("%s: the base has %zu layers, no layer %lld", f.where.c_str(), base.layers.size(),
                            static_cast<long long>(f.layer));
    }
    Result<LoraPair> p = bind_pair(f, *w);
    if (!p.ok()) return p.status();
    // Q and K rows into the base's RoPE order.
    if (f.layer >= 0 && (t == LoraTarget::kQ || t == LoraTarget::kK) && f.hf_rows != base.config.rope_half_pairs) {
      permute_rows(ad.get(), &p->b, base.config.head_dim, /*to_hf=*/base.config.rope_half_pairs);
    }
    LoraPair& slot = f.layer < 0 ? ad->output : ad->layers[static_cast<size_t>(f.layer)][f.target];
    if (slot.present()) return Status::errorf("%s appears twice", f.where.c_str());
    pack_b(ad.get(), &*p);
    slot = std::move(*p);
  }
  fingerprint(ad.get());
  if (ad->n_pairs == 0) return Status::error("the adapter corrects no product");
  return ad;
}

}  // namespace

Result<std::unique_ptr<LoraAdapter>> load_lora(const std::string& path, const LlamaModel& base) {
  Result<LoraFile> f = open_lora_file(path);
  Result<std::unique_ptr<LoraAdapter>> ad = f.ok() ? bind(std::move(f.value()), path, base) : Result<std::unique_ptr<LoraAdapter>>(f.status());
  if (!ad.ok()) return ad.status().with_context("lora: " + path + ": ");
  return ad;
}

}  // namespace ll3
