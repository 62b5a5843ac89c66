// Chat templates: renders a model's Jinja chat template (tokenizer.chat_template in GGUF,
// chat_template in tokenizer_config.json) the way Hugging Face transformers does with Python's
// jinja2, byte for byte. A missing, unsupported or failing template falls back to the built-in
// Llama-3 format with a warning.
#pragma once

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace ll3 {

struct ChatMessage {
  std::string role;
  std::string content;
  std::string tool_calls_json;  // optional: a JSON array of OpenAI-style tool calls
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  std::string bos_token = "<|begin_of_text|>";
  std::string eos_token;
  std::string date_string;         // "26 Jul 2024"; empty: left undefined (the template decides)
  std::string tools_json;          // JSON array of tool definitions; empty: tools = None
  std::string extra_context_json;  // JSON object of more variables (builtin_tools, ...)
  std::time_t now = 0;             // what strftime_now() formats; 0: the current time
};

// Renders `tmpl`. An empty, unrecognised or failing template falls back to the built-in
// Llama-3 format and sets *warning (if given) to why; the result is then still ok. Only bad
// options (tools_json or extra_context_json not valid JSON) give an error.
Result<std::string> render_chat(const std::string& tmpl, const std::vector<ChatMessage>& msgs,
                                const ChatTemplateOptions& opt, std::string* warning = nullptr);

// The same with the messages as JSON (content may be structured, tool_calls present, ...).
Result<std::string> render_chat_json(const std::string& tmpl,
                                     const nlohmann::ordered_json& messages,
                                     const ChatTemplateOptions& opt,
                                     std::string* warning = nullptr);

// The built-in Llama-3 format (what Meta-Llama-3-Instruct's template renders).
std::string render_llama3_builtin(const nlohmann::ordered_json& messages,
                                  const ChatTemplateOptions& opt);

}  // namespace ll3
