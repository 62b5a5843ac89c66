#include "tokenizer/vocab.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "io/gguf.h"

namespace ll3 {

using json = nlohmann::json;

// Pre-tokenizer names whose split regex is the Llama-3 one.
static bool supported_pre(std::string_view pre) {
  return pre == "llama-bpe" || pre == "llama3" || pre == "smaug-bpe" || pre == "dbrx";
}

static int32_t find_token(const TokenizerVocab& v, std::string_view text) {
  for (size_t i = v.tokens.size(); i-- > 0;) {
    if (v.tokens[i] == text) return int32_t(i);
  }
  return -1;
}

void finalize_eog_ids(TokenizerVocab& v) {
  auto add = [&](int32_t id) {
    if (id >= 0 && id < int32_t(v.tokens.size())) v.eog_ids.push_back(id);
  };
  add(v.eos_id);
  add(v.eot_id);
  // Llama-3 marks the end of a turn or a message with these; llama.cpp treats them as EOG too.
  for (const char* t : {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"}) {
    int32_t id = find_token(v, t);
    if (id >= 0 && v.token_types[id] == kTokenControl) add(id);
  }
  if (v.eot_id < 0) {
    int32_t id = find_token(v, "<|eot_id|>");
    if (id >= 0 && v.token_types[id] == kTokenControl) v.eot_id = id;
  }
  std::sort(v.eog_ids.begin(), v.eog_ids.end());
  v.eog_ids.erase(std::unique(v.eog_ids.begin(), v.eog_ids.end()), v.eog_ids.end());
}

Result<TokenizerVocab> load_vocab_from_gguf(const GgufFile& f) {
  TokenizerVocab v;
  auto where = [&](const std::string& m) {
    return Status::error("tokenizer: " + f.origin() + ": " + m);
  };
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model) return where("missing tokenizer.ggml.model");
  if (*model != "gpt2") {
    return where(strprintf("unsupported tokenizer.ggml.model '%.*s' (only gpt2 byte-level BPE)",
                           int(model->size()), model->data()));
  }
  if (auto pre = f.get_string("tokenizer.ggml.pre")) {
    if (!supported_pre(*pre)) {
      return where(strprintf("unsupported tokenizer.ggml.pre '%.*s' (expected llama-bpe)",
                             int(pre->size()), pre->data()));
    }
    v.pre = std::string(*pre);
  }
  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  if (!tokens || tokens->type != GgufType::ARRAY || tokens->elem_type != GgufType::STRING) {
    return where("tokenizer.ggml.tokens missing or not an array of strings");
  }
  if (tokens->strings.empty()) return where("tokenizer.ggml.tokens is empty");
  if (tokens->strings.size() > (1u << 30)) return where("tokenizer.ggml.tokens is too large");
  v.tokens.reserve(tokens->strings.size());
  for (auto s : tokens->strings) v.tokens.emplace_back(s);

  v.token_types.assign(v.tokens.size(), kTokenNormal);
  if (const GgufValue* types = f.find("tokenizer.ggml.token_type")) {
    if (types->type != GgufType::ARRAY || types->count != v.tokens.size()) {
      return where(strprintf("tokenizer.ggml.token_type has %llu entries, tokens has %zu",
                             (unsigned long long)types->count, v.tokens.size()));
    }
    for (size_t i = 0; i < v.tokens.size(); ++i) {
      auto t = types->array_int(i);
      if (!t) return where("tokenizer.ggml.token_type is not an integer array");
      v.token_types[i] = int32_t(*t);
    }
  }
  if (const GgufValue* merges = f.find("tokenizer.ggml.merges")) {
    if (merges->type != GgufType::ARRAY || merges->elem_type != GgufType::STRING) {
      return where("tokenizer.ggml.merges is not an array of strings");
    }
    v.merges.reserve(merges->strings.size());
    for (auto s : merges->strings) v.merges.emplace_back(s);
  }
  auto id_key = [&](const char* key, int32_t* out) -> Status {
    if (!f.find(key)) return ok_status();
    auto x = f.get_int(key);
    if (!x || *x < 0 || *x >= int64_t(v.tokens.size())) {
      return where(strprintf("%s is not a token id in [0, %zu)", key, v.tokens.size()));
    }
    *out = int32_t(*x);
    return ok_status();
  };
  LL3_RETURN_IF_ERROR(id_key("tokenizer.ggml.bos_token_id", &v.bos_id));
  LL3_RETURN_IF_ERROR(id_key("tokenizer.ggml.eos_token_id", &v.eos_id));
  LL3_RETURN_IF_ERROR(id_key("tokenizer.ggml.eot_token_id", &v.eot_id));
  int32_t eom = -1;
  LL3_RETURN_IF_ERROR(id_key("tokenizer.ggml.eom_token_id", &eom));
  if (auto b = f.get_bool("tokenizer.ggml.add_bos_token")) v.add_bos = *b;
  if (auto t = f.get_string("tokenizer.chat_template")) v.chat_template = std::string(*t);
  finalize_eog_ids(v);
  if (eom >= 0 && !std::binary_search(v.eog_ids.begin(), v.eog_ids.end(), eom)) {
    v.eog_ids.insert(std::upper_bound(v.eog_ids.begin(), v.eog_ids.end(), eom), eom);
  }
  return v;
}

// A token given in tokenizer_config.json: a string or {"content": "..."}.
static std::string config_token(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string())
    return j["content"].get<std::string>();
  return "";
}

static Status hf_error(const std::string& m) { return Status::error("tokenizer.json: " + m); }

static Result<int64_t> hf_token_id(const json& id, const std::string& what) {
  if (!id.is_number_integer()) return hf_error(what + ": id is not an integer");
  int64_t x = id.get<int64_t>();
  if (x < 0 || x >= (1 << 24))
    return hf_error(strprintf("%s: id %lld out of range", what.c_str(), (long long)x));
  return x;
}

// The largest id of model.vocab and added_tokens (ids may come in any order and leave holes),
// checking every id and that holes do not make up most of the table.
static Result<int64_t> hf_max_id(const json& model, const json& added) {
  int64_t max_id = -1;
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    auto id = hf_token_id(it.value(), "model.vocab['" + it.key() + "']");
    if (!id.ok()) return id.status();
    max_id = std::max(max_id, *id);
  }
  for (const auto& a : added) {
    if (!a.is_object() || !a.contains("id") || !a.contains("content") ||
        !a["content"].is_string()) {
      return hf_error("added_tokens entry without id/content");
    }
    auto id = hf_token_id(a["id"], "added_tokens");
    if (!id.ok()) return id.status();
    max_id = std::max(max_id, *id);
  }
  if (max_id < 0) return hf_error("empty vocabulary");
  // Holes are allowed (converters pad them), but not a table mostly made of them.
  size_t n_entries = model["vocab"].size() + added.size();
  if (size_t(max_id) > 2 * n_entries + 65536) {
    return hf_error(
        strprintf("token ids up to %lld for %zu tokens: too sparse", (long long)max_id, n_entries));
  }
  return max_id;
}

// Tokens and their types by id: the vocab's are normal, added ones control (special) or
// user-defined.
static void hf_fill_tokens(const json& model, const json& added, int64_t max_id,
                           TokenizerVocab& v) {
  v.tokens.assign(size_t(max_id + 1), std::string());
  v.token_types.assign(size_t(max_id + 1), kTokenUndefined);
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    int64_t id = it.value().get<int64_t>();
    v.tokens[id] = it.key();
    v.token_types[id] = kTokenNormal;
  }
  for (const auto& a : added) {
    int64_t id = a["id"].get<int64_t>();
    v.tokens[id] = a["content"].get<std::string>();
    bool special = a.contains("special") && a["special"].is_boolean() && a["special"].get<bool>();
    v.token_types[id] = special ? kTokenControl : kTokenUserDefined;
  }
  // Holes get placeholder names the way llama.cpp's converter writes them.
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.token_types[i] == kTokenUndefined) {
      v.tokens[i] = strprintf("[PAD%zu]", i);
      v.token_types[i] = kTokenUserDefined;
    }
  }
}

// model.merges as "a b" strings (older files) or [a, b] pairs (newer ones).
static Status hf_merges(const json& model, TokenizerVocab& v) {
  if (!model.contains("merges")) return ok_status();
  const json& m = model["merges"];
  if (!m.is_array()) return hf_error("model.merges is not an array");
  v.merges.reserve(m.size());
  for (const auto& e : m) {
    if (e.is_string()) {
      v.merges.push_back(e.get<std::string>());
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      v.merges.push_back(e[0].get<std::string>() + " " + e[1].get<std::string>());
    } else {
      return hf_error(
          strprintf("model.merges[%zu] is neither \"a b\" nor [a, b]", v.merges.size()));
    }
  }
  return ok_status();
}

// What tokenizer_config.json overrides: the BOS and EOS tokens, add_bos_token, the chat template.
static Status apply_tokenizer_config(std::string_view config_json, TokenizerVocab& v) {
  auto id_of = [&](const std::string& text) { return text.empty() ? -1 : find_token(v, text); };
  json cj = json::parse(config_json, nullptr, false);
  if (cj.is_discarded() || !cj.is_object())
    return Status::error("tokenizer_config.json: not a JSON object");
  if (cj.contains("bos_token")) {
    int32_t id = id_of(config_token(cj["bos_token"]));
    if (id >= 0) v.bos_id = id;
  }
  if (cj.contains("eos_token")) {
    int32_t id = id_of(config_token(cj["eos_token"]));
    if (id >= 0) v.eos_id = id;
  }
  if (cj.contains("add_bos_token") && cj["add_bos_token"].is_boolean())
    v.add_bos = cj["add_bos_token"].get<bool>();
  if (cj.contains("chat_template")) {
    const json& ct = cj["chat_template"];
    if (ct.is_string()) {
      v.chat_template = ct.get<std::string>();
    } else if (ct.is_array()) {  // [{"name": "default", "template": "..."}, ...]
      for (const auto& e : ct) {
        if (e.is_object() && e.contains("template") && e["template"].is_string() &&
            (v.chat_template.empty() || (e.contains("name") && e["name"] == "default"))) {
          v.chat_template = e["template"].get<std::string>();
        }
      }
    }
  }
  return ok_status();
}

// BOS and EOS by their Llama-3 texts; the post-processor says whether BOS is prepended
// (TemplateProcessing with a BOS piece). (A ByteLevel-only post-processor, as the first Llama-3
// release ships, says nothing; llama.cpp adds BOS for llama-bpe then, and so do we.)
static void hf_special_ids(const json& tj, TokenizerVocab& v) {
  auto id_of = [&](const std::string& text) { return text.empty() ? -1 : find_token(v, text); };
  v.bos_id = id_of("<|begin_of_text|>");
  v.eos_id = id_of("<|end_of_text|>");
  if (tj.contains("post_processor") && tj["post_processor"].is_object() &&
      tj["post_processor"].dump().find("TemplateProcessing") != std::string::npos) {
    std::string pp = tj["post_processor"].dump();
    v.add_bos = v.bos_id >= 0 && pp.find(v.tokens[v.bos_id]) != std::string::npos;
  }
}

Result<TokenizerVocab> load_vocab_from_hf_json(std::string_view tokenizer_json,
                                               std::string_view config_json) {
  json tj = json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (tj.is_discarded()) return hf_error("not valid JSON");
  if (!tj.is_object() || !tj.contains("model") || !tj["model"].is_object())
    return hf_error("no \"model\" object");
  const json& model = tj["model"];
  if (!model.contains("type") || model["type"] != "BPE")
    return hf_error("model.type is not \"BPE\"");
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return hf_error("model.vocab is not an object");
  const json empty_array = json::array();
  const json& added = tj.contains("added_tokens") && tj["added_tokens"].is_array()
                          ? tj["added_tokens"]
                          : empty_array;

  TokenizerVocab v;
  auto max_id = hf_max_id(model, added);
  if (!max_id.ok()) return max_id.status();
  hf_fill_tokens(model, added, *max_id, v);
  LL3_RETURN_IF_ERROR(hf_merges(model, v));
  if (tj.contains("pre_tokenizer") && tj["pre_tokenizer"].is_object()) {
    // Only the Llama-3 split is implemented; say so instead of tokenizing differently.
    std::string dump = tj["pre_tokenizer"].dump();
    if (dump.find("\\\\p{N}{1,3}") == std::string::npos) {
      return hf_error("pre_tokenizer is not the Llama-3 split regex (only llama-bpe is supported)");
    }
  }
  hf_special_ids(tj, v);
  if (!config_json.empty()) LL3_RETURN_IF_ERROR(apply_tokenizer_config(config_json, v));
  finalize_eog_ids(v);
  return v;
}

static Result<std::string> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::error("error reading " + path);
  return ss.str();
}

Result<TokenizerVocab> load_vocab_from_hf(const std::string& dir_or_file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path tok_path = dir_or_file;
  fs::path dir;
  if (fs::is_directory(tok_path, ec)) {
    dir = tok_path;
    tok_path = dir / "tokenizer.json";
  } else {
    dir = tok_path.parent_path();
  }
  auto tok = slurp(tok_path.string());
  if (!tok.ok()) return tok.status();
  std::string config;
  fs::path cfg_path = dir / "tokenizer_config.json";
  if (fs::exists(cfg_path, ec)) {
    auto c = slurp(cfg_path.string());
    if (!c.ok()) return c.status();
    config = std::move(*c);
  }
  auto v = load_vocab_from_hf_json(*tok, config);
  if (!v.ok()) return v.status().with_context(tok_path.string() + ": ");
  // generation_config.json lists the ids that end generation (an int or a list).
  fs::path gen_path = dir / "generation_config.json";
  if (fs::exists(gen_path, ec)) {
    auto g = slurp(gen_path.string());
    if (g.ok()) {
      json gj = json::parse(*g, nullptr, false);
      if (gj.is_object() && gj.contains("eos_token_id")) {
        std::vector<int64_t> ids;
        const json& e = gj["eos_token_id"];
        if (e.is_number_integer()) ids.push_back(e.get<int64_t>());
        if (e.is_array())
          for (const auto& x : e)
            if (x.is_number_integer()) ids.push_back(x.get<int64_t>());
        for (int64_t id : ids)
          if (id >= 0 && id < int64_t(v->tokens.size())) v->eog_ids.push_back(int32_t(id));
        std::sort(v->eog_ids.begin(), v->eog_ids.end());
        v->eog_ids.erase(std::unique(v->eog_ids.begin(), v->eog_ids.end()), v->eog_ids.end());
      }
    }
  }
  return v;
}

}  // namespace ll3
