#include "quant/quantize.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <map>
#include <thread>

#include "core/check.h"
#include "io/gguf_writer.h"
#include "kernels/ref/quant_weighted.h"
#include "kernels/type_traits.h"

namespace ll3::quant {

namespace {

// llama.cpp's LLAMA_FTYPE_MOSTLY_* ids.
const std::vector<QuantMix> kMixes = {
    {"q8_0", DType::Q8_0, 7},    {"q4_0", DType::Q4_0, 2},    {"q4_1", DType::Q4_1, 3},
    {"q5_0", DType::Q5_0, 8},    {"q5_1", DType::Q5_1, 9},    {"q2_k", DType::Q2_K, 10},
    {"q3_k_m", DType::Q3_K, 12}, {"q4_k_s", DType::Q4_K, 14}, {"q4_k_m", DType::Q4_K, 15},
    {"q5_k_s", DType::Q5_K, 16}, {"q5_k_m", DType::Q5_K, 17}, {"q6_k", DType::Q6_K, 18},
    {"q3_k_s", DType::Q3_K, 11}, {"q3_k_l", DType::Q3_K, 13},
};
// Kept apart: llama-quantize refuses them without an importance matrix.
const std::vector<QuantMix> kImatrixMixes = {{"q2_k_s", DType::Q2_K, 21}};

bool is(const QuantMix& m, const char* name) { return std::string_view(m.name) == name; }
bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

enum class Category { kTokenEmbd, kAttnV, kAttnK, kAttnQ, kAttnOutput, kFfnUp, kFfnGate, kFfnDown, kOutput, kOther };

Category category_of(const std::string& name) {
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight") return Category::kTokenEmbd;
  if (contains(name, "attn_v.weight")) return Category::kAttnV;
  if (contains(name, "attn_k.weight")) return Category::kAttnK;
  if (contains(name, "attn_q.weight")) return Category::kAttnQ;
  if (contains(name, "attn_output.weight")) return Category::kAttnOutput;
  if (contains(name, "ffn_up")) return Category::kFfnUp;
  if (contains(name, "ffn_gate")) return Category::kFfnGate;
  if (contains(name, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

// Weight matrices are quantized; norms, 1-D tensors (rope_freqs) and non-weights are copied.
bool should_quantize(const SourceTensor& t) {
  const std::string& n = t.name;
  if (t.n_dims < 2) return false;
  if (n.size() < 6 || n.compare(n.size() - 6, 6, "weight") != 0) return false;
  return !contains(n, "_norm.weight");
}

// Layers at the start and end, and every third in between, get more bits (llama.cpp's choice).
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

struct MixState {
  int n_attn_v = 0, i_attn_v = 0;
  int n_ffn_down = 0, i_ffn_down = 0;
  int n_gqa = 1;
  bool is_70b = false;
  bool tied = true;
  bool has_imatrix = false;  // quantizing with a non-empty importance matrix
};

// A block type that does not divide the row falls back to a legacy type that does.
DType fallback(DType t, int64_t ncols) {
  if (ncols % dtype_info(t).block_size == 0) return t;
  DType f = DType::F16;
  switch (t) {
    case DType::Q2_K:
    case DType::Q3_K: f = DType::Q4_0; break;
    case DType::Q4_K: f = DType::Q5_0; break;
    case DType::Q5_K: f = DType::Q5_1; break;
    case DType::Q6_K: f = DType::Q8_0; break;
    default: break;
  }
  return ncols % dtype_info(f).block_size == 0 ? f : DType::F16;
}

DType choose_type(MixState& s, const QuantMix& mix, const SourceTensor& t) {
  const Category cat = category_of(t.name);
  DType type = mix.base;
  if (cat == Category::kOutput || (s.tied && cat == Category::kTokenEmbd)) {
    // The output projection (or the tied embedding doubling as it) is the most sensitive.
    if (t.ne[0] % dtype_info(type).block_size != 0) {
      type = DType::Q8_0;
    } else if (type != DType::Q8_0) {
      type = DType::Q6_K;
    }
  } else if (cat == Category::kTokenEmbd) {
    // keeps the base type
  } else if (cat == Category::kAttnV) {
    if (is(mix, "q2_k")) {
      type = s.n_gqa >= 4 ? DType::Q4_K : DType::Q3_K;
    } else if (is(mix, "q2_k_s") && s.n_gqa >= 4) {
      type = DType::Q4_K;
    } else if (is(mix, "q3_k_m")) {
      type = s.i_attn_v < 2 ? DType::Q5_K : DType::Q4_K;
    } else if (is(mix, "q3_k_l")) {
      type = DType::Q5_K;
    } else if ((is(mix, "q4_k_m") || is(mix, "q5_k_m")) && use_more_bits(s.i_attn_v, s.n_attn_v)) {
      type = DType::Q6_K;
    } else if (is(mix, "q4_k_s") && s.i_attn_v < 4) {
      type = DType::Q5_K;
    }
    // 70B: 8 heads share each attn_v, so it is small; more bits cost almost nothing.
    if (s.is_70b && (type == DType::Q3_K || type == DType::Q4_K)) type = DType::Q5_K;
    ++s.i_attn_v;
  } else if (cat == Category::kFfnDown) {
    const int i = s.i_ffn_down, n = s.n_ffn_down;
    if (is(mix, "q2_k")) {
      type = DType::Q3_K;
    } else if (is(mix, "q2_k_s")) {
      if (i < n / 8) type = DType::Q4_K;
    } else if (is(mix, "q3_k_m")) {
      type = i < n / 16 ? DType::Q5_K : DType::Q4_K;
    } else if (is(mix, "q3_k_l")) {
      type = DType::Q5_K;
    } else if (is(mix, "q4_k_m")) {
      if (use_more_bits(i, n)) type = DType::Q6_K;
    } else if (is(mix, "q5_k_m") && use_more_bits(i, n)) {
      type = DType::Q6_K;
    } else if (is(mix, "q4_k_s") && i < n / 8) {
      type = DType::Q5_K;
    } else if ((is(mix, "q4_0") || is(mix, "q5_0")) && s.has_imatrix && i < n / 8) {
      // llama.cpp guards the first ffn_down layers, which go wrong even with an imatrix at
      // q4_0 / q5_0, only when one is given, so that files made without stay as they were.
      type = is(mix, "q4_0") ? DType::Q4_1 : DType::Q5_1;
    }
    ++s.i_ffn_down;
  } else if (cat == Category::kAttnOutput) {
    if (is(mix, "q2_k")) type = DType::Q3_K;
    else if (is(mix, "q3_k_m")) type = DType::Q4_K;
    else if (is(mix, "q3_k_l")) type = DType::Q5_K;
  }
  return fallback(type, t.ne[0]);
}

bool has_entries(const ImatrixWeights* imatrix) { return imatrix != nullptr && !imatrix->weights.empty(); }

// Give a quantized tensor its importance weights, with llama-quantize's checks: an entry of the
// wrong size means the matrix belongs to another model (an error, except for token_embd, which
// old imatrix files carry with a mismatched size), and q2_k_s refuses a Q2_K tensor without one.
Status attach_imatrix(TensorPlan& p, const ImatrixWeights* imatrix, const QuantMix& mix) {
  const SourceTensor& t = *p.tensor;
  if (has_entries(imatrix)) {
    if (const std::vector<float>* w = imatrix->find(t.name)) {
      if (t.ne[2] > 1) {
        // Per-expert entries would need a row offset per matrix; no architecture ll3 reads has them.
        return Status::errorf("quantize: imatrix entry for 3-D tensor '%s' is not supported", t.name.c_str());
      }
      const int64_t want = t.ne[0] * t.ne[2];
      if (static_cast<int64_t>(w->size()) == want) {
        p.imatrix = w;
      } else if (t.name != "token_embd.weight") {
        return Status::errorf("quantize: imatrix '%s' has %zu values for tensor '%s', which has %lld columns",
                              imatrix->file.c_str(), w->size(), t.name.c_str(), static_cast<long long>(want));
      }
    }
  }
  if (p.imatrix == nullptr && p.type == DType::Q2_K && is(mix, "q2_k_s") && t.name != "token_embd.weight") {
    return Status::errorf("quantize: missing importance matrix for tensor '%s' in the very low-bit %s (the "
                          "result would be garbage)", t.name.c_str(), mix.name);
  }
  return ok_status();
}

}  // namespace

bool mix_requires_imatrix(const QuantMix& mix) {
  for (const QuantMix& m : kImatrixMixes) {
    if (is(mix, m.name)) return true;
  }
  return false;
}

const std::vector<QuantMix>& quant_mixes() { return kMixes; }
const std::vector<QuantMix>& imatrix_only_mixes() { return kImatrixMixes; }

const QuantMix* find_quant_mix(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto* list : {&kMixes, &kImatrixMixes}) {
    for (const QuantMix& m : *list) {
      if (lower == m.name) return &m;
    }
  }
  return nullptr;
}

Result<std::vector<TensorPlan>> plan_quantization(const ModelSource& in, const QuantMix& mix,
                                                  const ImatrixWeights* imatrix) {
  MixState s;
  s.has_imatrix = has_entries(imatrix);
  s.n_gqa = in.n_head_kv > 0 ? static_cast<int>(in.n_head / in.n_head_kv) : 1;
  s.is_70b = in.arch == "llama" && in.n_layer == 80;
  int n_ffn_down = 0;
  for (const SourceTensor& t : in.tensors) {
    if (t.name == "output.weight") s.tied = false;
    if (category_of(t.name) == Category::kAttnV) ++s.n_attn_v;
    if (category_of(t.name) == Category::kFfnDown) ++n_ffn_down;
  }
  s.n_ffn_down = in.n_layer > 0 ? static_cast<int>(in.n_layer) : n_ffn_down;

  std::vector<TensorPlan> plan;
  for (const SourceTensor& t : in.tensors) {
    TensorPlan p{&t, t.type, false};
    if (should_quantize(t)) {
      const TypeTraits* src = type_traits(t.type);
      if (src == nullptr) {
        return Status::errorf("quantize: tensor '%s' has type %s, which ll3 cannot read", t.name.c_str(),
                              std::string(dtype_name(t.type)).c_str());
      }
      p.type = choose_type(s, mix, t);
      p.quantize = p.type != t.type;
      if (p.quantize && type_traits(p.type)->from_float == nullptr) {
        return Status::errorf("quantize: no quantizer for %s (tensor '%s')",
                              std::string(dtype_name(p.type)).c_str(), t.name.c_str());
      }
      if (p.quantize) LL3_RETURN_IF_ERROR(attach_imatrix(p, imatrix, mix));
    }
    plan.push_back(p);
  }
  return plan;
}

Result<std::vector<std::pair<std::string, DType>>> plan_types(const GgufFile& in, const QuantMix& mix,
                                                              const ImatrixWeights* imatrix) {
  const ModelSource src = source_from_gguf(in);
  auto plan = plan_quantization(src, mix, imatrix);
  if (!plan.ok()) return plan.status();
  std::vector<std::pair<std::string, DType>> out;
  for (const TensorPlan& p : *plan) out.emplace_back(p.tensor->name, p.type);
  return out;
}

Status quantize_rows(const uint8_t* src, DType from, uint8_t* dst, DType to, int64_t n, int64_t rows,
                     int threads, const int64_t* row_map, const float* importance) {
  const TypeTraits* in = type_traits(from);
  const TypeTraits* out = type_traits(to);
  if (in == nullptr || out == nullptr || out->from_float == nullptr) {
    return Status::errorf("quantize: cannot convert %s to %s", std::string(dtype_name(from)).c_str(),
                          std::string(dtype_name(to)).c_str());
  }
  if (n % dtype_info(from).block_size != 0 || n % dtype_info(to).block_size != 0) {
    return Status::errorf("quantize: row of %lld elements is not a whole number of %s blocks",
                          static_cast<long long>(n), std::string(dtype_name(to)).c_str());
  }
  const size_t in_row = dtype_row_bytes(from, n), out_row = dtype_row_bytes(to, n);
  const kernels::ref::WeightedFromFloat weighted = importance ? kernels::ref::weighted_from_float(to) : nullptr;
  // Rows are independent; threads take chunks of rows from a shared counter.
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(64, rows / (8 * std::max(1, threads)) + 1));
  std::atomic<int64_t> next{0};
  auto work = [&]() {
    std::vector<float> row(n);  // one row as floats
    for (;;) {
      const int64_t r0 = next.fetch_add(chunk);
      if (r0 >= rows) break;
      for (int64_t r = r0; r < std::min(rows, r0 + chunk); ++r) {
        in->to_float(src + (row_map ? row_map[r] : r) * in_row, row.data(), n);
        if (weighted != nullptr) {
          weighted(row.data(), dst + r * out_row, n, importance);
        } else {
          out->from_float(row.data(), dst + r * out_row, n);
        }
      }
    }
  };
  const int nt = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, rows)));
  std::vector<std::thread> pool;
  for (int i = 1; i < nt; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return ok_status();
}

Result<QuantizeSummary> quantize_model(const ModelSource& in, const std::string& out_path, const QuantMix& mix,
                                       const QuantizeOptions& options) {
  const ImatrixWeights* imatrix = has_entries(options.imatrix) ? options.imatrix : nullptr;
  if (imatrix == nullptr && mix_requires_imatrix(mix)) {
    return Status::errorf("quantize: %s needs an importance matrix (--imatrix FILE); without one the result "
                          "would be garbage", mix.name);
  }
  auto plan_or = plan_quantization(in, mix, imatrix);
  if (!plan_or.ok()) return plan_or.status();
  const std::vector<TensorPlan>& plan = plan_or.value();

  GgufWriter w;
  for (const auto& [key, value] : in.metadata) w.set(key, value);
  LL3_RETURN_IF_ERROR(w.set_alignment(in.alignment));
  w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", mix.ftype);
  if (imatrix != nullptr) {
    // llama-quantize's keys, as it writes them: strings cut to 127 bytes, counts as i32.
    w.set_string("quantize.imatrix.file", imatrix->file.substr(0, 127));
    if (!imatrix->dataset.empty()) w.set_string("quantize.imatrix.dataset", imatrix->dataset.substr(0, 127));
    w.set_i32("quantize.imatrix.entries_count", static_cast<int32_t>(imatrix->weights.size()));
    if (imatrix->chunks > 0) w.set_i32("quantize.imatrix.chunks_count", imatrix->chunks);
  }

  QuantizeSummary sum;
  std::map<DType, int> counts;
  std::atomic<size_t> done{0};
  uint64_t bytes_in = 0, bytes_out = 0;
  for (const TensorPlan& p : plan) {
    const SourceTensor& t = *p.tensor;
    std::vector<int64_t> ne(t.ne, t.ne + std::max(1, t.n_dims));
    const uint64_t out_bytes = dtype_row_bytes(p.type, t.ne[0]) * static_cast<uint64_t>(t.n_elements() / t.ne[0]);
    sum.n_params += static_cast<uint64_t>(t.n_elements());
    sum.bytes_in += t.nbytes;
    sum.bytes_out += out_bytes;
    ++counts[p.type];
    const TensorPlan* pp = &p;
    auto report = [&, pp, out_bytes]() {
      bytes_in += pp->tensor->nbytes;
      bytes_out += out_bytes;
      if (options.on_tensor) options.on_tensor({++done, plan.size(), pp, bytes_in, bytes_out});
    };
    const int64_t* row_map = t.row_map ? t.row_map->data() : nullptr;
    if (!p.quantize) {
      LL3_RETURN_IF_ERROR(w.add_tensor(t.name, t.type, ne, [&t, report](uint8_t* dst) {
        t.copy_data(dst);
        report();
      }));
      continue;
    }
    const int threads = std::max(1, options.threads);
    LL3_RETURN_IF_ERROR(w.add_tensor(t.name, p.type, ne, [&t, pp, threads, row_map, report](uint8_t* dst) {
      // Types and row sizes were checked when planning, so a failure here is a bug.
      const float* importance = pp->imatrix ? pp->imatrix->data() : nullptr;
      const Status st =
          quantize_rows(t.data, t.type, dst, pp->type, t.ne[0], t.n_rows(), threads, row_map, importance);
      LL3_CHECK(st.ok());
      report();
    }));
  }
  sum.file_bytes = w.file_size();
  LL3_RETURN_IF_ERROR(w.write(out_path));
  for (const auto& [type, count] : counts) sum.type_counts.emplace_back(type, count);
  return sum;
}

Result<QuantizeSummary> quantize_gguf(const GgufFile& in, const std::string& out_path, const QuantMix& mix,
                                      const QuantizeOptions& options) {
  return quantize_model(source_from_gguf(in), out_path, mix, options);
}

}  // namespace ll3::quant
