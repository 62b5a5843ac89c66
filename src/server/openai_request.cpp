#include "server/openai_request.h"

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>

#include "engine/sampler.h"
#include "server/json_fields.h"
#include "server/structured_output.h"
#include "tokenizer/chat_template.h"

namespace ll3::server {


ApiError invalid_request(std::string message, std::string param, std::string code) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.type = "invalid_request_error";
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

int json_depth(std::string_view s, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) max_depth = depth;
      if (max_depth > limit) return max_depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

namespace {

ApiError get_int(const ojson& o, const char* key, int64_t lo, int64_t hi, int64_t* out) {
  const ojson* v = field(o, key);
  return v ? read_int(*v, key, lo, hi, out) : ApiError{};
}

// A float field; values beyond float's range become +-inf, which validate() then rejects
// (a double -> float conversion out of range is undefined behaviour).
ApiError get_float(const ojson& o, const char* key, float* out) {
  const ojson* v = field(o, key);
  if (!v) return {};
  if (!v->is_number()) return wrong_type(key, "a number", *v);
  const double d = v->get<double>();
  *out = d > FLT_MAX ? INFINITY : d < -FLT_MAX ? -INFINITY : static_cast<float>(d);
  return {};
}

ApiError get_bool(const ojson& o, const char* key, bool* out) {
  const ojson* v = field(o, key);
  if (!v) return {};
  if (!v->is_boolean()) return wrong_type(key, "a boolean", *v);
  *out = v->get<bool>();
  return {};
}

ApiError get_string(const ojson& o, const char* key, std::string* out) {
  const ojson* v = field(o, key);
  if (!v) return {};
  if (!v->is_string()) return wrong_type(key, "a string", *v);
  *out = v->get<std::string>();
  return {};
}

// validate()'s verdict on the sampling fields as a 400 naming the field (its message begins
// with the name).
ApiError check_sampling(const ojson& b, const SamplingParams& s) {
  SamplingFieldNames names;
  names.repeat_penalty = field(b, "repetition_penalty") ? "repetition_penalty" : "repeat_penalty";
  if (Status st = validate(s, names); !st.ok()) {
    std::string param;
    for (const char* n : {names.temperature, names.top_p, names.min_p, names.repeat_penalty, names.repeat_last_n,
                          names.presence_penalty, names.frequency_penalty}) {
      if (st.message().rfind(n, 0) == 0) param = n;
    }
    return invalid_request(st.message(), param);
  }
  return {};
}

// The sampling fields over OpenAI's defaults, then checked together.
ApiError parse_sampling(const ojson& b, SamplingParams* s) {
  // OpenAI's defaults (the engine's are llama.cpp's): plain sampling at temperature 1.
  s->temperature = 1.0f;
  s->top_p = 1.0f;
  s->top_k = 0;
  s->min_p = 0.0f;
  s->repeat_penalty = 1.0f;
  RETURN_IF_API_ERROR(get_float(b, "temperature", &s->temperature));
  RETURN_IF_API_ERROR(get_float(b, "top_p", &s->top_p));
  RETURN_IF_API_ERROR(get_float(b, "min_p", &s->min_p));
  RETURN_IF_API_ERROR(get_float(b, "presence_penalty", &s->presence_penalty));
  RETURN_IF_API_ERROR(get_float(b, "frequency_penalty", &s->frequency_penalty));
  // vLLM's name, then llama.cpp's.
  RETURN_IF_API_ERROR(get_float(b, "repetition_penalty", &s->repeat_penalty));
  RETURN_IF_API_ERROR(get_float(b, "repeat_penalty", &s->repeat_penalty));
  int64_t v = 0;
  if (field(b, "top_k")) {
    RETURN_IF_API_ERROR(get_int(b, "top_k", -1, std::numeric_limits<int32_t>::max(), &v));
    s->top_k = static_cast<int>(v);
  }
  if (field(b, "repeat_last_n")) {
    RETURN_IF_API_ERROR(get_int(b, "repeat_last_n", -1, std::numeric_limits<int32_t>::max(), &v));
    s->repeat_last_n = static_cast<int>(v);
  }
  return check_sampling(b, *s);
}

// seed: any 64-bit integer, signed or unsigned.
ApiError parse_seed(const ojson& b, ApiRequest* r) {
  const ojson* seed = field(b, "seed");
  if (!seed) return {};
  SamplingParams& s = r->base.sampling;
  if (seed->is_number_unsigned()) {
    s.seed = seed->get<uint64_t>();
  } else {
    int64_t x = 0;
    RETURN_IF_API_ERROR(read_int(*seed, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &x));
    s.seed = static_cast<uint64_t>(x);
  }
  // -1 (llama.cpp's "random") and its unsigned twin mean no seed.
  r->seeded = s.seed != kRandomSeed;
  return {};
}

// stop: a string or an array of them, each non-empty and bounded, the array too.
ApiError parse_stop(const ojson& stop, std::vector<std::string>* out) {
  auto add = [&](const ojson& x, const std::string& param) -> ApiError {
    if (!x.is_string()) return wrong_type(param, "a string", x);
    std::string t = x.get<std::string>();
    if (t.empty()) return invalid_request("'" + param + "' must not be empty", param);
    if (t.size() > kMaxStopBytes) return invalid_request("'" + param + "' is longer than " + std::to_string(kMaxStopBytes) + " bytes", param);
    out->push_back(std::move(t));
    return {};
  };
  if (stop.is_string()) return add(stop, "stop");
  if (!stop.is_array()) return wrong_type("stop", "a string or an array of strings", stop);
  if (stop.size() > kMaxStopStrings) return invalid_request("'stop' holds more than " + std::to_string(kMaxStopStrings) + " strings", "stop");
  for (size_t i = 0; i < stop.size(); ++i) RETURN_IF_API_ERROR(add(stop[i], "stop[" + std::to_string(i) + "]"));
  return {};
}

// stream, and stream_options.include_usage.
ApiError parse_stream(const ojson& b, ApiRequest* r) {
  RETURN_IF_API_ERROR(get_bool(b, "stream", &r->stream));
  if (const ojson* so = field(b, "stream_options")) {
    if (!so->is_object()) return wrong_type("stream_options", "an object", *so);
    if (const ojson* iu = field(*so, "include_usage")) {
      if (!iu->is_boolean()) return wrong_type("stream_options.include_usage", "a boolean", *iu);
      r->include_usage = iu->get<bool>();
    }
  }
  return {};
}

// The engine request's own fields: ignore_eos, session_id, priority, speculative.
ApiError parse_engine_fields(const ojson& b, Request* base) {
  RETURN_IF_API_ERROR(get_bool(b, "ignore_eos", &base->ignore_eos));
  RETURN_IF_API_ERROR(get_bool(b, "speculative", &base->speculative));
  RETURN_IF_API_ERROR(get_string(b, "session_id", &base->session_id));
  if (base->session_id.size() > kMaxSessionIdBytes) {
    return invalid_request("'session_id' is longer than " + std::to_string(kMaxSessionIdBytes) + " bytes", "session_id");
  }
  if (field(b, "priority")) {
    int64_t v = 0;
    RETURN_IF_API_ERROR(get_int(b, "priority", -1000000, 1000000, &v));
    base->priority = static_cast<int>(v);
  }
  return {};
}

// What the engine cannot do is refused rather than silently ignored.
ApiError refuse_unsupported(const ojson& b) {
  if (const ojson* lb = field(b, "logit_bias"); lb && !(lb->is_object() && lb->empty())) {
    return invalid_request("'logit_bias' is not supported", "logit_bias");
  }
  return {};
}

// llama-server's "lora": [{"id": index or name, "scale": number}, ...].
ApiError parse_lora(const ojson& b, std::vector<LoraRef>* out) {
  out->clear();
  const ojson* l = field(b, "lora");
  if (!l) return {};
  if (!l->is_array()) return wrong_type("lora", "an array of {id, scale}", *l);
  if (l->size() > kMaxLoraRefs) return invalid_request("'lora' lists more than " + std::to_string(kMaxLoraRefs) + " adapters", "lora");
  for (size_t k = 0; k < l->size(); ++k) {
    const std::string p = "lora[" + std::to_string(k) + "]";
    const ojson& e = (*l)[k];
    if (!e.is_object()) return wrong_type(p, "an object", e);
    LoraRef ref;
    const ojson* id = field(e, "id");
    if (!id) return invalid_request("'" + p + ".id' is required", p + ".id");
    if (id->is_number_unsigned() || (id->is_number_integer() && id->get<int64_t>() >= 0)) {
      ref.index = id->get<int64_t>();
    } else if (id->is_string() && !id->get<std::string>().empty()) {
      ref.name = id->get<std::string>();
    } else {
      return wrong_type(p + ".id", "an adapter's index (a non-negative integer) or name", *id);
    }
    if (const ojson* s = field(e, "scale")) {
      if (!s->is_number()) return wrong_type(p + ".scale", "a number", *s);
      const double v = s->get<double>();
      if (!std::isfinite(v) || std::fabs(v) > 1e6) return invalid_request("'" + p + ".scale' must be a finite number", p + ".scale");
      ref.scale = static_cast<float>(v);
    }
    out->push_back(std::move(ref));
  }
  return {};
}

// Fields both generation endpoints share: sampling, n, stop, stream, limits. Checked in this
// order, so a body with several mistakes names the first of them.
ApiError parse_common(const ojson& b, ApiRequest* r) {
  RETURN_IF_API_ERROR(parse_sampling(b, &r->base.sampling));
  RETURN_IF_API_ERROR(parse_seed(b, r));
  if (field(b, "n")) {
    int64_t v = 0;
    RETURN_IF_API_ERROR(get_int(b, "n", 1, kMaxN, &v));
    r->n = static_cast<int>(v);
  }
  if (const ojson* stop = field(b, "stop")) RETURN_IF_API_ERROR(parse_stop(*stop, &r->base.stop));
  RETURN_IF_API_ERROR(parse_stream(b, r));
  RETURN_IF_API_ERROR(parse_engine_fields(b, &r->base));
  if (const ojson* m = field(b, "model")) {
    if (!m->is_string()) return wrong_type("model", "a string", *m);
    r->model = m->get<std::string>();
  }
  RETURN_IF_API_ERROR(parse_lora(b, &r->lora));
  RETURN_IF_API_ERROR(refuse_unsupported(b));
  return parse_output_grammar(b, &r->base.grammar);
}

// max_tokens (or max_completion_tokens, which wins): at least `lo`.
ApiError parse_max_tokens(const ojson& b, int64_t default_value, Request* r, int64_t lo = 1) {
  r->max_tokens = default_value;
  const int64_t hi = std::numeric_limits<int32_t>::max();
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (field(b, key)) RETURN_IF_API_ERROR(get_int(b, key, lo, hi, &r->max_tokens));
  }
  return {};
}

// A message's content: a string or an array of text parts, joined by newlines.
ApiError read_content(const ojson& c, const std::string& param, std::string* out) {
  if (c.is_string()) {
    *out = c.get<std::string>();
    return {};
  }
  if (!c.is_array()) return wrong_type(param, "a string or an array of content parts", c);
  out->clear();
  for (size_t k = 0; k < c.size(); ++k) {
    const std::string p = param + "[" + std::to_string(k) + "]";
    const ojson& part = c[k];
    if (!part.is_object()) return wrong_type(p, "an object", part);
    const ojson* type = field(part, "type");
    if (!type || !type->is_string()) return invalid_request("'" + p + ".type' must be a string", p + ".type");
    if (type->get<std::string>() != "text") {
      return invalid_request("content parts of type '" + type->get<std::string>() + "' are not supported (text only)", p + ".type");
    }
    const ojson* text = field(part, "text");
    if (!text || !text->is_string()) return invalid_request("'" + p + ".text' must be a string", p + ".text");
    if (k > 0) *out += "\n";
    *out += text->get<std::string>();
  }
  return {};
}

// OpenAI messages -> the messages a Hugging Face chat template expects: content as text, tool
// calls with their arguments as JSON values (the Llama 3.1 template writes them with tojson).
ApiError convert_messages(const ojson& b, ojson* out) {
  const ojson* msgs = field(b, "messages");
  if (!msgs) return invalid_request("'messages' is required", "messages");
  if (!msgs->is_array()) return wrong_type("messages", "an array", *msgs);
  if (msgs->empty()) return invalid_request("'messages' must not be empty", "messages");
  *out = ojson::array();
  for (size_t i = 0; i < msgs->size(); ++i) {
    const std::string p = "messages[" + std::to_string(i) + "]";
    const ojson& m = (*msgs)[i];
    if (!m.is_object()) return wrong_type(p, "an object", m);
    const ojson* role_v = field(m, "role");
    if (!role_v) return invalid_request("'" + p + ".role' is required", p + ".role");
    if (!role_v->is_string()) return wrong_type(p + ".role", "a string", *role_v);
    std::string role = role_v->get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return invalid_request("'" + p + ".role' must be one of system, developer, user, assistant, tool; got '" + role + "'",
                             p + ".role");
    }
    ojson conv = ojson::object();
    conv["role"] = role;
    std::string content;
    const ojson* c = field(m, "content");
    const ojson* calls = role == "assistant" ? field(m, "tool_calls") : nullptr;
    if (c) {
      RETURN_IF_API_ERROR(read_content(*c, p + ".content", &content));
    } else if (!calls) {
      return invalid_request("'" + p + ".content' is required", p + ".content");
    }
    conv["content"] = content;
    if (calls) {
      if (!calls->is_array() || calls->empty()) return invalid_request("'" + p + ".tool_calls' must be a non-empty array", p + ".tool_calls");
      ojson out_calls = ojson::array();
      for (size_t k = 0; k < calls->size(); ++k) {
        const std::string q = p + ".tool_calls[" + std::to_string(k) + "]";
        const ojson& call = (*calls)[k];
        const ojson* fn = call.is_object() ? field(call, "function") : nullptr;
        if (!fn || !fn->is_object()) return invalid_request("'" + q + ".function' must be an object", q + ".function");
        const ojson* name = field(*fn, "name");
        if (!name || !name->is_string()) return invalid_request("'" + q + ".function.name' must be a string", q + ".function.name");
        ojson args = ojson::object();
        if (const ojson* a = field(*fn, "arguments")) {
          if (a->is_string()) {
            // OpenAI sends the arguments as a JSON text; the template wants the value.
            const std::string& text = a->get_ref<const std::string&>();
            args = json_depth(text, kMaxJsonDepth) > kMaxJsonDepth ? ojson(text) : ojson::parse(text, nullptr, false);
            if (args.is_discarded()) args = text;
          } else {
            args = *a;
          }
        }
        ojson fc = ojson::object();
        fc["name"] = *name;
        fc["arguments"] = std::move(args);
        ojson oc = ojson::object();
        if (const ojson* id = field(call, "id"); id && id->is_string()) oc["id"] = *id;
        oc["type"] = "function";
        oc["function"] = std::move(fc);
        out_calls.push_back(std::move(oc));
      }
      conv["tool_calls"] = std::move(out_calls);
    }
    if (role == "tool") {
      if (const ojson* id = field(m, "tool_call_id")) {
        if (!id->is_string()) return wrong_type(p + ".tool_call_id", "a string", *id);
        conv["tool_call_id"] = *id;
      }
    }
    out->push_back(std::move(conv));
  }
  return {};
}

// tools + tool_choice: the tools offered (null: none), their names, and whether a call must be
// made (tool_choice "required" or a named function, which leaves only that tool).
ApiError convert_tools(const ojson& b, ojson* tools, std::vector<std::string>* names, bool* forced_call) {
  *tools = nullptr;
  *forced_call = false;
  const ojson* t = field(b, "tools");
  if (t && !t->is_array()) return wrong_type("tools", "an array", *t);
  std::string choice = "auto", forced;
  if (const ojson* tc = field(b, "tool_choice")) {
    if (tc->is_string()) {
      choice = tc->get<std::string>();
      if (choice != "auto" && choice != "none" && choice != "required") {
        return invalid_request("'tool_choice' must be \"none\", \"auto\", \"required\" or a function, got '" + choice + "'", "tool_choice");
      }
    } else if (tc->is_object()) {
      const ojson* fn = field(*tc, "function");
      const ojson* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
      if (!name || !name->is_string()) return invalid_request("'tool_choice.function.name' must be a string", "tool_choice.function.name");
      choice = "function";
      forced = name->get<std::string>();
    } else {
      return wrong_type("tool_choice", "a string or an object", *tc);
    }
  }
  if (!t || t->empty()) {
    // "auto" and "none" mean the same without tools; a call that must be made cannot be.
    if (choice == "required" || choice == "function") {
      return invalid_request("'tool_choice' is \"" + (forced.empty() ? choice : forced) + "\" but the request has no 'tools'",
                             "tool_choice");
    }
    return {};
  }
  ojson kept = ojson::array();
  for (size_t i = 0; i < t->size(); ++i) {
    const std::string p = "tools[" + std::to_string(i) + "]";
    const ojson& tool = (*t)[i];
    if (!tool.is_object()) return wrong_type(p, "an object", tool);
    const ojson* type = field(tool, "type");
    if (!type || !type->is_string() || type->get<std::string>() != "function") {
      return invalid_request("'" + p + ".type' must be \"function\"", p + ".type");
    }
    const ojson* fn = field(tool, "function");
    if (!fn || !fn->is_object()) return invalid_request("'" + p + ".function' must be an object", p + ".function");
    const ojson* name = field(*fn, "name");
    if (!name || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      return invalid_request("'" + p + ".function.name' must be a non-empty string", p + ".function.name");
    }
    if (const ojson* params = field(*fn, "parameters"); params && !params->is_object()) {
      return wrong_type(p + ".function.parameters", "an object", *params);
    }
    if (choice == "function" && name->get<std::string>() != forced) continue;
    names->push_back(name->get<std::string>());
    kept.push_back(tool);
  }
  if (choice == "none") {
    names->clear();
    return {};
  }
  if (kept.empty()) return invalid_request("'tool_choice' names the function '" + forced + "', which is not among the tools", "tool_choice");
  *forced_call = choice == "required" || choice == "function";
  *tools = std::move(kept);
  return {};
}

// For a chat template that does not read `tools`: the tools go into the system message instead
// (generic_tool_preamble), and past calls become the assistant's text in that call format.
void tools_into_messages(ojson* messages, ojson* tools, bool forced_call) {
  const std::string preamble = generic_tool_preamble(*tools, forced_call);
  bool placed = false;
  for (ojson& m : *messages) {
    if (!placed && m["role"] == "system") {
      m["content"] = m["content"].get<std::string>() + "\n\n" + preamble;
      placed = true;
    }
    if (m.contains("tool_calls")) {
      ojson calls = ojson::array();
      for (const ojson& c : m["tool_calls"]) calls.push_back({{"name", c["function"]["name"]}, {"parameters", c["function"]["arguments"]}});
      std::string text = calls.size() == 1 ? calls[0].dump() : calls.dump();
      if (!m["content"].get<std::string>().empty()) text = m["content"].get<std::string>() + "\n" + text;
      m["content"] = std::move(text);
      m.erase("tool_calls");
    }
  }
  if (!placed) messages->insert(messages->begin(), ojson{{"role", "system"}, {"content", preamble}});
  *tools = nullptr;
}

// tools + tool_choice into the conversation: for the template (`tools`), or into the messages
// when the template does not read them (`tools` null). `offered`: the tools either way.
ApiError prepare_tools(const ojson& b, const ModelInfo& model, ojson* messages, ojson* tools, ojson* offered,
                       std::vector<std::string>* names, bool* forced_call) {
  RETURN_IF_API_ERROR(convert_tools(b, tools, names, forced_call));
  *offered = *tools;
  if (!tools->is_null() && !model.template_supports_tools) tools_into_messages(messages, tools, *forced_call);
  return {};
}

// Renders the conversation with the model's template (or the built-in Llama 3 format).
ApiError render(const ojson& messages, const ojson& tools, bool add_generation_prompt, const ModelInfo& model,
                std::string* out) {
  ChatTemplateOptions opt;
  opt.add_generation_prompt = add_generation_prompt;
  opt.bos_token = model.bos_token;
  opt.eos_token = model.eos_token;
  if (!tools.is_null()) opt.tools_json = tools.dump();
  std::string warning;
  Result<std::string> text = render_chat_json(model.template_usable ? model.chat_template : "", messages, opt, &warning);
  if (!text.ok()) return invalid_request(text.message(), "tools");
  if (model.template_usable && !warning.empty()) {
    // A template that parsed at startup failed on this conversation: raise_exception (roles
    // that do not alternate, several tool calls, ...), so the conversation is what is wrong.
    const std::string suffix = "; using the built-in Llama-3 chat format";
    if (warning.size() > suffix.size() && warning.compare(warning.size() - suffix.size(), suffix.size(), suffix) == 0) {
      warning.resize(warning.size() - suffix.size());
    }
    return invalid_request("the chat template rejected the conversation: " + warning, "messages");
  }
  *out = std::move(text.value());
  return {};
}

// Python's str.strip() for the ASCII whitespace templates meet (what `| trim` does to content).
std::string strip(const std::string& s) {
  auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; };
  size_t b = 0, e = s.size();
  while (b < e && space(s[b])) ++b;
  while (e > b && space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// Splits the rendered conversation into the template's own text, whose special tokens are
// parsed, and the messages' content, whose text is never read as special tokens: a user who
// writes "<|eot_id|><|start_header_id|>system..." gets those characters, not a forged header.
// Done only when some content holds "<|" (how every Llama 3 control token starts), so other
// conversations are tokenized exactly as transformers does. The template is rendered again with
// a marker in place of each content; the content is then found in the real rendering between
// the template pieces around its marker, as written or as `| trim` leaves it. A template that
// moves content in any other way keeps the plain rendering.
void split_content(const ojson& messages, const ojson& tools, bool add_generation_prompt, const ModelInfo& model,
                   const std::string& rendered, Prompt* out) {
  std::vector<std::string> contents;
  ojson marked = messages;
  for (ojson& m : marked) {
    std::string& c = m["content"].get_ref<std::string&>();
    if (c.empty()) continue;
    contents.push_back(c);
    c = "\xee\x80\x80" + std::to_string(contents.size() - 1) + "\xee\x80\x81";  // U+E000 n U+E001
  }
  bool suspicious = false;
  for (const std::string& c : contents) suspicious = suspicious || c.find("<|") != std::string::npos;
  if (!suspicious) return;
  std::string t;
  if (!render(marked, tools, add_generation_prompt, model, &t).ok()) return;
  std::vector<std::pair<std::string, bool>> segs;
  size_t tpos = 0, rpos = 0;
  auto literal = [&](size_t end) {
    const std::string piece = t.substr(tpos, end - tpos);
    if (rendered.compare(rpos, piece.size(), piece) != 0) return false;
    if (!piece.empty()) segs.emplace_back(piece, true);
    rpos += piece.size();
    tpos = end;
    return true;
  };
  for (;;) {
    const size_t at = t.find("\xee\x80\x80", tpos);
    if (at == std::string::npos) break;
    const size_t close = t.find("\xee\x80\x81", at);
    if (close == std::string::npos || !literal(at)) return;
    const size_t idx = static_cast<size_t>(std::strtoul(t.c_str() + at + 3, nullptr, 10));
    if (idx >= contents.size()) return;
    tpos = close + 3;
    // The template piece after this content tells where it ends in the real rendering.
    const size_t next = std::min(t.find("\xee\x80\x80", tpos), t.size());
    const std::string after = t.substr(tpos, next - tpos);
    bool found = false;
    for (const std::string& x : {contents[idx], strip(contents[idx])}) {
      if (rendered.compare(rpos, x.size(), x) == 0 && rendered.compare(rpos + x.size(), after.size(), after) == 0) {
        if (!x.empty()) segs.emplace_back(x, false);
        rpos += x.size();
        found = true;
        break;
      }
    }
    if (!found) return;
  }
  if (!literal(t.size()) || rpos != rendered.size()) return;
  out->segments = std::move(segs);
}


ApiError check_choices(const ApiRequest& r) {
  if (r.prompts.size() * static_cast<size_t>(r.n) > kMaxChoices) {
    return invalid_request("prompts x n = " + std::to_string(r.prompts.size() * r.n) + " exceeds " + std::to_string(kMaxChoices), "n");
  }
  return {};
}

}  // namespace

ApiError parse_chat_request(std::string_view body, const ModelInfo& model, ApiRequest* r) {
  ojson b;
  RETURN_IF_API_ERROR(parse_body(body, &b));
  return parse_chat_request_json(b, model, r);
}

ApiError parse_chat_request_json(const ojson& b, const ModelInfo& model, ApiRequest* r) {
  *r = ApiRequest();
  r->endpoint = Endpoint::kChatCompletions;
  RETURN_IF_API_ERROR(parse_common(b, r));
  RETURN_IF_API_ERROR(parse_max_tokens(b, -1, &r->base));  // default: until end of turn or context
  RETURN_IF_API_ERROR(get_bool(b, "logprobs", &r->logprobs));
  if (field(b, "top_logprobs")) {
    int64_t v = 0;
    RETURN_IF_API_ERROR(get_int(b, "top_logprobs", 0, kMaxTopLogprobs, &v));
    r->top_logprobs = static_cast<int>(v);
    if (r->top_logprobs > 0 && !r->logprobs) return invalid_request("'top_logprobs' requires 'logprobs': true", "top_logprobs");
  }
  r->base.logprobs = r->logprobs;
  r->base.top_logprobs = r->top_logprobs;
  ojson messages, tools, offered;
  bool forced_call = false;
  RETURN_IF_API_ERROR(convert_messages(b, &messages));
  RETURN_IF_API_ERROR(prepare_tools(b, model, &messages, &tools, &offered, &r->tool_names, &forced_call));
  r->tools = !r->tool_names.empty();
  if (forced_call) {
    // The call is made by construction: its JSON follows the tools' parameter schemas.
    if (r->base.grammar) {
      return invalid_request("'response_format' and a 'tool_choice' that forces a call both constrain the output; give one",
                             "response_format");
    }
    RETURN_IF_API_ERROR(tool_call_grammar(offered, &r->base.grammar));
  }
  Prompt p;
  p.add_bos = false;  // the template writes <|begin_of_text|>
  RETURN_IF_API_ERROR(render(messages, tools, true, model, &p.text));
  split_content(messages, tools, true, model, p.text, &p);
  r->prompts.push_back(std::move(p));
  return check_choices(*r);
}

ApiError apply_session_header(const std::string& header, ApiRequest* r) {
  if (header.empty()) return ApiError();
  std::string& sid = r->base.session_id;
  if (header.size() > kMaxSessionIdBytes) {
    return invalid_request("the X-Session-Id header is longer than " + std::to_string(kMaxSessionIdBytes) + " bytes",
                           "X-Session-Id");
  }
  if (!sid.empty() && sid != header) {
    return invalid_request("'session_id' and the X-Session-Id header name different sessions", "session_id");
  }
  sid = header;
  return ApiError();
}

ApiError parse_completion_request(std::string_view body, const ModelInfo& model, ApiRequest* r) {
  ojson b;
  RETURN_IF_API_ERROR(parse_body(body, &b));
  return parse_completion_request_json(b, model, r);
}

ApiError parse_completion_request_json(const ojson& b, const ModelInfo& model, ApiRequest* r) {
  *r = ApiRequest();
  r->endpoint = Endpoint::kCompletions;
  RETURN_IF_API_ERROR(parse_common(b, r));
  // OpenAI's default for completions. 0 scores an echoed prompt without generating (what
  // evaluation harnesses send).
  RETURN_IF_API_ERROR(parse_max_tokens(b, 16, &r->base, 0));
  if (field(b, "logprobs")) {
    int64_t v = 0;
    RETURN_IF_API_ERROR(get_int(b, "logprobs", 0, kMaxTopLogprobs, &v));
    r->logprobs = true;
    r->top_logprobs = static_cast<int>(v);
  }
  r->base.logprobs = r->logprobs;
  r->base.top_logprobs = r->top_logprobs;
  RETURN_IF_API_ERROR(get_bool(b, "echo", &r->echo));
  if (r->base.max_tokens == 0 && !r->echo) {
    return invalid_request("'max_tokens' of 0 generates nothing: it needs 'echo' (to score the prompt)", "max_tokens");
  }
  if (const ojson* sfx = field(b, "suffix"); sfx && !(sfx->is_string() && sfx->get_ref<const std::string&>().empty())) {
    return invalid_request("'suffix' is not supported", "suffix");
  }
  const ojson* prompt = field(b, "prompt");
  if (!prompt) return invalid_request("'prompt' is required", "prompt");
  const char* shapes = "a string, an array of strings, an array of token ids or an array of arrays of token ids";
  if (prompt->is_string()) {
    Prompt p;
    p.text = prompt->get<std::string>();
    r->prompts.push_back(std::move(p));
  } else if (prompt->is_array()) {
    if (prompt->empty()) return invalid_request("'prompt' must not be empty", "prompt");
    const ojson& first = (*prompt)[0];
    if (!first.is_number() && prompt->size() > kMaxPrompts) {
      return invalid_request("'prompt' holds more than " + std::to_string(kMaxPrompts) + " prompts", "prompt");
    }
    if (first.is_number()) {
      Prompt p;
      p.is_tokens = true;
      RETURN_IF_API_ERROR(read_token_ids(*prompt, "prompt", model, &p.tokens));
      r->prompts.push_back(std::move(p));
    } else {
      for (size_t i = 0; i < prompt->size(); ++i) {
        const std::string param = "prompt[" + std::to_string(i) + "]";
        const ojson& x = (*prompt)[i];
        Prompt p;
        if (x.is_string() && first.is_string()) {
          p.text = x.get<std::string>();
        } else if (x.is_array() && first.is_array()) {
          if (x.empty()) return invalid_request("'" + param + "' must not be empty", param);
          p.is_tokens = true;
          RETURN_IF_API_ERROR(read_token_ids(x, param, model, &p.tokens));
        } else {
          return wrong_type(param, first.is_string() ? "a string (like prompt[0])" : first.is_array() ? "an array of token ids (like prompt[0])" : shapes, x);
        }
        r->prompts.push_back(std::move(p));
      }
    }
  } else {
    return wrong_type("prompt", shapes, *prompt);
  }
  return check_choices(*r);
}

ApiError parse_tokenize_request(std::string_view body, const ModelInfo& model, TokenizeRequest* r) {
  ojson b;
  RETURN_IF_API_ERROR(parse_body(body, &b));
  return parse_tokenize_request_json(b, model, r);
}

ApiError parse_tokenize_request_json(const ojson& b, const ModelInfo& model, TokenizeRequest* r) {
  *r = TokenizeRequest();
  RETURN_IF_API_ERROR(get_bool(b, "parse_special", &r->parse_special));
  RETURN_IF_API_ERROR(get_bool(b, "with_pieces", &r->with_pieces));
  const bool chat = field(b, "messages") != nullptr;
  r->add_bos = !chat;  // a chat template writes its own BOS
  RETURN_IF_API_ERROR(get_bool(b, "add_special", &r->add_bos));
  RETURN_IF_API_ERROR(get_bool(b, "add_special_tokens", &r->add_bos));
  if (chat) {
    bool add_generation_prompt = true;
    RETURN_IF_API_ERROR(get_bool(b, "add_generation_prompt", &add_generation_prompt));
    ojson messages, tools, offered;
    std::vector<std::string> names;
    bool forced_call = false;
    RETURN_IF_API_ERROR(convert_messages(b, &messages));
    RETURN_IF_API_ERROR(prepare_tools(b, model, &messages, &tools, &offered, &names, &forced_call));
    Prompt p;
    RETURN_IF_API_ERROR(render(messages, tools, add_generation_prompt, model, &p.text));
    split_content(messages, tools, add_generation_prompt, model, p.text, &p);
    r->text = std::move(p.text);
    r->segments = std::move(p.segments);
    return {};
  }
  const char* key = field(b, "content") ? "content" : "prompt";
  if (!field(b, key)) return invalid_request("'content' (or 'prompt' or 'messages') is required", "content");
  return get_string(b, key, &r->text);
}

ApiError parse_detokenize_request(std::string_view body, const ModelInfo& model, std::vector<int32_t>* tokens) {
  ojson b;
  RETURN_IF_API_ERROR(parse_body(body, &b));
  return parse_detokenize_request_json(b, model, tokens);
}

ApiError parse_detokenize_request_json(const ojson& b, const ModelInfo& model, std::vector<int32_t>* tokens) {
  const ojson* t = field(b, "tokens");
  if (!t) return invalid_request("'tokens' is required", "tokens");
  if (!t->is_array()) return wrong_type("tokens", "an array of token ids", *t);
  return read_token_ids(*t, "tokens", model, tokens);
}

}  // namespace ll3::server
