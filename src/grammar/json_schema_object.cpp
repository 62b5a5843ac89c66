// Objects and arrays. Properties come in schema order, optional ones optional; members are
// written "key ws : ws value ws" with the comma first, so every choice point is decided by one
// byte (',' or '}') instead of by parallel whitespace parses.
#include <algorithm>
#include <map>

#include "grammar/json_schema_compiler.h"
#include "grammar/json_schema_internal.h"
#include "grammar/utf8_ranges.h"

namespace ll3::grammar {

using ojson = nlohmann::ordered_json;
using namespace schema;

namespace {

struct Member {
  std::string name;
  std::string expr;  // "key" ws ":" ws value ws
  bool required;
};

}  // namespace

Result<std::string> SchemaCompiler::object_expr(const ojson& s, const std::string& ptr, const std::string& hint, int depth) {
  bool has_props = s.contains("properties"), has_req = s.contains("required");
  const ojson* ap = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
  if (!has_props && !has_req && (!ap || (ap->is_boolean() && ap->get<bool>()))) return std::string("json-object");
  if (has_props && !s["properties"].is_object()) return schema_error("'properties' at " + ptr + " is not an object");
  std::vector<std::string> required;
  if (has_req) {
    if (!s["required"].is_array()) return schema_error("'required' at " + ptr + " is not an array");
    for (const auto& r : s["required"]) {
      if (!r.is_string()) return schema_error("'required' at " + ptr + " lists a non-string");
      required.push_back(r.get<std::string>());
    }
  }
  auto is_required = [&](const std::string& n) { return std::find(required.begin(), required.end(), n) != required.end(); };
  auto member = [](const std::string& name, const std::string& value) {
    return gbnf_literal(ojson(name).dump(-1, ' ', false, ojson::error_handler_t::replace)) + " ws \":\" ws " + value + " ws";
  };

  // Additional properties: with a schema (or true) they may follow the listed ones.
  std::string extra_value;
  if (ap && !(ap->is_boolean() && !ap->get<bool>())) {
    auto e = visit(*ap, pointer_child(ptr, "additionalProperties"), hint + "-extra", depth + 1);
    if (!e.ok()) return e;
    extra_value = *e;
  }
  std::vector<Member> members;
  std::vector<std::string> names;
  if (has_props) {
    for (const auto& [name, sub] : s["properties"].items()) {
      names.push_back(name);
      if (sub.is_boolean() && !sub.get<bool>()) {  // a property that may not appear
        if (is_required(name)) return schema_error("'required' at " + ptr + " lists '" + name + "', whose schema is false");
        continue;
      }
      auto e = visit(sub, pointer_child(pointer_child(ptr, "properties"), name), hint + "-" + name, depth + 1);
      if (!e.ok()) return e;
      members.push_back(Member{name, member(name, *e), is_required(name)});
    }
  }
  for (const std::string& name : required) {
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    if (ap && ap->is_boolean() && !ap->get<bool>()) {
      return schema_error("'required' at " + ptr + " lists '" + name + "', which additionalProperties false forbids");
    }
    names.push_back(name);
    members.push_back(Member{name, member(name, extra_value.empty() ? "json-value" : extra_value), true});
  }
  std::string extra = extra_value.empty() ? "" : member_rule_for_extra(names, hint, extra_value);
  size_t n = members.size();
  bool all_required = std::all_of(members.begin(), members.end(), [](const Member& m) { return m.required; });
  if (all_required && extra.empty()) {  // the common strict case: one fixed sequence
    std::string body = "\"{\" ws";
    for (size_t i = 0; i < n; ++i) body += (i ? " \",\" ws " : " ") + members[i].expr;
    return add_rule(hint, body + " \"}\"");
  }
  // after[i]: members i.. once one has been written (each then starts with a comma);
  // first[i]: members i.. before any was written (at least one).
  std::vector<std::string> after(n + 1), first(n + 1);
  std::string base = rule_name(hint);
  after[n] = extra.empty() ? "" : "( \",\" ws " + extra + " )*";
  first[n] = extra.empty() ? "" : extra + " " + after[n];
  for (size_t i = n; i-- > 0;) {
    std::string take = "\",\" ws " + members[i].expr + (after[i + 1].empty() ? "" : " " + after[i + 1]);
    std::string a = members[i].required ? take : "( " + take + (after[i + 1].empty() ? " )?" : " | " + after[i + 1] + " )");
    if (i > 0) after[i] = add_rule(base + "-after", a);  // after[0] is never needed
    std::string head = members[i].expr + (after[i + 1].empty() ? "" : " " + after[i + 1]);
    if (!members[i].required && !first[i + 1].empty()) head = head + " | " + first[i + 1];
    first[i] = add_rule(base + "-first", head);
  }
  bool may_be_empty = std::none_of(members.begin(), members.end(), [](const Member& m) { return m.required; });
  std::string body = "\"{\" ws " + (may_be_empty ? "( " + first[0] + " )?" : first[0]) + " \"}\"";
  rules_.emplace_back(base, body);
  return base;
}

// The member of an additional property: a key that is none of the listed names, and a value.
// The key is a string of unescaped characters (a subset of all keys: enough to write any name
// that needs no escape) that differs from each name, built as a trie of the names: at each node
// the key may end (unless that is a name), go on with a name's next character, or leave the
// names behind with any other character.
std::string SchemaCompiler::member_rule_for_extra(const std::vector<std::string>& names, const std::string& hint,
                                                  const std::string& value) {
  struct Node {
    std::map<uint32_t, size_t> next;
    bool is_name = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& name : names) {
    std::string enc = ojson(name).dump(-1, ' ', false, ojson::error_handler_t::replace);
    enc = enc.substr(1, enc.size() - 2);
    if (enc.find('\\') != std::string::npos) continue;  // never written without escapes
    size_t at = 0;
    for (size_t i = 0; i < enc.size();) {
      uint32_t cp = decode_utf8(enc, i);
      auto it = trie[at].next.find(cp);
      if (it == trie[at].next.end()) {
        trie.push_back(Node{});
        it = trie[at].next.emplace(cp, trie.size() - 1).first;
      }
      at = it->second;
    }
    trie[at].is_name = true;
  }
  const std::string raw_char = "[^\"\\\\\\x00-\\x1F]";
  std::string base = rule_name(hint + "-key");
  std::vector<std::string> rule(trie.size());
  for (size_t v = 0; v < trie.size(); ++v) rule[v] = v == 0 ? base : rule_name(hint + "-key");
  for (size_t v = 0; v < trie.size(); ++v) {
    std::vector<std::string> alts;
    if (!trie[v].is_name) alts.push_back("\"\"");
    CodepointRanges taken{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
    for (const auto& [cp, child] : trie[v].next) {
      std::string ch;
      append_utf8(ch, cp);
      alts.push_back(gbnf_literal(ch) + " " + rule[child]);
      taken.emplace_back(cp, cp);
    }
    CodepointRanges rest = complement_ranges(normalize_ranges(taken));
    if (!rest.empty()) alts.push_back(gbnf_class(rest) + " " + raw_char + "*");
    std::string body;
    for (size_t k = 0; k < alts.size(); ++k) body += (k ? " | " : "") + alts[k];
    rules_.emplace_back(rule[v], body);
  }
  return add_rule(hint + "-extra-member", "\"\\\"\" " + base + " \"\\\"\" ws \":\" ws " + value + " ws");
}

Result<std::string> SchemaCompiler::array_expr(const ojson& s, const std::string& ptr, const std::string& hint, int depth) {
  // Positional schemas (prefixItems, or the older array form of items), then the rest.
  std::vector<std::string> prefix;
  const ojson* rest = nullptr;
  bool rest_none = false;
  const ojson* tuple = s.contains("prefixItems") ? &s["prefixItems"] : (s.contains("items") && s["items"].is_array() ? &s["items"] : nullptr);
  std::string tuple_key = s.contains("prefixItems") ? "prefixItems" : "items";
  if (tuple) {
    if (!tuple->is_array()) return schema_error("'prefixItems' at " + ptr + " is not an array");
    for (size_t i = 0; i < tuple->size(); ++i) {
      auto e = visit((*tuple)[i], pointer_child(ptr, tuple_key) + "/" + std::to_string(i), hint + "-" + std::to_string(i), depth + 1);
      if (!e.ok()) return e;
      prefix.push_back(*e);
    }
  }
  std::string rest_key = tuple_key == "items" && tuple ? "additionalItems" : "items";
  if (s.contains(rest_key)) rest = &s[rest_key];
  if (rest && rest->is_boolean() && !rest->get<bool>()) rest_none = true;
  std::string rest_expr = "json-value";
  if (rest && !rest_none) {
    auto e = visit(*rest, pointer_child(ptr, rest_key), hint + "-item", depth + 1);
    if (!e.ok()) return e;
    rest_expr = *e;
  }
  int64_t lo = 0, hi = -1;  // hi < 0: unbounded
  if (s.contains("minItems")) {
    auto v = count_keyword(s, "minItems", ptr);
    if (!v.ok()) return v.status();
    lo = *v;
  }
  if (s.contains("maxItems")) {
    auto v = count_keyword(s, "maxItems", ptr);
    if (!v.ok()) return v.status();
    hi = *v;
  }
  int64_t k = int64_t(prefix.size());
  if (rest_none && (hi < 0 || hi > k)) hi = k;
  if (hi >= 0 && hi < lo) return schema_error("'minItems' at " + ptr + " is more than the array may hold: nothing matches");
  if (hi == 0) return add_rule(hint, "\"[\" ws \"]\"");
  auto item = [&](int64_t i) { return (i < k ? prefix[size_t(i)] : rest_expr) + " ws"; };
  // tail(i): items i.. once i items are written: the positional ones as rules, then the
  // uniform rest as a bounded or unbounded repetition.
  std::string tail;
  {
    int64_t first_uniform = std::max<int64_t>(k, 1);
    int64_t need = std::max<int64_t>(0, lo - first_uniform);
    if (hi < 0) {
      tail = "( \",\" ws " + item(first_uniform) + " )" + (need ? "{" + std::to_string(need) + ",}" : "*");
    } else if (hi > first_uniform) {
      tail = "( \",\" ws " + item(first_uniform) + " ){" + std::to_string(need) + "," + std::to_string(hi - first_uniform) + "}";
    }
    for (int64_t i = first_uniform - 1; i >= 1; --i) {
      if (hi >= 0 && i >= hi) {  // maxItems cuts the positional items short
        tail.clear();
        continue;
      }
      std::string take = "\",\" ws " + item(i) + (tail.empty() ? "" : " " + tail);
      tail = add_rule(hint + "-tail", i >= lo ? "( " + take + " )?" : take);
    }
  }
  std::string items = item(0) + (tail.empty() ? "" : " " + tail);
  std::string body = "\"[\" ws " + (lo == 0 ? "( " + items + " )?" : items) + " \"]\"";
  return add_rule(hint, body);
}

}  // namespace ll3::grammar
