// Loading a Hugging Face checkpoint directory: config.json + model.safetensors (or shards).
// Tensors keep their bytes in the mapped files; only names and shape order are translated to
// GGUF's (ne[0] innermost). Q/K stay in Hugging Face's rotate-half row order and the forward
// pass pairs RoPE dimensions to match (config.rope_half_pairs), so no weight is copied.
#include <algorithm>
#include <cstdio>

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/llama_model.h"

namespace ll3 {

namespace {

// Hugging Face tensor name -> GGUF tensor name; "" for names ll3 does not use.
std::string gguf_name(const std::string& hf) {
  static const std::pair<const char*, const char*> kLayer[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) != 0) return "";
  size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos) return "";
  std::string layer = hf.substr(prefix.size(), dot - prefix.size());
  if (layer.empty() || !std::all_of(layer.begin(), layer.end(), ::isdigit)) return "";
  std::string rest = hf.substr(dot + 1);
  for (const auto& [from, to] : kLayer) {
    if (rest == from) return "blk." + layer + "." + to;
  }
  return "";
}

}  // namespace

Status LlamaModel::load_hf(const std::string& dir) {
  auto ctx = [&](const Status& s) { return s.with_context("model: " + dir + ": "); };
  Result<LlamaConfig> cfg = load_hf_config(dir);
  if (!cfg.ok()) return ctx(cfg.status());
  config = cfg.value();
  Result<std::unique_ptr<SafetensorsModel>> st = SafetensorsModel::open_dir(dir, map_mode_);
  if (!st.ok()) return ctx(st.status());
  safetensors_ = std::move(st.value());
  for (const auto& [name, t] : safetensors_->tensors()) {
    std::string g = gguf_name(name);
    if (g.empty()) continue;  // rotary caches and other extras
    TensorRef r;
    r.name = g;
    r.type = t->type;
    r.ne.assign(t->shape.rbegin(), t->shape.rend());  // outermost-first -> innermost-first
    r.data = t->data;
    r.nbytes = t->nbytes;
    tensors_.push_back(std::move(r));
  }
  if (config.tied_embeddings) {
    // A tied checkpoint may still carry lm_head.weight; the embedding is the output then.
    tensors_.erase(std::remove_if(tensors_.begin(), tensors_.end(),
                                  [](const TensorRef& t) { return t.name == "output.weight"; }),
                   tensors_.end());
  }
  const int64_t declared_vocab = config.n_vocab;
  LL3_RETURN_IF_ERROR(ctx(bind_weights()));
  if (declared_vocab != 0 && declared_vocab != config.n_vocab) {
    return ctx(Status::errorf("config.json vocab_size %lld does not match model.embed_tokens.weight's %lld rows",
                              static_cast<long long>(declared_vocab), static_cast<long long>(config.n_vocab)));
  }
  return Status();
}

}  // namespace ll3
