#include "server/anthropic_request.h"

#include "server/json_fields.h"

namespace ll3::server {

namespace {

// A string field that must be there.
ApiError required_string(const ojson& o, const char* key, const std::string& param,
                         std::string* out) {
  const ojson* v = field(o, key);
  if (!v) return invalid_request("'" + param + "." + key + "' is required", param + "." + key);
  if (!v->is_string()) return wrong_type(param + "." + key, "a string", *v);
  *out = v->get<std::string>();
  return {};
}

// The block's "type", which every content block has.
ApiError block_type(const ojson& block, const std::string& param, std::string* out) {
  if (!block.is_object()) return wrong_type(param, "an object", block);
  return required_string(block, "type", param, out);
}

// A string, or an array of text blocks (cache_control and citations ignored): as OpenAI content
// parts, which parse_chat_request joins with newlines. Used by `system` and tool_result content.
ApiError text_parts(const ojson& c, const std::string& param, ojson* out) {
  if (c.is_string()) {
    *out = c;
    return {};
  }
  if (!c.is_array()) return wrong_type(param, "a string or an array of text blocks", c);
  *out = ojson::array();
  for (size_t k = 0; k < c.size(); ++k) {
    const std::string p = param + "[" + std::to_string(k) + "]";
    std::string type, text;
    RETURN_IF_API_ERROR(block_type(c[k], p, &type));
    if (type != "text")
      return invalid_request(
          "content blocks of type '" + type + "' are not supported here (text only)", p + ".type");
    RETURN_IF_API_ERROR(required_string(c[k], "text", p, &text));
    out->push_back(ojson{{"type", "text"}, {"text", std::move(text)}});
  }
  if (out->empty()) *out = "";
  return {};
}

// An assistant's tool_use block as an OpenAI tool call (the input stays a JSON value).
ApiError tool_use_call(const ojson& block, const std::string& p, ojson* call) {
  std::string id, name;
  RETURN_IF_API_ERROR(required_string(block, "id", p, &id));
  RETURN_IF_API_ERROR(required_string(block, "name", p, &name));
  ojson input = ojson::object();
  if (const ojson* in = field(block, "input")) {
    if (!in->is_object()) return wrong_type(p + ".input", "an object", *in);
    input = *in;
  }
  *call = ojson{{"id", id},
                {"type", "function"},
                {"function", {{"name", name}, {"arguments", std::move(input)}}}};
  return {};
}

// A user's tool_result block as an OpenAI tool message. The model is told about a failed call
// in words: the template has no field for is_error.
ApiError tool_result_message(const ojson& block, const std::string& p, ojson* msg) {
  std::string id;
  RETURN_IF_API_ERROR(required_string(block, "tool_use_id", p, &id));
  ojson content = "";
  if (const ojson* c = field(block, "content"))
    RETURN_IF_API_ERROR(text_parts(*c, p + ".content", &content));
  bool is_error = false;
  if (const ojson* e = field(block, "is_error")) {
    if (!e->is_boolean()) return wrong_type(p + ".is_error", "a boolean", *e);
    is_error = e->get<bool>();
  }
  if (is_error) {
    if (content.is_string()) {
      content = "Error: " + content.get<std::string>();
    } else {
      content.insert(content.begin(), ojson{{"type", "text"}, {"text", "Error:"}});
    }
  }
  *msg = ojson{{"role", "tool"}, {"tool_call_id", id}, {"content", std::move(content)}};
  return {};
}

// One Anthropic message -> OpenAI messages, appended to `out`. A user turn with tool_result
// blocks becomes tool messages (and a user message for its text, in the order written); an
// assistant turn becomes one message with its text and its tool calls.
ApiError convert_message(const ojson& m, const std::string& p, ojson* out) {
  if (!m.is_object()) return wrong_type(p, "an object", m);
  std::string role;
  RETURN_IF_API_ERROR(required_string(m, "role", p, &role));
  if (role != "user" && role != "assistant") {
    return invalid_request("'" + p + ".role' must be \"user\" or \"assistant\", got '" + role +
                               "' (the system prompt goes in 'system')",
                           p + ".role");
  }
  const ojson* c = field(m, "content");
  if (!c) return invalid_request("'" + p + ".content' is required", p + ".content");
  if (c->is_string()) {
    out->push_back(ojson{{"role", role}, {"content", *c}});
    return {};
  }
  if (!c->is_array())
    return wrong_type(p + ".content", "a string or an array of content blocks", *c);
  ojson text = ojson::array(), calls = ojson::array();
  auto flush_text = [&] {
    if (!text.empty()) out->push_back(ojson{{"role", role}, {"content", text}});
    text = ojson::array();
  };
  for (size_t k = 0; k < c->size(); ++k) {
    const std::string q = p + ".content[" + std::to_string(k) + "]";
    const ojson& block = (*c)[k];
    std::string type;
    RETURN_IF_API_ERROR(block_type(block, q, &type));
    if (type == "text") {
      std::string t;
      RETURN_IF_API_ERROR(required_string(block, "text", q, &t));
      text.push_back(ojson{{"type", "text"}, {"text", std::move(t)}});
    } else if (type == "tool_use" && role == "assistant") {
      ojson call;
      RETURN_IF_API_ERROR(tool_use_call(block, q, &call));
      calls.push_back(std::move(call));
    } else if (type == "tool_result" && role == "user") {
      flush_text();
      ojson msg;
      RETURN_IF_API_ERROR(tool_result_message(block, q, &msg));
      out->push_back(std::move(msg));
    } else if ((type == "thinking" || type == "redacted_thinking") && role == "assistant") {
      // Reasoning a client sends back: this server never writes any, and the model's template
      // has no place for it.
    } else {
      return invalid_request(
          "content blocks of type '" + type + "' are not supported in " + role +
              " messages (text, tool_use in assistant messages, tool_result in user messages)",
          q + ".type");
    }
  }
  if (role == "assistant" && !calls.empty()) {
    ojson msg = ojson{{"role", "assistant"},
                      {"content", text.empty() ? ojson("") : text},
                      {"tool_calls", std::move(calls)}};
    out->push_back(std::move(msg));
    return {};
  }
  if (text.empty() && c->empty())
    text.push_back(ojson{{"type", "text"}, {"text", ""}});  // an empty turn stays a turn
  flush_text();
  return {};
}

ApiError convert_messages(const ojson& b, ojson* out) {
  const ojson* msgs = field(b, "messages");
  if (!msgs) return invalid_request("'messages' is required", "messages");
  if (!msgs->is_array()) return wrong_type("messages", "an array", *msgs);
  if (msgs->empty()) return invalid_request("'messages' must not be empty", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    RETURN_IF_API_ERROR(convert_message((*msgs)[i], "messages[" + std::to_string(i) + "]", out));
  }
  return {};
}

// tools: custom tools only ({name, description, input_schema}); server tools (web search, code
// execution, ...) run at Anthropic and are refused.
ApiError convert_tools(const ojson& tools, ojson* out) {
  if (!tools.is_array()) return wrong_type("tools", "an array", tools);
  *out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string p = "tools[" + std::to_string(i) + "]";
    const ojson& t = tools[i];
    if (!t.is_object()) return wrong_type(p, "an object", t);
    if (const ojson* type = field(t, "type");
        type && !(type->is_string() && type->get<std::string>() == "custom")) {
      return invalid_request(
          "'" + p + ".type' " + (type->is_string() ? "'" + type->get<std::string>() + "'" : "") +
              " is not supported: only custom tools ({name, description, input_schema}) are",
          p + ".type");
    }
    std::string name;
    RETURN_IF_API_ERROR(required_string(t, "name", p, &name));
    if (name.empty()) return invalid_request("'" + p + ".name' must not be empty", p + ".name");
    ojson fn = ojson{{"name", name}};
    if (const ojson* d = field(t, "description")) {
      if (!d->is_string()) return wrong_type(p + ".description", "a string", *d);
      fn["description"] = *d;
    }
    const ojson* schema = field(t, "input_schema");
    if (!schema)
      return invalid_request("'" + p + ".input_schema' is required", p + ".input_schema");
    if (!schema->is_object()) return wrong_type(p + ".input_schema", "an object", *schema);
    fn["parameters"] = *schema;
    out->push_back(ojson{{"type", "function"}, {"function", std::move(fn)}});
  }
  return {};
}

// tool_choice {type: auto | any | tool (with name) | none} -> OpenAI's auto | required | a named
// function | none. disable_parallel_tool_use is ignored (the template takes one call a turn).
ApiError convert_tool_choice(const ojson& tc, ojson* out) {
  if (!tc.is_object()) return wrong_type("tool_choice", "an object", tc);
  std::string type;
  RETURN_IF_API_ERROR(required_string(tc, "type", "tool_choice", &type));
  if (type == "auto" || type == "none") {
    *out = type;
  } else if (type == "any") {
    *out = "required";
  } else if (type == "tool") {
    std::string name;
    RETURN_IF_API_ERROR(required_string(tc, "name", "tool_choice", &name));
    *out = ojson{{"type", "function"}, {"function", {{"name", name}}}};
  } else {
    return invalid_request(
        "'tool_choice.type' must be one of auto, any, tool, none; got '" + type + "'",
        "tool_choice.type");
  }
  return {};
}

// Fields that mean the same in both bodies, copied as they are (parse_chat_request checks them):
// Anthropic's sampling fields and ll3's own extensions that the OpenAI path accepts too.
constexpr const char* kSameFields[] = {"model",
                                       "temperature",
                                       "top_p",
                                       "top_k",
                                       "stream",
                                       "seed",
                                       "min_p",
                                       "repeat_penalty",
                                       "repetition_penalty",
                                       "presence_penalty",
                                       "frequency_penalty",
                                       "repeat_last_n",
                                       "ignore_eos",
                                       "session_id",
                                       "priority",
                                       "speculative"};

// The fields only /v1/messages reads: max_tokens (required, as Anthropic requires it),
// stop_sequences and the sampling and engine fields.
ApiError generation_fields(const ojson& b, ojson* o) {
  const ojson* mt = field(b, "max_tokens");
  if (!mt) return invalid_request("'max_tokens' is required", "max_tokens");
  (*o)["max_tokens"] = *mt;
  if (const ojson* ss = field(b, "stop_sequences")) {
    if (!ss->is_array()) return wrong_type("stop_sequences", "an array of strings", *ss);
    if (!ss->empty()) (*o)["stop"] = *ss;
  }
  for (const char* key : kSameFields) {
    if (const ojson* v = field(b, key)) (*o)[key] = *v;
  }
  return {};
}

// parse_chat_request names OpenAI's fields; where Anthropic's differ, its messages say so.
ApiError renamed(ApiError e) {
  if (e.param.rfind("stop", 0) == 0) {
    const std::string from = "'" + e.param, to = "'stop_sequences" + e.param.substr(4);
    if (size_t at = e.message.find(from); at != std::string::npos)
      e.message.replace(at, from.size(), to);
    e.param = "stop_sequences" + e.param.substr(4);
  }
  return e;
}


// Anthropic body text -> the OpenAI body text parse_chat_request reads.
ApiError openai_body(std::string_view body, bool count_only, std::string* out) {
  ojson b, o;
  RETURN_IF_API_ERROR(parse_body(body, &b));
  RETURN_IF_API_ERROR(anthropic_to_openai(b, count_only, &o));
  // Strings stay as sent: invalid UTF-8 in them reaches the template as it would on the OpenAI
  // path instead of failing here.
  *out = o.dump(-1, ' ', false, ojson::error_handler_t::replace);
  return {};
}

}  // namespace

ApiError anthropic_to_openai(const ojson& b, bool count_only, ojson* o) {
  *o = ojson::object();
  ojson messages = ojson::array();
  if (const ojson* sys = field(b, "system")) {
    ojson content;
    RETURN_IF_API_ERROR(text_parts(*sys, "system", &content));
    messages.push_back(ojson{{"role", "system"}, {"content", std::move(content)}});
  }
  RETURN_IF_API_ERROR(convert_messages(b, &messages));
  (*o)["messages"] = std::move(messages);
  if (const ojson* tools = field(b, "tools")) {
    ojson t;
    RETURN_IF_API_ERROR(convert_tools(*tools, &t));
    if (!t.empty()) (*o)["tools"] = std::move(t);
  }
  if (const ojson* tc = field(b, "tool_choice")) {
    ojson c;
    RETURN_IF_API_ERROR(convert_tool_choice(*tc, &c));
    (*o)["tool_choice"] = std::move(c);
  }
  if (const ojson* md = field(b, "metadata"); md && !md->is_object())
    return wrong_type("metadata", "an object", *md);
  if (count_only) {
    if (const ojson* m = field(b, "model")) (*o)["model"] = *m;
    return {};
  }
  return generation_fields(b, o);
}

ApiError parse_messages_request(std::string_view body, const ModelInfo& model, ApiRequest* out) {
  std::string text;
  RETURN_IF_API_ERROR(openai_body(body, false, &text));
  return renamed(parse_chat_request(text, model, out));
}

ApiError parse_count_tokens_request(std::string_view body, const ModelInfo& model, Prompt* out) {
  std::string text;
  RETURN_IF_API_ERROR(openai_body(body, true, &text));
  ApiRequest r;
  RETURN_IF_API_ERROR(renamed(parse_chat_request(text, model, &r)));
  *out = std::move(r.prompts.at(0));
  return {};
}

const char* anthropic_error_type(int status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 400 && status < 500 ? "invalid_request_error" : "api_error";
  }
}

ojson anthropic_error_json(const ApiError& e) {
  ojson err = ojson::object();
  err["type"] = anthropic_error_type(e.status);
  err["message"] = e.message;
  ojson j = ojson::object();
  j["type"] = "error";
  j["error"] = std::move(err);
  return j;
}

bool is_anthropic_path(std::string_view path) {
  return path == "/v1/messages" || path.rfind("/v1/messages/", 0) == 0;
}

}  // namespace ll3::server
