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

// `s` without the whitespace outside its strings. Prefix-stable: minifying a prefix of a text
// gives a prefix of the minified whole, so arguments can stream as they are generated and add
// up to the final ones.
std::string minify_json(std::string_view s);

// A call as far as a partial output shows it, calls in order.
struct PartialCall {
  std::string name;         // known once its JSON string is complete
  bool has_name = false;
  std::string arguments;    // minified text of the "parameters" / "arguments" object so far
  bool object_arguments = false;  // the arguments are an object (a string value is not streamed)
};
// Reads `text` (the output so far) as far as it looks like tool calls in the shapes
// parse_tool_calls accepts; stops at the first thing that is incomplete or not a call.
std::vector<PartialCall> scan_partial_tool_calls(std::string_view text);

// While an output is being generated: could text that starts like `text` still be a tool call?
// kUndecided until the first non-space characters settle it.
enum class ToolSniff { kUndecided, kMaybeCall, kContent };
ToolSniff sniff_tool_call(std::string_view text);

}  // namespace ll3::server
