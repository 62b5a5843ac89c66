// JSON Schema -> GBNF. Each subschema becomes a GBNF expression (usually a rule); $ref targets
// become named rules compiled once, so recursive schemas work. The grammar accepts a subset of
// the valid JSON texts (bounded whitespace, properties in schema order, compact enum values),
// never an invalid one: a keyword whose constraint the grammar cannot enforce exactly is
// refused with its JSON pointer, never ignored.
#include "grammar/json_schema.h"

#include <nlohmann/json.hpp>
#include <set>

#include "grammar/json_schema_internal.h"
#include "grammar/json_schema_compiler.h"

namespace ll3::grammar {

using ojson = nlohmann::ordered_json;
using namespace schema;

namespace {

// Deeper nesting than this is refused before parsing (nlohmann's destructor recurses).
constexpr int kMaxJsonDepth = 200;

bool too_deep(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace

Result<std::string> json_schema_to_gbnf(const std::string& text) {
  if (too_deep(text)) return Status::error("json schema: nested deeper than 200 levels", StatusCode::kInvalid);
  ojson root = ojson::parse(text, nullptr, false);
  if (root.is_discarded()) return Status::error("json schema: not valid JSON", StatusCode::kInvalid);
  SchemaCompiler c(root);
  return c.compile();
}

std::string json_object_gbnf() {
  std::string out = "root ::= json-object\n";
  for (const auto& [name, body] : json_primitives()) out += name + " ::= " + body + "\n";
  return out;
}

}  // namespace ll3::grammar
