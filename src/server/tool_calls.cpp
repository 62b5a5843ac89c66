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

size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

// One past the closing quote of the string starting at s[i] == '"', or npos.
size_t string_end(std::string_view s, size_t i) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') ++i;
    else if (s[i] == '"') return i + 1;
  }
  return std::string_view::npos;
}

// One past the JSON value starting at s[i], or npos when the text ends first.
size_t value_end(std::string_view s, size_t i) {
  if (s[i] == '"') return string_end(s, i);
  if (s[i] == '{' || s[i] == '[') {
    const size_t e = object_end(s.substr(i));
    return e == std::string_view::npos ? e : i + e;
  }
  // A number or a literal: up to a delimiter, which must have arrived.
  while (i < s.size() && !is_space(s[i]) && s[i] != ',' && s[i] != '}' && s[i] != ']') ++i;
  return i < s.size() ? i : std::string_view::npos;
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

std::string minify_json(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < s.size()) out += s[++i];
      else if (c == '"') in_string = false;
    } else if (!is_space(c)) {
      out += c;
      if (c == '"') in_string = true;
    }
  }
  return out;
}

std::vector<PartialCall> scan_partial_tool_calls(std::string_view s) {
  constexpr size_t npos = std::string_view::npos;
  std::vector<PartialCall> calls;
  size_t i = skip_space(s, 0);
  if (s.substr(i, kPythonTag.size()) == kPythonTag) i = skip_space(s, i + kPythonTag.size());
  if (i < s.size() && s[i] == '[') i = skip_space(s, i + 1);
  while (i < s.size() && s[i] == '{') {
    PartialCall& c = calls.emplace_back();
    size_t j = skip_space(s, i + 1);
    // The members, in the order the model writes them.
    while (true) {
      if (j >= s.size()) return calls;
      if (s[j] == '}') break;
      if (s[j] != '"') return calls;
      const size_t key_end = string_end(s, j);
      if (key_end == npos) return calls;
      const std::string_view key = s.substr(j + 1, key_end - j - 2);
      j = skip_space(s, key_end);
      if (j >= s.size() || s[j] != ':') return calls;
      j = skip_space(s, j + 1);
      if (j >= s.size()) return calls;
      const size_t end = value_end(s, j);
      if (key == "name" && s[j] == '"' && end != npos && !c.has_name) {
        const json name = json::parse(s.substr(j, end - j), nullptr, false);
        if (name.is_string()) {
          c.name = name.get<std::string>();
          c.has_name = true;
        }
      } else if ((key == "parameters" || key == "arguments") && s[j] == '{' && !c.object_arguments) {
        c.object_arguments = true;
        c.arguments = minify_json(s.substr(j, end == npos ? npos : end - j));
      }
      if (end == npos) return calls;
      j = skip_space(s, end);
      if (j < s.size() && s[j] == ',') j = skip_space(s, j + 1);
    }
    // The next call, after ';' or ',' (array).
    i = skip_space(s, j + 1);
    if (i < s.size() && (s[i] == ';' || s[i] == ',')) i = skip_space(s, i + 1);
  }
  return calls;
}

namespace {

// Object arguments as the model wrote them, minified: the text a stream sends piece by piece
// (re-serializing could change numbers and escapes, and then the pieces would not add up).
std::vector<ToolCall> with_model_arguments(std::vector<ToolCall> calls, std::string_view text) {
  const std::vector<PartialCall> seen = scan_partial_tool_calls(text);
  for (size_t k = 0; k < calls.size() && k < seen.size(); ++k) {
    // The same value (not, say, the first of two "parameters" keys where the parse kept the last).
    if (seen[k].object_arguments && seen[k].name == calls[k].name &&
        json::parse(seen[k].arguments, nullptr, false) == json::parse(calls[k].arguments, nullptr, false)) {
      calls[k].arguments = seen[k].arguments;
    }
  }
  return calls;
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
    return with_model_arguments(std::move(calls), text);
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
  return with_model_arguments(std::move(calls), text);
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
