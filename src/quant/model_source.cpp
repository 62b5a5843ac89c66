#include "quant/model_source.h"

#include <algorithm>
#include <cstring>

#include "io/gguf.h"
#include "io/hf_config.h"
#include "io/hf_export.h"
#include "io/safetensors.h"
#include "tokenizer/vocab.h"

namespace ll3::quant {

namespace {

// Metadata value as read -> the same value for the writer.
GgufWriteValue to_write_value(const GgufValue& v) {
  switch (v.type) {
    case GgufType::U8: return GgufWriteValue::u8(static_cast<uint8_t>(v.u));
    case GgufType::I8: return GgufWriteValue::i8(static_cast<int8_t>(v.i));
    case GgufType::U16: return GgufWriteValue::u16(static_cast<uint16_t>(v.u));
    case GgufType::I16: return GgufWriteValue::i16(static_cast<int16_t>(v.i));
    case GgufType::U32: return GgufWriteValue::u32(static_cast<uint32_t>(v.u));
    case GgufType::I32: return GgufWriteValue::i32(static_cast<int32_t>(v.i));
    case GgufType::U64: return GgufWriteValue::u64(v.u);
    case GgufType::I64: return GgufWriteValue::i64(v.i);
    case GgufType::F32: return GgufWriteValue::f32(static_cast<float>(v.f));
    case GgufType::F64: return GgufWriteValue::f64(v.f);
    case GgufType::BOOL: return GgufWriteValue::boolean(v.i != 0);
    case GgufType::STRING: return GgufWriteValue::string(v.str);
    case GgufType::ARRAY:
      if (v.elem_type == GgufType::STRING) {
        return GgufWriteValue::string_array(std::vector<std::string>(v.strings.begin(), v.strings.end()));
      }
      if (v.elem_type == GgufType::ARRAY) {
        std::vector<GgufWriteValue> items;
        items.reserve(v.items.size());
        for (const GgufValue& item : v.items) items.push_back(to_write_value(item));
        return GgufWriteValue::array(items);
      }
      return GgufWriteValue::numeric_array(v.elem_type, v.elems, v.count);
  }
  return GgufWriteValue::u8(0);
}

// Hugging Face tensor name -> GGUF name and whether its rows are in rotate-half order; "" for
// tensors a GGUF llama file does not hold.
std::pair<std::string, bool> gguf_name(const std::string& hf) {
  static const std::pair<const char*, const char*> kLayer[] = {
      {"input_layernorm.weight", "attn_norm.weight"},       {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},         {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},    {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},          {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  if (hf == "model.embed_tokens.weight") return {"token_embd.weight", false};
  if (hf == "model.norm.weight") return {"output_norm.weight", false};
  if (hf == "lm_head.weight") return {"output.weight", false};
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) != 0) return {"", false};
  const size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos) return {"", false};
  const std::string layer = hf.substr(prefix.size(), dot - prefix.size());
  const std::string rest = hf.substr(dot + 1);
  for (const auto& [from, to] : kLayer) {
    if (rest == from) return {"blk." + layer + "." + to, rest == "self_attn.q_proj.weight" || rest == "self_attn.k_proj.weight"};
  }
  return {"", false};
}

// GGUF's tensor order: token_embd, rope_freqs, then each layer, then output_norm, output.
int order_key(const std::string& name, int64_t* layer) {
  *layer = -1;
  if (name == "token_embd.weight") return 0;
  if (name == "rope_freqs.weight") return 1;
  if (name.rfind("blk.", 0) == 0) {
    *layer = std::strtoll(name.c_str() + 4, nullptr, 10);
    return 2;
  }
  if (name == "output_norm.weight") return 3;
  return 4;
}

}  // namespace

void SourceTensor::copy_data(uint8_t* dst) const {
  if (row_map == nullptr) {
    std::memcpy(dst, data, nbytes);
    return;
  }
  const size_t rb = dtype_row_bytes(type, ne[0]);
  for (int64_t r = 0; r < n_rows(); ++r) std::memcpy(dst + r * rb, data + (*row_map)[r] * rb, rb);
}

std::string SourceTensor::shape_string() const {
  std::string s = "[";
  for (int d = 0; d < n_dims; ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
  return s + "]";
}

ModelSource source_from_gguf(const GgufFile& f) {
  ModelSource s;
  s.origin = f.origin();
  for (const auto& [key, value] : f.metadata()) {
    if (key == "general.alignment") continue;  // the writer sets it from `alignment`
    s.metadata.emplace_back(key, to_write_value(value));
  }
  s.alignment = static_cast<uint32_t>(f.alignment());
  s.arch = std::string(f.get_string("general.architecture").value_or("llama"));
  s.n_layer = f.get_int(s.arch + ".block_count").value_or(0);
  s.n_head = f.get_int(s.arch + ".attention.head_count").value_or(1);
  s.n_head_kv = f.get_int(s.arch + ".attention.head_count_kv").value_or(s.n_head);
  for (const GgufTensorInfo& t : f.tensors()) {
    SourceTensor st;
    st.name = t.name;
    st.type = t.type;
    st.n_dims = std::max(1, t.n_dims);
    std::copy(t.ne, t.ne + 4, st.ne);
    st.data = t.data;
    st.nbytes = t.nbytes;
    s.tensors.push_back(std::move(st));
  }
  return s;
}

namespace {

using Metadata = std::vector<std::pair<std::string, GgufWriteValue>>;

// The llama.* keys, with their order, as llama.cpp's converter writes them for a llama checkpoint.
void append_llama_keys(const LlamaConfig& c, size_t n_vocab, Metadata& m) {
  m.emplace_back("general.architecture", GgufWriteValue::string("llama"));
  m.emplace_back("general.name", GgufWriteValue::string(c.name));
  m.emplace_back("llama.context_length", GgufWriteValue::u32(static_cast<uint32_t>(c.context_length)));
  m.emplace_back("llama.embedding_length", GgufWriteValue::u32(static_cast<uint32_t>(c.dim)));
  m.emplace_back("llama.block_count", GgufWriteValue::u32(static_cast<uint32_t>(c.n_layers)));
  m.emplace_back("llama.feed_forward_length", GgufWriteValue::u32(static_cast<uint32_t>(c.ffn_dim)));
  m.emplace_back("llama.attention.head_count", GgufWriteValue::u32(static_cast<uint32_t>(c.n_heads)));
  m.emplace_back("llama.attention.head_count_kv", GgufWriteValue::u32(static_cast<uint32_t>(c.n_kv_heads)));
  m.emplace_back("llama.rope.freq_base", GgufWriteValue::f32(c.rope_theta));
  m.emplace_back("llama.attention.layer_norm_rms_epsilon", GgufWriteValue::f32(c.norm_eps));
  if (c.head_dim != c.dim / c.n_heads) {
    m.emplace_back("llama.attention.key_length", GgufWriteValue::u32(static_cast<uint32_t>(c.head_dim)));
    m.emplace_back("llama.attention.value_length", GgufWriteValue::u32(static_cast<uint32_t>(c.head_dim)));
  }
  m.emplace_back("llama.vocab_size", GgufWriteValue::u32(static_cast<uint32_t>(n_vocab)));
  m.emplace_back("llama.rope.dimension_count", GgufWriteValue::u32(static_cast<uint32_t>(c.head_dim)));
}

// The tokenizer.* keys, after the llama.* ones, in the converter's order.
void append_tokenizer_keys(const TokenizerVocab& v, Metadata& m) {
  m.emplace_back("tokenizer.ggml.model", GgufWriteValue::string("gpt2"));
  m.emplace_back("tokenizer.ggml.pre", GgufWriteValue::string(v.pre.empty() ? "llama-bpe" : v.pre));
  m.emplace_back("tokenizer.ggml.tokens", GgufWriteValue::string_array(v.tokens));
  m.emplace_back("tokenizer.ggml.token_type",
                 GgufWriteValue::numeric_array(GgufType::I32, v.token_types.data(), v.token_types.size()));
  m.emplace_back("tokenizer.ggml.merges", GgufWriteValue::string_array(v.merges));
  if (v.bos_id >= 0) m.emplace_back("tokenizer.ggml.bos_token_id", GgufWriteValue::u32(static_cast<uint32_t>(v.bos_id)));
  if (v.eos_id >= 0) m.emplace_back("tokenizer.ggml.eos_token_id", GgufWriteValue::u32(static_cast<uint32_t>(v.eos_id)));
  if (v.eot_id >= 0 && v.eot_id != v.eos_id) {
    m.emplace_back("tokenizer.ggml.eot_token_id", GgufWriteValue::u32(static_cast<uint32_t>(v.eot_id)));
  }
  m.emplace_back("tokenizer.ggml.add_bos_token", GgufWriteValue::boolean(v.add_bos));
  if (!v.chat_template.empty()) m.emplace_back("tokenizer.chat_template", GgufWriteValue::string(v.chat_template));
}

// The checkpoint's tensors under their GGUF names and shapes (views into the mapped files); Q
// and K rows are read through a row map from rotate-half order back to GGUF's.
Status append_hf_tensors(const std::string& dir, const LlamaConfig& c, const SafetensorsModel& model,
                         std::vector<SourceTensor>& out) {
  // GGUF row -> HF row of a rotate-half Q/K matrix, one table per head size.
  auto row_map_for = [&c](int64_t rows) {
    auto map = std::make_shared<std::vector<int64_t>>(rows);
    for (int64_t hf = 0; hf < rows; ++hf) (*map)[gguf_row_of_hf_row(hf, c.head_dim)] = hf;
    return map;
  };
  for (const auto& [hf_name, t] : model.tensors()) {
    auto [name, rotate_half] = gguf_name(hf_name);
    if (name.empty()) continue;
    if (name == "output.weight" && c.tied_embeddings) continue;  // the embedding is the output
    if (t->shape.empty() || t->shape.size() > 4) {
      return Status::errorf("quantize: %s: tensor '%s' has %zu dimensions", dir.c_str(), hf_name.c_str(),
                            t->shape.size());
    }
    SourceTensor st;
    st.name = name;
    st.type = t->type;
    st.n_dims = static_cast<int>(t->shape.size());
    for (int d = 0; d < st.n_dims; ++d) st.ne[d] = t->shape[st.n_dims - 1 - d];
    st.data = t->data;
    st.nbytes = t->nbytes;
    if (rotate_half) {
      if (st.n_dims != 2 || st.ne[1] % c.head_dim != 0) {
        return Status::errorf("quantize: %s: '%s' %s is not a stack of %lld-row heads", dir.c_str(),
                              hf_name.c_str(), t->shape_string().c_str(), static_cast<long long>(c.head_dim));
      }
      st.row_map = row_map_for(st.ne[1]);
    }
    out.push_back(std::move(st));
  }
  return ok_status();
}

// Llama 3.1 scaling: GGUF holds the frequency factors as a tensor, made here (and kept alive by s).
void append_rope_freqs(const LlamaConfig& c, ModelSource& s) {
  auto factors = std::make_shared<std::vector<float>>(llama3_rope_freq_factors(c.head_dim, c.rope_theta, c.rope_scaling));
  SourceTensor st;
  st.name = "rope_freqs.weight";
  st.type = DType::F32;
  st.n_dims = 1;
  st.ne[0] = static_cast<int64_t>(factors->size());
  st.data = reinterpret_cast<const uint8_t*>(factors->data());
  st.nbytes = factors->size() * sizeof(float);
  s.keep.push_back(factors);
  s.tensors.push_back(std::move(st));
}

}  // namespace

Result<ModelSource> source_from_hf(const std::string& dir) {
  auto cfg_or = load_hf_config(dir);
  if (!cfg_or.ok()) return cfg_or.status();
  const LlamaConfig c = *cfg_or;
  auto vocab_or = load_vocab_from_hf(dir);
  if (!vocab_or.ok()) return vocab_or.status();
  const TokenizerVocab& v = *vocab_or;
  auto model_or = SafetensorsModel::open_dir(dir);
  if (!model_or.ok()) return model_or.status();
  std::shared_ptr<SafetensorsModel> model(std::move(model_or.value()));

  ModelSource s;
  s.origin = dir;
  s.keep.push_back(model);
  s.n_layer = c.n_layers;
  s.n_head = c.n_heads;
  s.n_head_kv = c.n_kv_heads;
  append_llama_keys(c, v.tokens.size(), s.metadata);
  append_tokenizer_keys(v, s.metadata);
  LL3_RETURN_IF_ERROR(append_hf_tensors(dir, c, *model, s.tensors));
  if (c.rope_scaling.enabled) append_rope_freqs(c, s);
  // Safetensors order is by name; put the tensors in the order llama.cpp's converter writes
  // them (the per-tensor type rules count attn_v / ffn_down layers in this order).
  std::stable_sort(s.tensors.begin(), s.tensors.end(), [](const SourceTensor& a, const SourceTensor& b) {
    int64_t la, lb;
    const int ka = order_key(a.name, &la), kb = order_key(b.name, &lb);
    return ka != kb ? ka < kb : la < lb;
  });
  return s;
}

}  // namespace ll3::quant
