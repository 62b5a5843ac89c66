// Walking a JSON Schema: keyword checks, $ref, allOf / anyOf / oneOf, enum / const, types and
// the scalar types (strings, integers, numbers).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "grammar/json_schema_compiler.h"
#include "grammar/json_schema_internal.h"

namespace ll3::grammar {

using ojson = nlohmann::ordered_json;
using namespace schema;

namespace {

constexpr int kMaxSchemaDepth = 64;

const std::set<std::string> kAnnotations = {
    "title", "description", "$schema", "$id", "$comment", "examples", "default", "deprecated",
    "readOnly", "writeOnly", "$defs", "definitions", "$anchor", "$vocabulary", "contentEncoding",
    "contentMediaType", "contentSchema"};
const std::set<std::string> kHandled = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "items", "prefixItems",
    "additionalItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf", "$ref", "nullable"};
const std::set<std::string> kRefused = {
    "multipleOf", "uniqueItems", "patternProperties", "not", "if", "then", "else", "contains",
    "minContains", "maxContains", "dependentRequired", "dependentSchemas", "dependencies",
    "propertyNames", "minProperties", "maxProperties", "unevaluatedProperties", "unevaluatedItems",
    "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor"};

std::string alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : " ") + alts[k];
  return out + " )";
}

// Validation keywords of `s` other than those listed.
std::string other_validation_keyword(const ojson& s, std::initializer_list<const char*> allowed) {
  for (const auto& [k, v] : s.items()) {
    if (!is_validation(k)) continue;
    bool ok = false;
    for (const char* a : allowed) ok = ok || k == a;
    if (!ok) return k;
  }
  return "";
}

}  // namespace

Status schema_error(const std::string& what) { return Status::error("json schema: " + what, StatusCode::kInvalid); }

std::string pointer_child(const std::string& ptr, const std::string& key) {
  std::string out = ptr + "/";
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

bool is_annotation(const std::string& key) { return kAnnotations.count(key) != 0; }
bool is_validation(const std::string& key) { return kHandled.count(key) != 0 || kRefused.count(key) != 0; }

std::string SchemaCompiler::rule_name(const std::string& hint) {
  std::string base;
  for (char c : hint) {
    char l = char(std::tolower(uint8_t(c)));
    bool ok = (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9');
    if (ok) base += l;
    else if (!base.empty() && base.back() != '-') base += '-';
    if (base.size() >= 40) break;
  }
  while (!base.empty() && base.back() == '-') base.pop_back();
  if (base.empty()) base = "r";
  std::string name = base;
  for (int k = 2; names_.count(name) || name.rfind("json-", 0) == 0 || name == "ws"; ++k) name = base + "-" + std::to_string(k);
  names_.insert(name);
  return name;
}

std::string SchemaCompiler::add_rule(const std::string& hint, const std::string& body) {
  std::string name = rule_name(hint);
  rules_.emplace_back(name, body);
  return name;
}

Result<std::string> SchemaCompiler::compile() {
  names_.insert("root");
  ref_rules_["#"] = "root";
  auto e = visit(root_, "#", "root", 0);
  if (!e.ok()) return e.status();
  rules_.insert(rules_.begin(), {"root", *e});
  std::string text;
  for (const auto& [name, body] : rules_) text += name + " ::= " + body + "\n";
  // The shared rules that the text (or a shared rule it uses) mentions; they come in an order
  // where each is defined after those it uses, so scanning backwards sees the users first.
  const auto& prims = json_primitives();
  std::vector<bool> used(prims.size(), false);
  auto mentions = [](const std::string& t, const std::string& name) {
    for (size_t at = t.find(name); at != std::string::npos; at = t.find(name, at + 1)) {
      auto word = [](char c) { return std::isalnum(uint8_t(c)) || c == '-' || c == '_'; };
      bool start_ok = at == 0 || !word(t[at - 1]);
      bool end_ok = at + name.size() >= t.size() || !word(t[at + name.size()]);
      if (start_ok && end_ok) return true;
    }
    return false;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t k = prims.size(); k-- > 0;) {
      if (used[k]) continue;
      bool hit = mentions(text, prims[k].first);
      for (size_t j = 0; j < prims.size() && !hit; ++j) hit = used[j] && mentions(prims[j].second, prims[k].first);
      if (hit) used[k] = changed = true;
    }
  }
  for (size_t k = 0; k < prims.size(); ++k)
    if (used[k]) text += prims[k].first + " ::= " + prims[k].second + "\n";
  return text;
}

Status SchemaCompiler::check_keywords(const ojson& s, const std::string& ptr) const {
  for (const auto& [k, v] : s.items()) {
    if (kRefused.count(k)) return schema_error("'" + k + "' at " + ptr + " is not supported");
  }
  if (s.contains("nullable") && !s["nullable"].is_boolean()) return schema_error("'nullable' at " + ptr + " is not a boolean");
  return Status();
}

Result<const SchemaCompiler::ojson*> SchemaCompiler::resolve(const ojson& ref, const std::string& ptr) const {
  std::string where = pointer_child(ptr, "$ref");
  if (!ref.is_string()) return schema_error("'$ref' at " + where + " is not a string");
  std::string target = ref.get<std::string>();
  if (target == "#") return &root_;
  if (target.rfind("#/", 0) != 0) {
    return schema_error("'$ref' at " + where + " (\"" + target + "\") is not supported: only local references (#/...)");
  }
  try {
    ojson::json_pointer jp(target.substr(1));
    if (!root_.contains(jp)) return schema_error("'$ref' at " + where + ": \"" + target + "\" names nothing");
    return &root_.at(jp);
  } catch (const std::exception&) {
    return schema_error("'$ref' at " + where + ": \"" + target + "\" is not a valid JSON pointer");
  }
}

Result<std::string> SchemaCompiler::visit(const ojson& s, const std::string& ptr, const std::string& hint, int depth) {
  if (depth > kMaxSchemaDepth) return schema_error("nested deeper than " + std::to_string(kMaxSchemaDepth) + " levels at " + ptr);
  if (s.is_boolean()) {
    if (s.get<bool>()) return std::string("json-value");
    return schema_error("schema 'false' at " + ptr + " matches nothing");
  }
  if (!s.is_object()) return schema_error("schema at " + ptr + " is not an object or a boolean");
  LL3_RETURN_IF_ERROR(check_keywords(s, ptr));
  if (s.contains("$ref")) return visit_ref(s, ptr, depth);
  if (s.contains("allOf")) return visit_all_of(s, ptr, hint, depth);
  for (const char* key : {"anyOf", "oneOf"})
    if (s.contains(key)) return visit_any_of(s, key, ptr, hint, depth);
  if (s.contains("const") || s.contains("enum")) return visit_values(s, ptr, hint);

  std::vector<std::string> types;
  if (s.contains("type")) {
    const ojson& t = s["type"];
    if (t.is_string()) types.push_back(t.get<std::string>());
    else if (t.is_array())
      for (const auto& x : t) types.push_back(x.is_string() ? x.get<std::string>() : "");
    else return schema_error("'type' at " + ptr + " is not a string or an array");
  } else {  // no type: any value, but the keywords say which kinds they constrain
    auto has = [&](std::initializer_list<const char*> keys) {
      for (const char* k : keys)
        if (s.contains(k)) return true;
      return false;
    };
    if (has({"properties", "required", "additionalProperties"})) types.push_back("object");
    if (has({"items", "prefixItems", "additionalItems", "minItems", "maxItems"})) types.push_back("array");
    if (has({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
    if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) types.push_back("number");
    if (types.empty()) return std::string("json-value");
  }
  // "number" already holds every integer.
  bool has_number = std::find(types.begin(), types.end(), "number") != types.end();
  std::vector<std::string> alts;
  for (const std::string& t : types) {
    if (t == "integer" && has_number) continue;
    auto e = visit_type(s, t, ptr, hint, depth);
    if (!e.ok()) return e;
    alts.push_back(*e);
  }
  if (nullable(s) && std::find(types.begin(), types.end(), "null") == types.end()) alts.push_back("json-null");
  if (alts.empty()) return schema_error("'type' at " + ptr + " lists no type");
  return alternatives(alts);
}

Result<std::string> SchemaCompiler::visit_type(const ojson& s, const std::string& type, const std::string& ptr,
                                               const std::string& hint, int depth) {
  if (type == "null") return std::string("json-null");
  if (type == "boolean") return std::string("json-boolean");
  if (type == "string") return string_expr(s, ptr, hint);
  if (type == "integer") return integer_expr(s, ptr, hint);
  if (type == "number") return number_expr(s, ptr, hint);
  if (type == "object") return object_expr(s, ptr, hint, depth);
  if (type == "array") return array_expr(s, ptr, hint, depth);
  return schema_error("'type' at " + ptr + ": unknown type \"" + type + "\"");
}

Result<std::string> SchemaCompiler::visit_ref(const ojson& s, const std::string& ptr, int depth) {
  std::string other = other_validation_keyword(s, {"$ref"});
  if (!other.empty()) return schema_error("'$ref' at " + ptr + " alongside '" + other + "' is not supported");
  auto target = resolve(s["$ref"], ptr);
  if (!target.ok()) return target.status();
  std::string key = s["$ref"].get<std::string>();
  auto it = ref_rules_.find(key);
  if (it != ref_rules_.end()) return it->second;
  std::string hint = key.substr(key.rfind('/') + 1);
  std::string name = rule_name(hint);
  ref_rules_[key] = name;  // before compiling it: a recursive use finds the name
  size_t slot = rules_.size();
  rules_.emplace_back(name, "");
  auto e = visit(**target, key, hint, depth + 1);
  if (!e.ok()) return e;
  rules_[slot].second = *e;
  return name;
}

Result<std::string> SchemaCompiler::visit_values(const ojson& s, const std::string& ptr, const std::string& hint) {
  std::string other = other_validation_keyword(s, {"const", "enum", "type", "nullable"});
  if (!other.empty()) {
    return schema_error("'" + other + "' at " + ptr + " alongside '" + (s.contains("const") ? "const" : "enum") +
                        "' is not supported");
  }
  std::vector<ojson> values;
  if (s.contains("const")) {
    values.push_back(s["const"]);
  } else {
    if (!s["enum"].is_array()) return schema_error("'enum' at " + ptr + " is not an array");
    for (const auto& v : s["enum"]) values.push_back(v);
  }
  if (s.contains("enum") && s.contains("const")) {
    bool found = false;
    for (const auto& v : s["enum"]) found = found || v == s["const"];
    if (!found) return schema_error("'const' at " + ptr + " is not in 'enum': nothing matches");
  }
  // A value must also be of the schema's type, when one is given.
  auto type_ok = [&](const ojson& v) {
    if (!s.contains("type")) return true;
    std::vector<std::string> ts;
    if (s["type"].is_string()) ts.push_back(s["type"].get<std::string>());
    else if (s["type"].is_array())
      for (const auto& t : s["type"]) ts.push_back(t.is_string() ? t.get<std::string>() : "");
    for (const auto& t : ts) {
      if ((t == "null" && v.is_null()) || (t == "boolean" && v.is_boolean()) || (t == "object" && v.is_object()) ||
          (t == "array" && v.is_array()) || (t == "string" && v.is_string()) || (t == "number" && v.is_number()) ||
          (t == "integer" && v.is_number() && v.get<double>() == std::floor(v.get<double>())))
        return true;
    }
    return false;
  };
  std::vector<std::string> alts;
  for (const auto& v : values)
    if (type_ok(v)) alts.push_back(gbnf_literal(v.dump(-1, ' ', false, ojson::error_handler_t::replace)));
  if (nullable(s)) alts.push_back("json-null");
  if (alts.empty()) return schema_error("'enum' at " + ptr + ": no value has the schema's type");
  return add_rule(hint, alternatives(alts));
}

}  // namespace ll3::grammar
