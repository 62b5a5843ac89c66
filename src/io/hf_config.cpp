#include "io/hf_config.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/mmap_file.h"

namespace ll3 {
namespace {

using nlohmann::json;

class Reader {
 public:
  Reader(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  Status error(const std::string& msg) const { return Status::error(where_ + msg); }

  // A positive integer field; `fallback` < 0 means required. A JSON null counts as absent.
  Status get_int(const char* key, int64_t fallback, int64_t* out) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) {
      if (fallback < 0) return error(strprintf("field '%s' is missing", key));
      *out = fallback;
      return ok_status();
    }
    if (!it->is_number_integer() || it->get<int64_t>() <= 0) {
      return error(
          strprintf("field '%s' must be a positive integer, got %s", key, it->dump().c_str()));
    }
    *out = it->get<int64_t>();
    return ok_status();
  }

  Status get_float(const char* key, double fallback, bool positive, float* out) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) {
      if (std::isnan(fallback)) return error(strprintf("field '%s' is missing", key));
      *out = static_cast<float>(fallback);
      return ok_status();
    }
    if (!it->is_number() || !std::isfinite(it->get<double>()) ||
        (positive && it->get<double>() <= 0)) {
      return error(strprintf("field '%s' must be a %snumber, got %s", key,
                             positive ? "positive " : "", it->dump().c_str()));
    }
    *out = static_cast<float>(it->get<double>());
    return ok_status();
  }

 private:
  const json& j_;
  std::string where_;
};

// The shortest decimal that reads back as `f`, as a double: 1e-5f is written "1e-05", not
// "9.999999747378752e-06".
double short_double(float f) {
  char buf[32];
  for (int prec = 6; prec <= 9; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  return std::strtod(buf, nullptr);
}

}  // namespace

Result<LlamaConfig> parse_hf_config(std::string_view json_text, const std::string& origin) {
  const std::string where = "config.json: " + origin + ": ";
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::error(where + "not valid JSON");
  if (!j.is_object()) return Status::error(where + "not a JSON object");

  auto arch = j.find("architectures");
  bool is_llama = false;
  if (arch != j.end() && arch->is_array()) {
    for (const auto& a : *arch) is_llama = is_llama || (a.is_string() && a == "LlamaForCausalLM");
  }
  if (!is_llama) {
    return Status::error(where + "architectures is " +
                         (arch == j.end() ? std::string("missing") : arch->dump()) +
                         ", expected [\"LlamaForCausalLM\"]");
  }

  Reader r(j, where);
  LlamaConfig c;
  LL3_RETURN_IF_ERROR(r.get_int("hidden_size", -1, &c.dim));
  LL3_RETURN_IF_ERROR(r.get_int("num_hidden_layers", -1, &c.n_layers));
  LL3_RETURN_IF_ERROR(r.get_int("num_attention_heads", -1, &c.n_heads));
  LL3_RETURN_IF_ERROR(r.get_int("num_key_value_heads", c.n_heads, &c.n_kv_heads));
  LL3_RETURN_IF_ERROR(r.get_int("intermediate_size", -1, &c.ffn_dim));
  LL3_RETURN_IF_ERROR(r.get_int("vocab_size", -1, &c.n_vocab));
  // Defaults are those of transformers' LlamaConfig.
  LL3_RETURN_IF_ERROR(r.get_int("max_position_embeddings", 2048, &c.context_length));
  LL3_RETURN_IF_ERROR(r.get_float("rms_norm_eps", 1e-6, true, &c.norm_eps));
  LL3_RETURN_IF_ERROR(r.get_float("rope_theta", 10000.0, true, &c.rope_theta));
  if (c.dim % c.n_heads != 0 && j.find("head_dim") == j.end()) {
    return r.error(strprintf("hidden_size %lld is not a multiple of num_attention_heads %lld",
                             static_cast<long long>(c.dim), static_cast<long long>(c.n_heads)));
  }
  LL3_RETURN_IF_ERROR(r.get_int("head_dim", c.dim / c.n_heads, &c.head_dim));
  if (c.head_dim % 2 != 0) {
    return r.error(
        strprintf("head_dim %lld is odd; RoPE needs pairs", static_cast<long long>(c.head_dim)));
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    return r.error(
        strprintf("num_attention_heads %lld is not a multiple of num_key_value_heads "
                  "%lld",
                  static_cast<long long>(c.n_heads), static_cast<long long>(c.n_kv_heads)));
  }
  auto tie = j.find("tie_word_embeddings");
  if (tie != j.end() && !tie->is_null()) {
    if (!tie->is_boolean()) {
      return r.error("field 'tie_word_embeddings' must be true or false, got " + tie->dump());
    }
    c.tied_embeddings = tie->get<bool>();
  }

  auto rs = j.find("rope_scaling");
  if (rs != j.end() && !rs->is_null()) {
    if (!rs->is_object()) return r.error("rope_scaling must be an object, got " + rs->dump());
    auto type = rs->find("rope_type");
    if (type == rs->end()) type = rs->find("type");
    std::string t = type != rs->end() && type->is_string() ? type->get<std::string>() : "";
    if (t == "llama3") {
      Reader sr(*rs, where + "rope_scaling: ");
      c.rope_scaling.enabled = true;
      LL3_RETURN_IF_ERROR(sr.get_float("factor", NAN, true, &c.rope_scaling.factor));
      LL3_RETURN_IF_ERROR(
          sr.get_float("low_freq_factor", NAN, true, &c.rope_scaling.low_freq_factor));
      LL3_RETURN_IF_ERROR(
          sr.get_float("high_freq_factor", NAN, true, &c.rope_scaling.high_freq_factor));
      LL3_RETURN_IF_ERROR(
          sr.get_int("original_max_position_embeddings", -1, &c.rope_scaling.original_context));
      if (c.rope_scaling.high_freq_factor <= c.rope_scaling.low_freq_factor) {
        return sr.error("high_freq_factor must be greater than low_freq_factor");
      }
    } else if (t != "default") {
      return r.error("rope_scaling type " +
                     (type == rs->end() ? std::string("(missing)") : type->dump()) +
                     " is not supported (only \"llama3\")");
    }
  }
  c.rope_half_pairs = true;
  return c;
}

Result<LlamaConfig> load_hf_config(const std::string& dir_or_file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p(dir_or_file);
  std::string name;
  if (fs::is_directory(p, ec)) {
    name = fs::absolute(p, ec).lexically_normal().filename().string();
    if (name.empty())
      name = fs::absolute(p, ec).lexically_normal().parent_path().filename().string();
    p /= "config.json";
  } else {
    name = fs::absolute(p, ec).parent_path().filename().string();
  }
  auto map = MmapFile::open(p.string());
  if (!map.ok()) return map.status().with_context("config.json: ");
  auto c = parse_hf_config(
      std::string_view(reinterpret_cast<const char*>(map->data()), map->size()), p.string());
  if (c.ok()) c->name = name;
  return c;
}

std::string hf_config_json(const LlamaConfig& c, const HfConfigTokens& tokens,
                           const std::string& torch_dtype) {
  json j = json::object();
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.dim;
  j["num_hidden_layers"] = c.n_layers;
  j["num_attention_heads"] = c.n_heads;
  j["num_key_value_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim;
  j["intermediate_size"] = c.ffn_dim;
  j["vocab_size"] = c.n_vocab;
  j["max_position_embeddings"] = c.context_length;
  j["rms_norm_eps"] = short_double(c.norm_eps);
  j["rope_theta"] = short_double(c.rope_theta);
  j["tie_word_embeddings"] = c.tied_embeddings;
  j["torch_dtype"] = torch_dtype;
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  if (c.rope_scaling.enabled) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", short_double(c.rope_scaling.factor)},
                         {"low_freq_factor", short_double(c.rope_scaling.low_freq_factor)},
                         {"high_freq_factor", short_double(c.rope_scaling.high_freq_factor)},
                         {"original_max_position_embeddings", c.rope_scaling.original_context}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  if (tokens.bos_id >= 0) j["bos_token_id"] = tokens.bos_id;
  if (tokens.eos_ids.size() == 1) {
    j["eos_token_id"] = tokens.eos_ids[0];
  } else if (!tokens.eos_ids.empty()) {
    j["eos_token_id"] = tokens.eos_ids;
  }
  return j.dump(2) + "\n";
}

std::vector<float> llama3_rope_freq_factors(int64_t head_dim, float rope_theta,
                                            const RopeScaling& s) {
  // float32 throughout, step for step as the converter's torch code.
  const float low_wavelen = static_cast<float>(s.original_context) / s.low_freq_factor;
  const float high_wavelen = static_cast<float>(s.original_context) / s.high_freq_factor;
  std::vector<float> out;
  for (int64_t i = 0; i < head_dim; i += 2) {
    float freq = 1.0f / std::pow(rope_theta, static_cast<float>(i) / static_cast<float>(head_dim));
    float wavelen = 2.0f * static_cast<float>(M_PI) / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(s.factor);
    } else {
      float smooth = (static_cast<float>(s.original_context) / wavelen - s.low_freq_factor) /
                     (s.high_freq_factor - s.low_freq_factor);
      out.push_back(1.0f / ((1.0f - smooth) / s.factor + smooth));
    }
  }
  return out;
}

}  // namespace ll3
