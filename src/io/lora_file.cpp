#include "io/lora_file.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "io/gguf.h"
#include "io/safetensors.h"

namespace ll3 {

const char* lora_target_gguf_name(int target) {
  static const char* const names[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  return names[target];
}

const char* lora_target_peft_name(int target) {
  static const char* const names[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return names[target];
}

LoraFile::LoraFile() = default;
LoraFile::LoraFile(LoraFile&&) noexcept = default;
LoraFile::~LoraFile() = default;

namespace {

// ---- GGUF

// "blk.N.attn_q.weight" -> (N, 0); "output.weight" -> (-1, 0). False for other names.
bool gguf_target(const std::string& weight, int64_t* layer, int* target) {
  if (weight == "output.weight") {
    *layer = -1;
    *target = 0;
    return true;
  }
  if (weight.rfind("blk.", 0) != 0 || weight.size() < 6 || weight[4] < '0' || weight[4] > '9') return false;
  char* end = nullptr;
  const long long n = std::strtoll(weight.c_str() + 4, &end, 10);
  if (*end != '.' || n < 0 || end - (weight.c_str() + 4) > 9) return false;
  const std::string rest(end + 1);
  for (int k = 0; k < kLoraTargetCount; ++k) {
    if (rest == std::string(lora_target_gguf_name(k)) + ".weight") {
      *layer = n;
      *target = k;
      return true;
    }
  }
  return false;
}

LoraTensor gguf_tensor(const GgufTensorInfo& t) {
  return {t.name, t.type, t.ne[1], t.ne[0], t.data, t.nbytes};
}

Status gguf_metadata(const GgufFile& f, double* alpha) {
  const std::string type(f.get_string("general.type").value_or(""));
  if (type != "adapter") {
    return Status::error(type.empty() ? "not a LoRA adapter (no general.type; a model file?)"
                                      : "not a LoRA adapter (general.type is '" + type + "')");
  }
  const std::string kind(f.get_string("adapter.type").value_or(""));
  if (kind != "lora") return Status::error("adapter.type is '" + kind + "', not 'lora' (control vectors are not LoRA adapters)");
  const std::string arch(f.get_string("general.architecture").value_or(""));
  if (arch != "llama") return Status::error("the adapter is for architecture '" + arch + "'; ll3 runs 'llama'");
  if (const GgufValue* a = f.find("adapter.lora.alpha")) {
    const std::optional<double> v = a->as_number();
    if (!v || !std::isfinite(*v)) return Status::error("adapter.lora.alpha is not a number");
    *alpha = *v;
  }
  return Status();
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() > n && s.compare(s.size() - n, n, suffix) == 0;
}

// ---- PEFT

using json = nlohmann::json;

struct PeftConfig {
  int64_t r = 8;
  double alpha = 8;
  bool rslora = false;
  json rank_pattern = json::object(), alpha_pattern = json::object();
};

// PEFT's pattern rule: a key matches a module whose dotted name ends in it.
const json* pattern_value(const json& patterns, const std::string& module) {
  for (auto it = patterns.begin(); it != patterns.end(); ++it) {
    try {
      if (std::regex_match(module, std::regex("(.*\\.)?(" + it.key() + ")"))) return &it.value();
    } catch (const std::regex_error&) {
      return nullptr;  // refused by read_config
    }
  }
  return nullptr;
}

Status check_module_names(const json& targets) {
  if (targets.is_null() || (targets.is_string() && targets == "all-linear")) return Status();
  if (targets.is_string()) {
    try {
      std::regex re(targets.get<std::string>());
    } catch (const std::regex_error&) {
      return Status::error("target_modules is not a valid regular expression");
    }
    return Status();
  }
  if (!targets.is_array()) return Status::error("target_modules is not a list or a string");
  for (const json& t : targets) {
    if (!t.is_string()) return Status::error("target_modules holds a non-string");
    const std::string name = t.get<std::string>();
    if (name == "embed_tokens") return Status::error("target_modules names embed_tokens: a LoRA of the embeddings is not supported");
    bool known = name == "lm_head";
    for (int k = 0; k < kLoraTargetCount; ++k) known = known || name == lora_target_peft_name(k);
    if (!known) return Status::error("target_modules names '" + name + "', which a Llama model has no product called");
  }
  return Status();
}

Result<PeftConfig> read_config(std::string_view text) {
  const json c = json::parse(text.begin(), text.end(), nullptr, false);
  if (c.is_discarded() || !c.is_object()) return Status::error("adapter_config.json is not a JSON object");
  PeftConfig p;
  const std::string type = c.contains("peft_type") && c["peft_type"].is_string() ? c["peft_type"].get<std::string>() : "";
  if (type != "LORA") return Status::error("adapter_config.json: peft_type is '" + type + "', not 'LORA'");
  auto flag = [&](const char* k) { return c.contains(k) && c[k].is_boolean() && c[k].get<bool>(); };
  if (flag("use_dora")) return Status::error("adapter_config.json: use_dora (DoRA) is not supported");
  if (flag("fan_in_fan_out")) return Status::error("adapter_config.json: fan_in_fan_out (transposed weights) is not supported");
  if (c.contains("bias") && c["bias"] != "none") return Status::error("adapter_config.json: bias other than 'none' is not supported");
  if (c.contains("modules_to_save") && !c["modules_to_save"].is_null() && !c["modules_to_save"].empty()) {
    return Status::error("adapter_config.json: modules_to_save (whole replaced weights) is not supported");
  }
  if (!c.contains("r") || !c["r"].is_number_integer() || c["r"].get<int64_t>() < 1 || c["r"].get<int64_t>() > (1 << 20)) {
    return Status::error("adapter_config.json: r is not a positive integer");
  }
  p.r = c["r"].get<int64_t>();
  if (c.contains("lora_alpha")) {
    if (!c["lora_alpha"].is_number() || !std::isfinite(c["lora_alpha"].get<double>())) {
      return Status::error("adapter_config.json: lora_alpha is not a number");
    }
    p.alpha = c["lora_alpha"].get<double>();
  }
  p.rslora = flag("use_rslora");
  for (const char* k : {"rank_pattern", "alpha_pattern"}) {
    if (!c.contains(k) || c[k].is_null()) continue;
    if (!c[k].is_object()) return Status::error(std::string("adapter_config.json: ") + k + " is not an object");
    for (auto it = c[k].begin(); it != c[k].end(); ++it) {
      const bool rank = std::string(k) == "rank_pattern";
      const json& v = it.value();
      if (rank ? !v.is_number_integer() || v.get<int64_t>() < 1 : !v.is_number() || !std::isfinite(v.get<double>())) {
        return Status::error(std::string("adapter_config.json: ") + k + " holds " + (rank ? "a rank that is not a positive integer" : "a non-number"));
      }
      try {
        std::regex re(it.key());
      } catch (const std::regex_error&) {
        return Status::error(std::string("adapter_config.json: ") + k + " key '" + it.key() + "' is not a regular expression");
      }
    }
    (std::string(k) == "rank_pattern" ? p.rank_pattern : p.alpha_pattern) = c[k];
  }
  Status st = check_module_names(c.contains("target_modules") ? c["target_modules"] : json());
  if (!st.ok()) return st.with_context("adapter_config.json: ");
  return p;
}

// "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight" -> module
// "model.layers.3.self_attn.q_proj", 'A', layer 3, target 0 (layer -1: lm_head).
struct TensorPlace {
  std::string module;
  char which = 0;
  int64_t layer = 0;
  int target = 0;
};

Result<TensorPlace> place_of(const std::string& name) {
  TensorPlace p;
  std::smatch m;
  static const std::regex kName(R"(^base_model\.model\.(.*)\.lora_([AB])(\.default)?\.weight$)");
  if (!std::regex_match(name, m, kName)) return Status::errorf("tensor '%s' is not a LoRA A or B of PEFT's naming", name.c_str());
  p.module = m[1];
  p.which = m[2].str()[0];
  if (p.module == "lm_head") {
    p.layer = -1;
    return p;
  }
  static const std::regex kLayer(R"(^model\.layers\.(\d{1,9})\.(self_attn|mlp)\.([a-z_]+)$)");
  std::smatch lm;
  if (!std::regex_match(p.module, lm, kLayer)) {
    return Status::errorf("tensor '%s': ll3 applies LoRA to the attention and MLP products and lm_head, not to '%s'",
                          name.c_str(), p.module.c_str());
  }
  p.layer = std::strtoll(lm[1].str().c_str(), nullptr, 10);
  for (int k = 0; k < kLoraTargetCount; ++k) {
    if (lm[3] == lora_target_peft_name(k)) {
      p.target = k;
      return p;
    }
  }
  return Status::errorf("tensor '%s': no product '%s' in a Llama layer", name.c_str(), lm[3].str().c_str());
}

Result<LoraTensor> peft_tensor(const SafetensorsTensor& t) {
  if (t.shape.size() != 2) return Status::errorf("tensor '%s' has shape %s, not a matrix", t.name.c_str(), t.shape_string().c_str());
  return LoraTensor{t.name, t.type, t.shape[0], t.shape[1], t.data, t.nbytes};
}

}  // namespace

Result<LoraFile> read_gguf_lora(std::unique_ptr<GgufFile> file) {
  LoraFile out;
  out.format = "gguf";
  out.gguf = std::move(file);
  const GgufFile& f = *out.gguf;
  LL3_RETURN_IF_ERROR(gguf_metadata(f, &out.alpha));
  for (const GgufTensorInfo& t : f.tensors()) {
    const bool is_a = ends_with(t.name, ".lora_a"), is_b = ends_with(t.name, ".lora_b");
    if (!is_a && !is_b) return Status::errorf("tensor '%s' is neither a .lora_a nor a .lora_b", t.name.c_str());
    const std::string weight = t.name.substr(0, t.name.size() - 7);
    const GgufTensorInfo* other = f.find_tensor(weight + (is_a ? ".lora_b" : ".lora_a"));
    if (other == nullptr) return Status::errorf("tensor '%s' has no '%s%s'", t.name.c_str(), weight.c_str(), is_a ? ".lora_b" : ".lora_a");
    if (is_b) continue;  // read with its A
    if (weight == "token_embd.weight") return Status::error("a LoRA of token_embd.weight is not supported");
    LoraFilePair p;
    if (!gguf_target(weight, &p.layer, &p.target)) {
      return Status::errorf("tensor '%s': ll3 applies LoRA to the attention and FFN products and the output, not to '%s'",
                            t.name.c_str(), weight.c_str());
    }
    if (t.n_dims != 2 || other->n_dims != 2) {
      return Status::errorf("'%s' is %s and its B %s: both must be matrices", t.name.c_str(), t.shape_string().c_str(),
                            other->shape_string().c_str());
    }
    p.where = "'" + weight + "'";
    p.a = gguf_tensor(t);
    p.b = gguf_tensor(*other);
    p.alpha = out.alpha;
    out.pairs.push_back(std::move(p));
  }
  return out;
}

Result<LoraFile> read_peft_lora(std::string_view config_json, std::unique_ptr<SafetensorsFile> tensors) {
  Result<PeftConfig> cfg = read_config(config_json);
  if (!cfg.ok()) return cfg.status();
  LoraFile out;
  out.format = "peft";
  out.alpha = cfg->alpha;
  out.safetensors = std::move(tensors);
  const SafetensorsFile& f = *out.safetensors;
  for (const SafetensorsTensor& t : f.tensors()) {
    Result<TensorPlace> place = place_of(t.name);
    if (!place.ok()) return place.status();
    std::string other = t.name;
    other.replace(other.rfind(place->which == 'A' ? "lora_A" : "lora_B"), 6, place->which == 'A' ? "lora_B" : "lora_A");
    const SafetensorsTensor* tb = f.find(other);
    if (tb == nullptr) return Status::errorf("tensor '%s' has no '%s'", t.name.c_str(), other.c_str());
    if (place->which == 'B') continue;  // read with its A
    Result<LoraTensor> a = peft_tensor(t), b = peft_tensor(*tb);
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    LoraFilePair p;
    p.layer = place->layer;
    p.target = place->target;
    p.where = "'" + place->module + "'";
    p.a = std::move(*a);
    p.b = std::move(*b);
    const json* rank = pattern_value(cfg->rank_pattern, place->module);
    p.rank = rank ? rank->get<int64_t>() : cfg->r;
    const json* alpha = pattern_value(cfg->alpha_pattern, place->module);
    p.alpha = alpha ? alpha->get<double>() : cfg->alpha;
    p.rslora = cfg->rslora;
    p.hf_rows = true;
    out.pairs.push_back(std::move(p));
  }
  return out;
}

Result<LoraFile> open_lora_file(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return Status::error("no such file or directory");
  if (!S_ISDIR(st.st_mode)) {
    Result<std::unique_ptr<GgufFile>> g = GgufFile::open(path);
    if (!g.ok()) return g.status();
    return read_gguf_lora(std::move(g.value()));
  }
  std::ifstream in(path + "/adapter_config.json");
  if (!in) return Status::error("no adapter_config.json (a PEFT adapter directory has one)");
  std::stringstream ss;
  ss << in.rdbuf();
  Result<std::unique_ptr<SafetensorsFile>> tensors = SafetensorsFile::open(path + "/adapter_model.safetensors");
  if (!tensors.ok()) {
    if (std::ifstream(path + "/adapter_model.bin")) return Status::error("adapter_model.bin (a pickle) is not read: save the adapter as safetensors");
    return tensors.status();
  }
  return read_peft_lora(ss.str(), std::move(tensors.value()));
}

}  // namespace ll3
