// The JSON Schema compiler's state: the rules written so far and the $ref targets already
// compiled. json_schema_compiler.cpp walks schemas (types, combinators, scalars);
// json_schema_object.cpp writes objects and arrays.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ll3::grammar {

// OpenAPI's "nullable": true (also null allowed). Only a boolean true counts: any other value
// is refused by check_keywords before a schema is compiled, and reads as false where a schema
// is only inspected (never an exception from the JSON library on a hostile schema).
inline bool nullable(const nlohmann::ordered_json& s) {
  const auto it = s.find("nullable");
  return it != s.end() && it->is_boolean() && it->get<bool>();
}

class SchemaCompiler {
 public:
  using ojson = nlohmann::ordered_json;
  explicit SchemaCompiler(const ojson& root) : root_(root) {}
  // GBNF text whose rule `root` matches the JSON texts valid under the schema.
  Result<std::string> compile();

 private:
  // A GBNF expression for the values valid under `s` (at JSON pointer `ptr`).
  Result<std::string> visit(const ojson& s, const std::string& ptr, const std::string& hint, int depth);
  Result<std::string> visit_ref(const ojson& s, const std::string& ptr, int depth);
  Result<std::string> visit_all_of(const ojson& s, const std::string& ptr, const std::string& hint, int depth);
  Result<std::string> visit_any_of(const ojson& s, const std::string& key, const std::string& ptr,
                                   const std::string& hint, int depth);
  Result<std::string> visit_values(const ojson& s, const std::string& ptr, const std::string& hint);
  Result<std::string> visit_type(const ojson& s, const std::string& type, const std::string& ptr,
                                 const std::string& hint, int depth);
  Result<std::string> string_expr(const ojson& s, const std::string& ptr, const std::string& hint);
  Result<std::string> integer_expr(const ojson& s, const std::string& ptr, const std::string& hint);
  Result<std::string> number_expr(const ojson& s, const std::string& ptr, const std::string& hint);
  Result<std::string> object_expr(const ojson& s, const std::string& ptr, const std::string& hint, int depth);
  Result<std::string> array_expr(const ojson& s, const std::string& ptr, const std::string& hint, int depth);
  // The member (key and value) of an additional property: its key is none of `names`.
  std::string member_rule_for_extra(const std::vector<std::string>& names, const std::string& hint,
                                    const std::string& value);

  // The schema a $ref names (nullptr and an error when it names nothing here).
  Result<const ojson*> resolve(const ojson& ref, const std::string& ptr) const;
  Status check_keywords(const ojson& s, const std::string& ptr) const;

  std::string rule_name(const std::string& hint);
  std::string add_rule(const std::string& hint, const std::string& body);

  const ojson& root_;
  std::vector<std::pair<std::string, std::string>> rules_;  // name -> body, in order written
  std::set<std::string> names_;
  std::map<std::string, std::string> ref_rules_;  // $ref target pointer -> rule name
};

// Errors of schemas: kInvalid, prefixed "json schema: ".
Status schema_error(const std::string& what);
// The non-negative integer value of s[key] (minLength, maxItems, ...), at most 10000.
Result<int64_t> count_keyword(const nlohmann::ordered_json& s, const char* key, const std::string& ptr);
// JSON pointer segment escaping (~0, ~1).
std::string pointer_child(const std::string& ptr, const std::string& key);
// Keywords that only annotate (ignored) and keywords that the grammar cannot enforce (refused).
bool is_annotation(const std::string& key);
bool is_validation(const std::string& key);  // handled here, so never ignored

}  // namespace ll3::grammar
