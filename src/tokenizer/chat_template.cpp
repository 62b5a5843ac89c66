#include "tokenizer/chat_template.h"

#include "tokenizer/jinja.h"
#include "tokenizer/jinja_value.h"
#include "tokenizer/unicode.h"

namespace ll3 {

using ojson = nlohmann::ordered_json;

static std::string py_trim(const std::string& s) {
  // Python str.strip(), as the template's |trim does
  size_t b = 0, e = s.size();
  while (b < e) {
    size_t k = b;
    int32_t cp = utf8_next(s, k);
    if (cp < 0 || !jinja::py_isspace(uint32_t(cp))) break;
    b = k;
  }
  while (e > b) {
    size_t st = e - 1;
    while (st > b && (uint8_t(s[st]) & 0xC0) == 0x80) --st;
    size_t k = st;
    int32_t cp = utf8_next(s, k);
    if (cp < 0 || k != e || !jinja::py_isspace(uint32_t(cp))) break;
    e = st;
  }
  return s.substr(b, e - b);
}

std::string render_llama3_builtin(const ojson& messages, const ChatTemplateOptions& opt) {
  std::string out = opt.bos_token;
  if (messages.is_array()) {
    for (const auto& m : messages) {
      std::string role = m.is_object() && m.contains("role") && m["role"].is_string()
                             ? m["role"].get<std::string>()
                             : "user";
      std::string content;
      if (m.is_object() && m.contains("content")) {
        content = m["content"].is_string() ? m["content"].get<std::string>() : m["content"].dump();
      }
      out +=
          "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + py_trim(content) + "<|eot_id|>";
    }
  }
  if (opt.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

namespace {

struct ParsedTemplate {
  std::string source;
  jinja::TemplatePtr tree;  // null: it did not parse, for `error`
  std::string error;
};

// The last template this thread parsed. A server renders its one model's template for every
// request: parsing it each time was a fifth of a request's parsing (the fuzz profile), and
// comparing the source is cheap beside it. Per thread, so renders need no lock.
const ParsedTemplate& parsed_template(const std::string& tmpl) {
  thread_local ParsedTemplate last;
  if (last.source != tmpl) {
    Result<jinja::TemplatePtr> r = jinja::parse(tmpl);
    last.source = tmpl;
    last.error = r.ok() ? "" : r.message();
    last.tree = r.ok() ? std::move(*r) : nullptr;
  }
  return last;
}

}  // namespace

Result<std::string> render_chat_json(const std::string& tmpl, const ojson& messages,
                                     const ChatTemplateOptions& opt, std::string* warning) {
  ojson ctx = ojson::object();
  ctx["messages"] = messages;
  ctx["tools"] = nullptr;  // transformers passes tools=None when there are none
  if (!opt.tools_json.empty()) {
    ojson tools = ojson::parse(opt.tools_json, nullptr, false);
    if (tools.is_discarded() || !(tools.is_array() || tools.is_null())) {
      return Status::error("chat template: tools must be a JSON array");
    }
    ctx["tools"] = tools;
  }
  ctx["add_generation_prompt"] = opt.add_generation_prompt;
  ctx["bos_token"] = opt.bos_token;
  if (!opt.eos_token.empty()) ctx["eos_token"] = opt.eos_token;
  if (!opt.date_string.empty()) ctx["date_string"] = opt.date_string;
  if (!opt.extra_context_json.empty()) {
    ojson extra = ojson::parse(opt.extra_context_json, nullptr, false);
    if (extra.is_discarded() || !extra.is_object()) {
      return Status::error("chat template: extra context must be a JSON object");
    }
    for (auto it = extra.begin(); it != extra.end(); ++it) ctx[it.key()] = it.value();
  }

  auto fallback = [&](const std::string& why) -> Result<std::string> {
    if (warning) *warning = why + "; using the built-in Llama-3 chat format";
    return render_llama3_builtin(messages, opt);
  };
  if (tmpl.empty()) return fallback("the model has no chat template");
  const ParsedTemplate& parsed = parsed_template(tmpl);
  if (!parsed.tree) return fallback(parsed.error);
  std::time_t now = opt.now != 0 ? opt.now : std::time(nullptr);
  auto out = jinja::render(*parsed.tree, ctx, now);
  if (!out.ok()) return fallback(out.message());
  if (warning) warning->clear();
  return out;
}

Result<std::string> render_chat(const std::string& tmpl, const std::vector<ChatMessage>& msgs,
                                const ChatTemplateOptions& opt, std::string* warning) {
  ojson messages = ojson::array();
  for (const auto& m : msgs) {
    ojson j = ojson::object();
    j["role"] = m.role;
    j["content"] = m.content;
    if (!m.tool_calls_json.empty()) {
      ojson calls = ojson::parse(m.tool_calls_json, nullptr, false);
      if (calls.is_discarded())
        return Status::error("chat template: tool_calls of a message is not valid JSON");
      j["tool_calls"] = calls;
    }
    messages.push_back(std::move(j));
  }
  return render_chat_json(tmpl, messages, opt, warning);
}

}  // namespace ll3
