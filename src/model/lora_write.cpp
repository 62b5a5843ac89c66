#include "model/lora_write.h"

#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/hf_export.h"
#include "io/safetensors.h"
#include "model/llama_model.h"
#include "quant/model_source.h"

namespace ll3 {

namespace {

// The RMS of a weight's values, from up to 16 of its rows.
double weight_rms(const WeightMatrix& w) {
  std::vector<uint8_t> buf(w.row_bytes);
  std::vector<float> row(static_cast<size_t>(w.cols));
  double sum = 0;
  int64_t n = 0;
  for (int64_t r = 0; r < w.rows; r += std::max<int64_t>(1, w.rows / 16)) {
    w.traits->to_float(w.row_in(r, buf.data()), row.data(), w.cols);
    for (float v : row) sum += static_cast<double>(v) * v;
    n += w.cols;
  }
  return n > 0 ? std::sqrt(sum / static_cast<double>(n)) : 0.0;
}

// Rows of floats in `type`'s bytes.
std::vector<uint8_t> encode(DType type, const std::vector<float>& v, int64_t rows, int64_t cols) {
  const TypeTraits* tr = type_traits(type);
  const size_t rb = dtype_row_bytes(type, cols);
  std::vector<uint8_t> out(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) tr->from_float(&v[static_cast<size_t>(r * cols)], out.data() + r * rb, cols);
  return out;
}

// One generated pair in the base's row order, and its place in both formats.
struct MadePair {
  std::string gguf_weight;  // "blk.3.attn_q.weight"
  std::string peft_module;  // "model.layers.3.self_attn.q_proj"
  int64_t in = 0, out = 0;
  bool permute = false;     // Q or K: the two formats' B rows differ in order
  std::vector<uint8_t> a, b;  // (rank, in), (out, rank) in the type, the base's row order
};

std::vector<uint8_t> rows_reordered(const std::vector<uint8_t>& b, int64_t rows, size_t row_bytes, int64_t head_dim,
                                    bool to_hf) {
  std::vector<uint8_t> out(b.size());
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t g = gguf_row_of_hf_row(r, head_dim);
    const int64_t dst = to_hf ? r : g, src = to_hf ? g : r;
    std::memcpy(out.data() + dst * row_bytes, b.data() + src * row_bytes, row_bytes);
  }
  return out;
}

Status write_peft(const std::string& dir, const RandomLoraOptions& o, const std::vector<MadePair>& pairs,
                  const LlamaModel& base) {
  ::mkdir(dir.c_str(), 0755);
  const size_t b_rb = dtype_row_bytes(o.type, o.rank);
  std::vector<SafetensorsWriteTensor> st;
  std::vector<std::vector<uint8_t>> owned;
  owned.reserve(pairs.size());
  for (const MadePair& p : pairs) {
    // PEFT's rows are Hugging Face's: a GGUF base's Q and K rows are moved.
    const bool move = p.permute && !base.config.rope_half_pairs;
    const std::vector<uint8_t>* b = &p.b;
    if (move) b = &owned.emplace_back(rows_reordered(p.b, p.out, b_rb, base.config.head_dim, /*to_hf=*/true));
    const std::string prefix = "base_model.model." + p.peft_module;
    st.push_back({prefix + ".lora_A.weight", o.type, {o.rank, p.in}, [a = &p.a](uint8_t* dst) { std::memcpy(dst, a->data(), a->size()); }});
    st.push_back({prefix + ".lora_B.weight", o.type, {p.out, o.rank}, [b](uint8_t* dst) { std::memcpy(dst, b->data(), b->size()); }});
  }
  LL3_RETURN_IF_ERROR(write_safetensors(dir + "/adapter_model.safetensors", st, {{"format", "pt"}}));
  nlohmann::json targets = nlohmann::json::array();
  for (LoraTarget t : o.targets) targets.push_back(lora_target_peft(t));
  if (o.output) targets.push_back("lm_head");
  const nlohmann::json cfg = {{"peft_type", "LORA"}, {"task_type", "CAUSAL_LM"}, {"r", o.rank}, {"lora_alpha", o.alpha},
                              {"lora_dropout", 0.0}, {"target_modules", targets}, {"use_rslora", o.rslora},
                              {"bias", "none"}, {"fan_in_fan_out", false}, {"base_model_name_or_path", base.config.name},
                              {"inference_mode", true}};
  std::ofstream f(dir + "/adapter_config.json");
  f << cfg.dump(2) << "\n";
  if (!f) return Status::errorf("make-lora: cannot write %s/adapter_config.json", dir.c_str());
  return Status();
}

Status write_gguf(const std::string& path, const RandomLoraOptions& o, const std::vector<MadePair>& pairs,
                  const LlamaModel& base) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.type", "adapter");
  w.set_string("general.name", strprintf("ll3 random LoRA, rank %lld, seed %u", static_cast<long long>(o.rank), o.seed));
  w.set_string("adapter.type", "lora");
  // GGUF's scale is alpha / rank: rsLoRA's alpha / sqrt(rank) needs alpha * sqrt(rank) here.
  w.set_f32("adapter.lora.alpha", o.rslora ? o.alpha * std::sqrt(static_cast<float>(o.rank)) : o.alpha);
  const size_t b_rb = dtype_row_bytes(o.type, o.rank);
  std::vector<std::vector<uint8_t>> owned;
  owned.reserve(pairs.size());
  for (const MadePair& p : pairs) {
    // GGUF's rows are GGUF's: a Hugging Face base's Q and K rows are moved.
    const bool move = p.permute && base.config.rope_half_pairs;
    const std::vector<uint8_t>* b = &p.b;
    if (move) b = &owned.emplace_back(rows_reordered(p.b, p.out, b_rb, base.config.head_dim, /*to_hf=*/false));
    LL3_RETURN_IF_ERROR(w.add_tensor(p.gguf_weight + ".lora_a", o.type, {p.in, o.rank}, p.a.data()));
    LL3_RETURN_IF_ERROR(w.add_tensor(p.gguf_weight + ".lora_b", o.type, {o.rank, p.out}, b->data()));
  }
  return w.write(path);
}

}  // namespace

Status write_random_lora(const LlamaModel& base, const RandomLoraOptions& o, const std::string& gguf_path,
                         const std::string& peft_dir) {
  if (o.rank < 1 || o.rank > 4096) return Status::error("make-lora: the rank must be in 1..4096");
  if (o.type != DType::F32 && o.type != DType::F16 && o.type != DType::BF16) return Status::error("make-lora: the type must be f32, f16 or bf16");
  if (!(o.alpha > 0) || !(o.strength > 0)) return Status::error("make-lora: alpha and the strength must be positive");
  const double s = o.rslora ? o.alpha / std::sqrt(static_cast<double>(o.rank)) : o.alpha / static_cast<double>(o.rank);
  std::mt19937 rng(o.seed);
  std::vector<MadePair> pairs;
  auto make = [&](const WeightMatrix& w, std::string gguf_weight, std::string module, bool permute) {
    MadePair p;
    p.gguf_weight = std::move(gguf_weight);
    p.peft_module = std::move(module);
    p.in = w.cols;
    p.out = w.rows;
    p.permute = permute;
    std::normal_distribution<float> da(0.0f, static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.in))));
    const double sigma_b = o.strength * weight_rms(w) * std::sqrt(static_cast<double>(p.in)) / (s * std::sqrt(static_cast<double>(o.rank)));
    std::normal_distribution<float> db(0.0f, static_cast<float>(sigma_b));
    std::vector<float> a(static_cast<size_t>(o.rank * p.in)), b(static_cast<size_t>(p.out * o.rank));
    for (float& v : a) v = da(rng);
    for (float& v : b) v = db(rng);
    p.a = encode(o.type, a, o.rank, p.in);
    p.b = encode(o.type, b, p.out, o.rank);
    pairs.push_back(std::move(p));
  };
  for (size_t l = 0; l < base.layers.size(); ++l) {
    for (LoraTarget t : o.targets) {
      const bool attn = t == LoraTarget::kQ || t == LoraTarget::kK || t == LoraTarget::kV || t == LoraTarget::kO;
      make(*lora_detail::base_weight(base, static_cast<int64_t>(l), t), "blk." + std::to_string(l) + "." + lora_target_gguf(t) + ".weight",
           "model.layers." + std::to_string(l) + (attn ? ".self_attn." : ".mlp.") + lora_target_peft(t),
           t == LoraTarget::kQ || t == LoraTarget::kK);
    }
  }
  if (o.output) make(base.output, "output.weight", "lm_head", false);
  if (!peft_dir.empty()) LL3_RETURN_IF_ERROR(write_peft(peft_dir, o, pairs, base));
  if (!gguf_path.empty()) LL3_RETURN_IF_ERROR(write_gguf(gguf_path, o, pairs, base));
  return Status();
}

namespace {

// The float rows of a weight: its row r, dequantized.
void weight_row(const WeightMatrix& w, int64_t r, float* out, std::vector<uint8_t>& buf) {
  w.traits->to_float(w.row_in(r, buf.data()), out, w.cols);
}

// What one merged weight takes: the base's view and the pairs that correct it, with scales.
struct Correction {
  const WeightMatrix* base = nullptr;
  std::vector<std::pair<const LoraPair*, double>> pairs;
};

// Rows of base + Σ s · B A, in double, into `type` at dst.
void merged_rows(const Correction& c, DType type, uint8_t* dst) {
  const WeightMatrix& w = *c.base;
  const TypeTraits* tr = type_traits(type);
  const size_t out_rb = dtype_row_bytes(type, w.cols);
  std::vector<uint8_t> buf(std::max(w.row_bytes, size_t(64)));
  // Each pair's A in float, once.
  std::vector<std::vector<float>> a(c.pairs.size());
  for (size_t k = 0; k < c.pairs.size(); ++k) {
    const WeightMatrix& am = c.pairs[k].first->a;
    a[k].resize(static_cast<size_t>(am.rows * am.cols));
    std::vector<uint8_t> abuf(am.row_bytes);
    for (int64_t j = 0; j < am.rows; ++j) weight_row(am, j, &a[k][static_cast<size_t>(j * am.cols)], abuf);
  }
  std::vector<float> row(static_cast<size_t>(w.cols)), brow;
  std::vector<double> acc(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    weight_row(w, r, row.data(), buf);
    for (int64_t i = 0; i < w.cols; ++i) acc[i] = row[i];
    for (size_t k = 0; k < c.pairs.size(); ++k) {
      const LoraPair& p = *c.pairs[k].first;
      brow.resize(static_cast<size_t>(p.b.cols));
      std::vector<uint8_t> bbuf(p.b.row_bytes);
      weight_row(p.b, r, brow.data(), bbuf);
      for (int64_t j = 0; j < p.b.cols; ++j) {
        const double coef = c.pairs[k].second * brow[static_cast<size_t>(j)];
        const float* aj = &a[k][static_cast<size_t>(j * w.cols)];
        for (int64_t i = 0; i < w.cols; ++i) acc[i] += coef * aj[i];
      }
    }
    for (int64_t i = 0; i < w.cols; ++i) row[i] = static_cast<float>(acc[i]);
    tr->from_float(row.data(), dst + r * out_rb, w.cols);
  }
}

DType merged_type_of(DType base, DType asked) {
  if (asked != DType::Q8_K) return asked;
  return base == DType::F32 || base == DType::BF16 ? base : DType::F16;
}

}  // namespace

Status merge_lora(const LlamaModel& base, const std::vector<std::pair<const LoraAdapter*, float>>& adapters,
                  const std::string& out_path, DType merged_type) {
  if (base.gguf() == nullptr) return Status::error("export-lora: the base must be a GGUF file");
  if (base.panel_matrices() > 0) return Status::error("export-lora: the base must be loaded in the row layout (no decode panels)");
  if (merged_type != DType::Q8_K && merged_type != DType::F32 && merged_type != DType::F16 && merged_type != DType::BF16) {
    return Status::error("export-lora: merged weights are written as f32, f16 or bf16");
  }
  // weight name -> its corrections.
  std::map<std::string, Correction> fix;
  Correction head;  // a tied model's LM head becomes a tensor of its own
  for (const auto& [ad, scale] : adapters) {
    for (size_t l = 0; l < base.layers.size(); ++l) {
      for (int t = 0; t < kLoraTargets; ++t) {
        const LoraPair* p = ad->pair(static_cast<int64_t>(l), static_cast<LoraTarget>(t));
        if (p == nullptr) continue;
        const WeightMatrix* w = lora_detail::base_weight(base, static_cast<int64_t>(l), static_cast<LoraTarget>(t));
        Correction& c = fix[w->name];
        c.base = w;
        c.pairs.emplace_back(p, static_cast<double>(scale) * p->scale);
      }
    }
    if (ad->output.present()) {
      Correction& c = base.config.tied_embeddings ? head : fix["output.weight"];
      c.base = &base.output;
      c.pairs.emplace_back(&ad->output, static_cast<double>(scale) * ad->output.scale);
    }
  }
  quant::ModelSource src = quant::source_from_gguf(*base.gguf());
  GgufWriter w;
  LL3_RETURN_IF_ERROR(w.set_alignment(src.alignment));
  for (const auto& [key, value] : src.metadata) w.set(key, value);
  for (const quant::SourceTensor& t : src.tensors) {
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    auto it = fix.find(t.name);
    if (it == fix.end()) {
      LL3_RETURN_IF_ERROR(w.add_tensor(t.name, t.type, ne, t.data));
      continue;
    }
    const DType type = merged_type_of(t.type, merged_type);
    const Correction* c = &it->second;
    LL3_RETURN_IF_ERROR(w.add_tensor(t.name, type, ne, [c, type](uint8_t* dst) { merged_rows(*c, type, dst); }));
  }
  if (head.base != nullptr) {
    const DType type = merged_type_of(head.base->type, merged_type);
    const Correction* c = &head;
    LL3_RETURN_IF_ERROR(w.add_tensor("output.weight", type, {head.base->cols, head.base->rows},
                                     [c, type](uint8_t* dst) { merged_rows(*c, type, dst); }));
  }
  return w.write(out_path);
}

}  // namespace ll3
