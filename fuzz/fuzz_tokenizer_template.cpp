// Fuzz target: the Jinja subset interpreter. Input: a template source. Parsing and rendering
// (with a conversation that has tools, tool calls and structured content) must end in output
// or a Status, within the render limits, never a crash or a hang.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/chat_template.h"
#include "tokenizer/jinja.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;
  std::string src(reinterpret_cast<const char*>(data), size);
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": " sys "},
                 {"role": "user", "content": "hi <|eot_id|>"},
                 {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1, "b": [true, null, 2.5]}}}]},
                 {"role": "tool", "content": {"ok": "yes"}}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<|begin_of_text|>", "builtin_tools": ["brave_search"]})");
  auto t = ll3::jinja::parse(src);
  if (!t.ok()) {
    if (t.message().empty()) std::abort();
    return 0;
  }
  ll3::jinja::RenderLimits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = 1 << 20;
  auto out = ll3::jinja::render(**t, ctx, 1736942400, limits);
  if (!out.ok() && out.message().empty()) std::abort();
  if (out.ok()) {  // it fits the tight limits: the public entry point must render it too (or fall
                   // back)
    std::string warning;
    if (!ll3::render_chat(src, {{"user", "x", ""}}, ll3::ChatTemplateOptions{}, &warning).ok())
      std::abort();
  }
  return 0;
}
