// allOf (merged into one object schema), anyOf, oneOf (only when its branches cannot both
// match: then it is anyOf) and the scalar types.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "grammar/json_schema_compiler.h"
#include "grammar/json_schema_internal.h"

namespace ll3::grammar {

using ojson = nlohmann::ordered_json;
using namespace schema;

namespace {

constexpr int64_t kMaxLengthBound = 10000;
constexpr double kMaxIntBound = 1e18;

// What a oneOf branch can be: its JSON types (a bit each; "number" also sets integer), its
// values when it lists them, and for objects the values of required const/enum properties.
enum : unsigned { kNull = 1, kBool = 2, kInt = 4, kFrac = 8, kString = 16, kArray = 32, kObject = 64, kAll = 127 };

struct Shape {
  unsigned types = kAll;
  std::optional<std::vector<ojson>> values;
  std::map<std::string, std::vector<ojson>> tags;
};

unsigned value_types(const ojson& v) {
  if (v.is_null()) return kNull;
  if (v.is_boolean()) return kBool;
  if (v.is_number()) return v.get<double>() == std::floor(v.get<double>()) ? kInt : kFrac;
  if (v.is_string()) return kString;
  if (v.is_array()) return kArray;
  return kObject;
}

unsigned type_bits(const std::string& t) {
  if (t == "null") return kNull;
  if (t == "boolean") return kBool;
  if (t == "integer") return kInt;
  if (t == "number") return kInt | kFrac;
  if (t == "string") return kString;
  if (t == "array") return kArray;
  if (t == "object") return kObject;
  return kAll;
}

std::optional<std::vector<ojson>> listed_values(const ojson& s) {
  if (!s.is_object()) return std::nullopt;
  if (s.contains("const")) return std::vector<ojson>{s["const"]};
  if (s.contains("enum") && s["enum"].is_array()) return std::vector<ojson>(s["enum"].begin(), s["enum"].end());
  return std::nullopt;
}

bool disjoint_values(const std::vector<ojson>& a, const std::vector<ojson>& b) {
  for (const auto& x : a)
    for (const auto& y : b)
      if (x == y) return false;
  return true;
}

}  // namespace

// --- allOf, anyOf, oneOf ----------------------------------------------------------------------

Result<std::string> SchemaCompiler::visit_all_of(const ojson& s, const std::string& ptr, const std::string& hint, int depth) {
  std::string where = pointer_child(ptr, "allOf");
  if (!s["allOf"].is_array()) return schema_error("'allOf' at " + where + " is not an array");
  // Merged key by key: the branches may add properties and required names; any other keyword
  // must agree wherever it appears. additionalProperties in a branch only sees that branch's
  // properties, so it is accepted when no other branch adds properties it does not list.
  ojson merged = s;
  merged.erase("allOf");
  std::vector<const ojson*> parts{&s};
  for (size_t i = 0; i < s["allOf"].size(); ++i) {
    const ojson* b = &s["allOf"][i];
    for (int hops = 0; b->is_object() && b->contains("$ref") && hops < 16; ++hops) {
      auto t = resolve((*b)["$ref"], where + "/" + std::to_string(i));
      if (!t.ok()) return t.status();
      b = *t;
    }
    if (b->is_boolean() && b->get<bool>()) continue;
    if (!b->is_object()) return schema_error("'allOf' at " + where + "/" + std::to_string(i) + ": only object schemas can be merged");
    LL3_RETURN_IF_ERROR(check_keywords(*b, where + "/" + std::to_string(i)));
    parts.push_back(b);
    for (const auto& [k, v] : b->items()) {
      if (is_annotation(k)) continue;
      if (k == "allOf" || k == "$ref" || k == "anyOf" || k == "oneOf") {
        return schema_error("'allOf' at " + where + ": '" + k + "' inside a branch is not supported");
      }
      if (k == "properties" && v.is_object()) {
        ojson& props = merged["properties"];
        for (const auto& [name, sub] : v.items()) {
          if (props.contains(name) && props[name] != sub) {
            return schema_error("'allOf' at " + where + ": property '" + name + "' defined differently in two branches");
          }
          props[name] = sub;
        }
      } else if (k == "required" && v.is_array()) {
        ojson& req = merged["required"];
        for (const auto& name : v)
          if (std::find(req.begin(), req.end(), name) == req.end()) req.push_back(name);
      } else if (merged.contains(k) && merged[k] != v) {
        return schema_error("'allOf' at " + where + ": branches disagree on '" + k + "'");
      } else {
        merged[k] = v;
      }
    }
  }
  for (const ojson* p : parts) {
    if (!p->contains("additionalProperties")) continue;
    const ojson& own = p->contains("properties") ? (*p)["properties"] : ojson::object();
    for (const ojson* q : parts) {
      if (q == p || !q->contains("properties")) continue;
      for (const auto& [name, sub] : (*q)["properties"].items()) {
        if (!own.contains(name)) {
          return schema_error("'allOf' at " + where + ": 'additionalProperties' of one branch would apply to property '" +
                              name + "' of another; not supported");
        }
      }
    }
  }
  return visit(merged, ptr, hint, depth + 1);
}

Result<std::string> SchemaCompiler::visit_any_of(const ojson& s, const std::string& key, const std::string& ptr,
                                                 const std::string& hint, int depth) {
  std::string where = pointer_child(ptr, key);
  std::string other;
  for (const auto& [k, v] : s.items())
    if (is_validation(k) && k != key && k != "nullable") other = k;
  if (!other.empty()) return schema_error("'" + key + "' at " + ptr + " alongside '" + other + "' is not supported");
  const ojson& branches = s[key];
  if (!branches.is_array() || branches.empty()) return schema_error("'" + key + "' at " + where + " is not a non-empty array");
  if (key == "oneOf") {
    std::vector<Shape> shapes;
    for (const auto& b : branches) {
      Shape sh;
      const ojson* t = &b;
      for (int hops = 0; t->is_object() && t->contains("$ref") && hops < 16; ++hops) {
        auto r = resolve((*t)["$ref"], where);
        if (!r.ok()) break;
        t = *r;
      }
      sh.values = listed_values(*t);
      if (sh.values) {
        sh.types = 0;
        for (const auto& v : *sh.values) sh.types |= value_types(v);
      } else if (t->is_object() && t->contains("type")) {
        const ojson& ty = (*t)["type"];
        sh.types = 0;
        if (ty.is_string()) sh.types = type_bits(ty.get<std::string>());
        if (ty.is_array())
          for (const auto& x : ty) sh.types |= x.is_string() ? type_bits(x.get<std::string>()) : kAll;
        if (nullable(*t)) sh.types |= kNull;
      }
      if (sh.types == kObject && t->contains("properties") && t->contains("required") && (*t)["required"].is_array()) {
        for (const auto& name : (*t)["required"]) {
          if (!name.is_string() || !(*t)["properties"].contains(name.get<std::string>())) continue;
          auto vals = listed_values((*t)["properties"][name.get<std::string>()]);
          if (vals) sh.tags[name.get<std::string>()] = *vals;
        }
      }
      shapes.push_back(std::move(sh));
    }
    for (size_t a = 0; a < shapes.size(); ++a) {
      for (size_t b = a + 1; b < shapes.size(); ++b) {
        const Shape &x = shapes[a], &y = shapes[b];
        bool apart = (x.types & y.types) == 0 || (x.values && y.values && disjoint_values(*x.values, *y.values));
        for (const auto& [name, vals] : x.tags) {
          auto it = y.tags.find(name);
          apart = apart || (it != y.tags.end() && disjoint_values(vals, it->second));
        }
        if (!apart) {
          return schema_error("'oneOf' at " + where + " is not supported: branches " + std::to_string(a) + " and " +
                              std::to_string(b) + " may both match (only branches of different types, values or "
                              "required const properties are)");
        }
      }
    }
  }
  std::vector<std::string> alts;
  for (size_t i = 0; i < branches.size(); ++i) {
    auto e = visit(branches[i], where + "/" + std::to_string(i), hint, depth + 1);
    if (!e.ok()) return e;
    alts.push_back(*e);
  }
  if (nullable(s)) alts.push_back("json-null");
  std::string body;
  for (size_t k = 0; k < alts.size(); ++k) body += (k ? " | " : "") + alts[k];
  return add_rule(hint, body);
}

// --- scalars ----------------------------------------------------------------------------------

Result<int64_t> count_keyword(const ojson& s, const char* key, const std::string& ptr) {
  const ojson& v = s[key];
  if (!v.is_number() || v.get<double>() < 0 || v.get<double>() != std::floor(v.get<double>())) {
    return schema_error("'" + std::string(key) + "' at " + ptr + " is not a non-negative integer");
  }
  if (v.get<double>() > double(kMaxLengthBound)) {
    return schema_error("'" + std::string(key) + "' at " + ptr + " over " + std::to_string(kMaxLengthBound) +
                        " is not supported");
  }
  return int64_t(v.get<double>());
}

namespace {

// A bound: the value and whether it is exclusive; draft 4's boolean exclusiveMinimum /
// exclusiveMaximum make minimum / maximum exclusive.
struct Bound {
  double v;
  bool excl;
};

Result<std::optional<Bound>> bound(const ojson& s, bool lower, const std::string& ptr) {
  const char* incl = lower ? "minimum" : "maximum";
  const char* excl = lower ? "exclusiveMinimum" : "exclusiveMaximum";
  std::optional<Bound> out;
  bool draft4_excl = s.contains(excl) && s[excl].is_boolean() && s[excl].get<bool>();
  if (s.contains(incl)) {
    if (!s[incl].is_number()) return schema_error("'" + std::string(incl) + "' at " + ptr + " is not a number");
    out = Bound{s[incl].get<double>(), draft4_excl};
  }
  if (s.contains(excl) && !s[excl].is_boolean()) {
    if (!s[excl].is_number()) return schema_error("'" + std::string(excl) + "' at " + ptr + " is not a number");
    Bound b{s[excl].get<double>(), true};
    // The tighter of the two bounds applies.
    if (!out || (lower ? b.v >= out->v : b.v <= out->v)) out = b;
  }
  if (out && std::fabs(out->v) > kMaxIntBound) {
    return schema_error("'" + std::string(out->excl ? excl : incl) + "' at " + ptr + " beyond 1e18 is not supported");
  }
  return out;
}

}  // namespace

Result<std::string> SchemaCompiler::string_expr(const ojson& s, const std::string& ptr, const std::string& hint) {
  std::vector<std::string> kinds;
  for (const char* k : {"pattern", "format"})
    if (s.contains(k)) kinds.push_back(k);
  bool lengths = s.contains("minLength") || s.contains("maxLength");
  if (lengths) kinds.push_back(s.contains("minLength") ? "minLength" : "maxLength");
  if (kinds.size() > 1) {
    return schema_error("'" + kinds[1] + "' at " + ptr + " together with '" + kinds[0] + "' is not supported");
  }
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) return schema_error("'pattern' at " + ptr + " is not a string");
    auto e = pattern_string(s["pattern"].get<std::string>());
    if (!e.ok()) return schema_error("'pattern' at " + ptr + " is not supported: " + e.message());
    return add_rule(hint + "-pattern", *e);
  }
  if (s.contains("format")) {
    std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
    auto content = format_content(f);
    if (!content) return schema_error("'format' at " + ptr + " (\"" + f + "\") is not supported");
    return add_rule(f, "\"\\\"\" " + *content + " \"\\\"\"");
  }
  if (!lengths) return std::string("json-string");
  int64_t lo = 0, hi = -1;
  if (s.contains("minLength")) {
    auto v = count_keyword(s, "minLength", ptr);
    if (!v.ok()) return v.status();
    lo = *v;
  }
  if (s.contains("maxLength")) {
    auto v = count_keyword(s, "maxLength", ptr);
    if (!v.ok()) return v.status();
    hi = *v;
    if (hi < lo) return schema_error("'maxLength' at " + ptr + " is below 'minLength': nothing matches");
  }
  std::string rep = "{" + std::to_string(lo) + "," + (hi >= 0 ? std::to_string(hi) : "") + "}";
  return add_rule(hint + "-string", "\"\\\"\" json-char" + rep + " \"\\\"\"");
}

Result<std::string> SchemaCompiler::integer_expr(const ojson& s, const std::string& ptr, const std::string& hint) {
  auto lo = bound(s, true, ptr);
  if (!lo.ok()) return lo.status();
  auto hi = bound(s, false, ptr);
  if (!hi.ok()) return hi.status();
  if (!*lo && !*hi) return std::string("json-integer");
  std::optional<int64_t> a, b;
  if (*lo) a = int64_t((*lo)->excl ? std::floor((*lo)->v) + 1 : std::ceil((*lo)->v));
  if (*hi) b = int64_t((*hi)->excl ? std::ceil((*hi)->v) - 1 : std::floor((*hi)->v));
  if (a && b && *a > *b) return schema_error("integer bounds at " + ptr + " leave no value");
  return add_rule(hint + "-int", integer_range(a, b));
}

Result<std::string> SchemaCompiler::number_expr(const ojson& s, const std::string& ptr, const std::string& hint) {
  auto lo = bound(s, true, ptr);
  if (!lo.ok()) return lo.status();
  auto hi = bound(s, false, ptr);
  if (!hi.ok()) return hi.status();
  if (!*lo && !*hi) return std::string("json-number");
  // Exact decimal ranges are written for integer bounds only (values then in plain notation).
  for (const auto& b : {*lo, *hi}) {
    if (b && b->v != std::floor(b->v)) {
      return schema_error("a non-integer bound (" + ojson(b->v).dump() + ") on a number at " + ptr + " is not supported");
    }
  }
  std::optional<int64_t> a, b;
  if (*lo) a = int64_t((*lo)->v);
  if (*hi) b = int64_t((*hi)->v);
  if (a && b && (*a > *b || (*a == *b && ((*lo)->excl || (*hi)->excl)))) {
    return schema_error("number bounds at " + ptr + " leave no value");
  }
  std::string body = number_range(a, *lo && (*lo)->excl, b, *hi && (*hi)->excl);
  if (body.empty()) return schema_error("number bounds at " + ptr + " leave no value");
  return add_rule(hint + "-num", body);
}

}  // namespace ll3::grammar
