#include "server/tool_calls.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "server/openai_request.h"

namespace ll3::server {

using json = nlohmann::ordered_json;

namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The end of the JSON object starting at s[0] == '{' (one past its closing brace), or npos.
size_t object_end(std::string_view s) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

bool to_call(const json& j, const std::vector<std::string>& names, ToolCall* out) {
  if (!j.is_object()) return false;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string()) return false;
  out->name = name->get<std::string>();
  if (std::find(names.begin(), names.end(), out->name) == names.end()) return false;
  auto args = j.find("parameters");
  if (args == j.end()) args = j.find("arguments");
  if (args == j.end() || args->is_null()) {
    out->arguments = "{}";
  } else if (args->is_object()) {
    out->arguments = args->dump(-1, ' ', false, json::error_handler_t::replace);
  } else if (args->is_string()) {
    out->arguments = args->get<std::string>();  // already a JSON text
  } else {
    return false;
  }
  return true;
}

json parse_json(std::string_view s) {
  if (json_depth(s, kMaxJsonDepth) > kMaxJsonDepth) return json(json::value_t::discarded);
  return json::parse(s.begin(), s.end(), nullptr, false);
}

}  // namespace

std::vector<ToolCall> parse_tool_calls(std::string_view text, const std::vector<std::string>& names) {
  std::string_view s = trim(text);
  if (s.substr(0, kPythonTag.size()) == kPythonTag) s = trim(s.substr(kPythonTag.size()));
  std::vector<ToolCall> calls;
  if (s.empty()) return calls;
  if (s.front() == '[') {
    json arr = parse_json(s);
    if (!arr.is_array() || arr.empty()) return {};
    for (const json& j : arr) {
      ToolCall c;
      if (!to_call(j, names, &c)) return {};
      calls.push_back(std::move(c));
    }
    return calls;
  }
  // One object, or several separated by ';' (and spaces).
  while (!s.empty()) {
    if (s.front() != '{') return {};
    const size_t end = object_end(s);
    if (end == std::string_view::npos) return {};
    ToolCall c;
    if (!to_call(parse_json(s.substr(0, end)), names, &c)) return {};
    calls.push_back(std::move(c));
    s = trim(s.substr(end));
    if (!s.empty() && s.front() == ';') s = trim(s.substr(1));
  }
  return calls;
}

ToolSniff sniff_tool_call(std::string_view text) {
  std::string_view s = text;
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  if (s.empty()) return ToolSniff::kUndecided;
  if (s.front() == '{' || s.front() == '[') return ToolSniff::kMaybeCall;
  if (s.size() >= kPythonTag.size()) return s.substr(0, kPythonTag.size()) == kPythonTag ? ToolSniff::kMaybeCall : ToolSniff::kContent;
  return kPythonTag.substr(0, s.size()) == s ? ToolSniff::kUndecided : ToolSniff::kContent;
}

}  // namespace ll3::server
