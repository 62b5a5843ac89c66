// Tool calls in a Llama 3.1 model's output. With custom tools the model answers with JSON,
// {"name": "f", "parameters": {...}}, either bare or after <|python_tag|>; several calls come as
// a JSON array or as objects separated by ';'. Anything else (prose, a built-in tool's
// `brave_search.call(...)`, a function not among the tools) is content, not a call.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ll3::server {

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON text (OpenAI sends the arguments as a string)
};

inline constexpr std::string_view kPythonTag = "<|python_tag|>";

// The calls `text` (the whole output) consists of, or none when it is not a tool call. `names`:
// the functions offered; a call to any other name makes the whole text content.
std::vector<ToolCall> parse_tool_calls(std::string_view text, const std::vector<std::string>& names);

// While an output is being generated: could text that starts like `text` still be a tool call?
// kUndecided until the first non-space characters settle it.
enum class ToolSniff { kUndecided, kMaybeCall, kContent };
ToolSniff sniff_tool_call(std::string_view text);

}  // namespace ll3::server
