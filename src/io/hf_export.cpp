#include "io/hf_export.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "io/hf_config.h"
#include "io/safetensors.h"

namespace ll3 {
namespace {

namespace fs = std::filesystem;

struct ExportTensor {
  std::string hf_name;
  const GgufTensorInfo* src = nullptr;
  int64_t unpermute_head_dim = 0;  // > 0 for Q and K
};

Result<int64_t> need_int(const GgufFile& g, const char* key) {
  auto v = g.get_int(key);
  if (!v || *v <= 0) {
    return Status::errorf("hf export: %s: metadata '%s' is missing or not a positive integer",
                          g.origin().c_str(), key);
  }
  return *v;
}

Result<LlamaConfig> config_from_gguf(const GgufFile& g) {
  auto arch = g.get_string("general.architecture");
  if (!arch || *arch != "llama") {
    return Status::errorf("hf export: %s: general.architecture is not 'llama'", g.origin().c_str());
  }
  LlamaConfig c;
  auto get = [&](const char* key, int64_t* out) -> Status {
    auto v = need_int(g, key);
    if (!v.ok()) return v.status();
    *out = *v;
    return ok_status();
  };
  LL3_RETURN_IF_ERROR(get("llama.embedding_length", &c.dim));
  LL3_RETURN_IF_ERROR(get("llama.block_count", &c.n_layers));
  LL3_RETURN_IF_ERROR(get("llama.attention.head_count", &c.n_heads));
  LL3_RETURN_IF_ERROR(get("llama.feed_forward_length", &c.ffn_dim));
  c.n_kv_heads = g.get_int("llama.attention.head_count_kv").value_or(c.n_heads);
  c.context_length = g.get_int("llama.context_length").value_or(8192);
  c.head_dim = g.get_int("llama.attention.key_length")
                   .value_or(g.get_int("llama.rope.dimension_count").value_or(c.dim / c.n_heads));
  c.norm_eps =
      static_cast<float>(g.get_float("llama.attention.layer_norm_rms_epsilon").value_or(1e-5));
  c.rope_theta = static_cast<float>(g.get_float("llama.rope.freq_base").value_or(10000.0));
  if (c.n_kv_heads <= 0 || c.n_heads % c.n_kv_heads != 0 || c.head_dim <= 0 || c.head_dim % 2) {
    return Status::errorf(
        "hf export: %s: inconsistent head counts (%lld heads, %lld KV heads, "
        "head dim %lld)",
        g.origin().c_str(), static_cast<long long>(c.n_heads), static_cast<long long>(c.n_kv_heads),
        static_cast<long long>(c.head_dim));
  }
  const GgufTensorInfo* embd = g.find_tensor("token_embd.weight");
  if (embd == nullptr) {
    return Status::errorf("hf export: %s: no token_embd.weight", g.origin().c_str());
  }
  c.n_vocab = embd->ne[1];
  c.tied_embeddings = g.find_tensor("output.weight") == nullptr;
  return c;
}

const char* torch_dtype(DType t) {
  switch (t) {
    case DType::F16:
      return "float16";
    case DType::BF16:
      return "bfloat16";
    default:
      return "float32";
  }
}

std::string shard_name(int k, int n) {
  return strprintf("model-%05d-of-%05d.safetensors", k + 1, n);
}

Status copy_tokenizer(const std::string& from, const std::string& to) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(from) / "tokenizer.json", ec)) {
    return Status::error("hf export: tokenizer directory " + from + " has no tokenizer.json");
  }
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json",
                        "special_tokens_map.json"}) {
    fs::path src = fs::path(from) / f;
    if (!fs::is_regular_file(src, ec)) continue;
    fs::copy_file(src, fs::path(to) / f, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      return Status::error("hf export: cannot copy " + src.string() + " to " + to + ": " +
                           ec.message());
    }
  }
  return ok_status();
}

// Tensors in the order Hugging Face lists them; Q and K carry their head size to be unpermuted.
Result<std::vector<ExportTensor>> export_list(const GgufFile& gguf, const LlamaConfig& c) {
  std::vector<ExportTensor> list;
  auto need = [&](const std::string& gguf_name, std::string hf_name, int64_t head_dim = 0) {
    const GgufTensorInfo* t = gguf.find_tensor(gguf_name);
    if (t == nullptr) {
      return Status::error("hf export: " + gguf.origin() + ": missing tensor '" + gguf_name + "'");
    }
    if (t->type != DType::F32 && t->type != DType::F16 && t->type != DType::BF16) {
      return Status::error("hf export: " + gguf.origin() + ": tensor '" + gguf_name +
                           "' has type " + std::string(dtype_name(t->type)) +
                           " (only f32, f16 and bf16 can be exported)");
    }
    list.push_back({std::move(hf_name), t, head_dim});
    return ok_status();
  };
  LL3_RETURN_IF_ERROR(need("token_embd.weight", "model.embed_tokens.weight"));
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const std::string h = "model.layers." + std::to_string(l) + ".";
    LL3_RETURN_IF_ERROR(need(b + "attn_norm.weight", h + "input_layernorm.weight"));
    LL3_RETURN_IF_ERROR(need(b + "attn_q.weight", h + "self_attn.q_proj.weight", c.head_dim));
    LL3_RETURN_IF_ERROR(need(b + "attn_k.weight", h + "self_attn.k_proj.weight", c.head_dim));
    LL3_RETURN_IF_ERROR(need(b + "attn_v.weight", h + "self_attn.v_proj.weight"));
    LL3_RETURN_IF_ERROR(need(b + "attn_output.weight", h + "self_attn.o_proj.weight"));
    LL3_RETURN_IF_ERROR(need(b + "ffn_norm.weight", h + "post_attention_layernorm.weight"));
    LL3_RETURN_IF_ERROR(need(b + "ffn_gate.weight", h + "mlp.gate_proj.weight"));
    LL3_RETURN_IF_ERROR(need(b + "ffn_up.weight", h + "mlp.up_proj.weight"));
    LL3_RETURN_IF_ERROR(need(b + "ffn_down.weight", h + "mlp.down_proj.weight"));
  }
  LL3_RETURN_IF_ERROR(need("output_norm.weight", "model.norm.weight"));
  if (!c.tied_embeddings) LL3_RETURN_IF_ERROR(need("output.weight", "lm_head.weight"));
  for (const auto& e : list) {
    if (e.unpermute_head_dim > 0 && (e.src->n_dims != 2 || e.src->ne[1] % c.head_dim != 0)) {
      return Status::error("hf export: " + gguf.origin() + ": tensor '" + e.src->name +
                           "' has shape " + e.src->shape_string() + ", not whole heads of " +
                           std::to_string(c.head_dim) + " rows");
    }
  }
  return list;
}

// Llama 3.1: GGUF keeps only the resulting factors; config.json wants the parameters. The
// standard ones (low 1, high 4, original 8192) with the factor the tensor's last entry holds
// must reproduce the tensor, or the export would change the model. Sets c.rope_scaling.
Status rope_scaling_from_gguf(const GgufFile& gguf, LlamaConfig& c) {
  const GgufTensorInfo* rf = gguf.find_tensor("rope_freqs.weight");
  if (rf == nullptr) return ok_status();
  if (rf->type != DType::F32 || rf->ne[0] != c.head_dim / 2 || rf->n_dims != 1) {
    return Status::error("hf export: " + gguf.origin() + ": rope_freqs.weight has type " +
                         std::string(dtype_name(rf->type)) + " and shape " + rf->shape_string() +
                         "; expected f32 [" + std::to_string(c.head_dim / 2) + "]");
  }
  std::vector<float> have(static_cast<size_t>(rf->ne[0]));
  std::memcpy(have.data(), rf->data, have.size() * 4);
  c.rope_scaling.enabled = true;
  c.rope_scaling.factor = have.back();
  std::vector<float> want = llama3_rope_freq_factors(c.head_dim, c.rope_theta, c.rope_scaling);
  for (size_t i = 0; i < have.size(); ++i) {
    if (std::fabs(have[i] - want[i]) > 1e-5f * std::fabs(want[i])) {
      return Status::errorf(
          "hf export: %s: rope_freqs.weight[%zu] = %g is not llama3 scaling "
          "with factor %g, low 1, high 4, original context 8192 (%g)",
          gguf.origin().c_str(), i, have[i], c.rope_scaling.factor, want[i]);
    }
  }
  return ok_status();
}

Status write_text(const std::string& out_dir, const char* name, const std::string& text) {
  FILE* f = std::fopen((fs::path(out_dir) / name).c_str(), "wb");
  bool ok = f != nullptr && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f != nullptr) ok = std::fclose(f) == 0 && ok;
  if (!ok) return Status::error("hf export: cannot write " + out_dir + "/" + name);
  return ok_status();
}

Status write_config(const GgufFile& gguf, const LlamaConfig& c, const std::string& out_dir) {
  HfConfigTokens tokens;
  tokens.bos_id = gguf.get_int("tokenizer.ggml.bos_token_id").value_or(-1);
  if (auto eos = gguf.get_int("tokenizer.ggml.eos_token_id")) tokens.eos_ids.push_back(*eos);
  const std::string config =
      hf_config_json(c, tokens, torch_dtype(gguf.find_tensor("token_embd.weight")->type));
  return write_text(out_dir, "config.json", config);
}

// Safetensors tensors: shapes reversed (outermost first); Q/K rows put back in HF order. The
// data is copied when each is written. *total: their bytes.
std::vector<SafetensorsWriteTensor> safetensors_list(const std::vector<ExportTensor>& list,
                                                     uint64_t* total) {
  std::vector<SafetensorsWriteTensor> st;
  *total = 0;
  for (const auto& e : list) {
    const GgufTensorInfo* t = e.src;
    SafetensorsWriteTensor w;
    w.name = e.hf_name;
    w.type = t->type;
    for (int d = t->n_dims - 1; d >= 0; --d) w.shape.push_back(t->ne[d]);
    const int64_t head_dim = e.unpermute_head_dim;
    if (head_dim > 0) {
      const size_t row_bytes = t->nbytes / static_cast<size_t>(t->ne[1]);
      const int64_t rows = t->ne[1];
      w.fill = [t, row_bytes, rows, head_dim](uint8_t* dst) {
        for (int64_t r = 0; r < rows; ++r) {
          std::memcpy(dst + r * row_bytes, t->data + gguf_row_of_hf_row(r, head_dim) * row_bytes,
                      row_bytes);
        }
      };
    } else {
      w.fill = [t](uint8_t* dst) { std::memcpy(dst, t->data, t->nbytes); };
    }
    *total += t->nbytes;
    st.push_back(std::move(w));
  }
  return st;
}

// n_shards files and their index. Consecutive groups, each closing once it passes its share of
// the bytes, and never fewer tensors left than shards to fill.
Status write_shards(const std::string& out_dir, const std::vector<ExportTensor>& list,
                    const std::vector<SafetensorsWriteTensor>& st, uint64_t total, int n_shards,
                    const std::map<std::string, std::string>& meta) {
  nlohmann::json weight_map = nlohmann::json::object();
  size_t next = 0;
  uint64_t done = 0;
  for (int k = 0; k < n_shards; ++k) {
    std::vector<SafetensorsWriteTensor> group;
    const uint64_t target = total * static_cast<uint64_t>(k + 1) / static_cast<uint64_t>(n_shards);
    while (next < st.size()) {
      const size_t shards_after = static_cast<size_t>(n_shards - k - 1);
      if (!group.empty() && (done >= target || st.size() - next <= shards_after)) break;
      done += list[next].src->nbytes;
      weight_map[st[next].name] = shard_name(k, n_shards);
      group.push_back(st[next++]);
    }
    LL3_RETURN_IF_ERROR(
        write_safetensors((fs::path(out_dir) / shard_name(k, n_shards)).string(), group, meta));
  }
  nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  return write_text(out_dir, "model.safetensors.index.json", index.dump(2) + "\n");
}

}  // namespace

int64_t gguf_row_of_hf_row(int64_t hf_row, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  const int64_t h = hf_row / head_dim, r = hf_row % head_dim;
  const int64_t j = r / half, i = r % half;
  return h * head_dim + 2 * i + j;
}

Status export_hf_directory(const GgufFile& gguf, const std::string& out_dir, int n_shards,
                           const std::string& tokenizer_dir) {
  auto cfg = config_from_gguf(gguf);
  if (!cfg.ok()) return cfg.status();
  LlamaConfig c = *cfg;
  auto list = export_list(gguf, c);
  if (!list.ok()) return list.status();
  LL3_RETURN_IF_ERROR(rope_scaling_from_gguf(gguf, c));

  if (n_shards < 1 || static_cast<size_t>(n_shards) > list->size()) {
    return Status::errorf("hf export: %d shards requested; 1 to %zu possible", n_shards,
                          list->size());
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return Status::error("hf export: cannot create " + out_dir + ": " + ec.message());
  LL3_RETURN_IF_ERROR(write_config(gguf, c, out_dir));
  uint64_t total = 0;
  std::vector<SafetensorsWriteTensor> st = safetensors_list(*list, &total);

  if (!tokenizer_dir.empty()) LL3_RETURN_IF_ERROR(copy_tokenizer(tokenizer_dir, out_dir));
  // A stale file of the other layout would take precedence when the directory is read.
  fs::remove(
      fs::path(out_dir) / (n_shards == 1 ? "model.safetensors.index.json" : "model.safetensors"),
      ec);
  const std::map<std::string, std::string> meta = {{"format", "pt"}};
  if (n_shards == 1) {
    return write_safetensors((fs::path(out_dir) / "model.safetensors").string(), st, meta);
  }
  return write_shards(out_dir, *list, st, total, n_shards, meta);
}

}  // namespace ll3
