// Jinja subset: filters and tests (jinja2's built-ins with Hugging Face's tojson).
#include <algorithm>
#include <cmath>
#include <string_view>

#include "core/status.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/unicode.h"

namespace ll3::jinja {
namespace {

std::string strip_ws(const std::string& s) {
  // str.strip(): whole characters from both ends
  size_t b = 0, e = s.size();
  while (b < e) {
    size_t k = b;
    int32_t cp = utf8_next(s, k);
    if (cp < 0 || !py_isspace(uint32_t(cp))) break;
    b = k;
  }
  while (e > b) {
    size_t st = e - 1;
    while (st > b && (uint8_t(s[st]) & 0xC0) == 0x80) --st;
    size_t k = st;
    int32_t cp = utf8_next(s, k);
    if (cp < 0 || k != e || !py_isspace(uint32_t(cp))) break;
    e = st;
  }
  return s.substr(b, e - b);
}

std::string str_arg(const std::optional<Value>& v, const std::string& dflt) {
  if (!v || v->is_none() || v->is_undefined()) return dflt;
  if (!v->is_str()) throw Error("expected a string argument");
  return v->s;
}

Args rest_args(const Args& a, size_t from) {
  Args r;
  for (size_t k = from; k < a.pos.size(); ++k) r.pos.push_back(a.pos[k]);
  r.kw = a.kw;
  return r;
}

// Attribute lookup with dots ("a.b") as jinja2's attribute= arguments allow.
Value attr_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    cur = cur.is_undefined() ? cur : get_attr(cur, part);
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return cur;
}

std::string lower_ascii(std::string s) {
  for (char& c : s) c = char(std::tolower(uint8_t(c)));
  return s;
}

}  // namespace

bool apply_test(Interp& in, const std::string& name, const Value& v, const Args& a) {
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind == K::Bool;
  if (name == "true") return v.kind == K::Bool && v.b;
  if (name == "false") return v.kind == K::Bool && !v.b;
  if (name == "integer") return v.kind == K::Int;
  if (name == "float") return v.kind == K::Float;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_str();
  if (name == "mapping") return v.is_dict();
  // Strings are iterable and sequences in Python (so are jinja2's Undefined objects).
  if (name == "iterable") return v.is_str() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence") return v.is_str() || v.is_list() || v.is_dict();
  if (name == "callable") return v.kind == K::Func;
  if (name == "lower") return v.is_str() && lower_ascii(v.s) == v.s;
  if (name == "upper")
    return v.is_str() && v.s == [&] {
      std::string s = v.s;
      for (char& c : s) c = char(std::toupper(uint8_t(c)));
      return s;
    }();
  if (name == "even" || name == "odd") {
    if (v.kind != K::Int) throw Error("'" + name + "' test needs an integer");
    return (v.i % 2 == 0) == (name == "even");
  }
  if (name == "divisibleby") {
    auto d = a.get(0, "num");
    if (v.kind != K::Int || !d || d->kind != K::Int || d->i == 0)
      throw Error("bad divisibleby test");
    return v.i % d->i == 0;
  }
  auto other = [&] {
    auto o = a.get(0, "other");
    if (!o) throw Error("test '" + name + "' needs an argument");
    return *o;
  };
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, other());
  if (name == "ne" || name == "!=") return !equal(v, other());
  if (name == "lt" || name == "lessthan" || name == "<") return less(v, other());
  if (name == "gt" || name == "greaterthan" || name == ">") return less(other(), v);
  if (name == "le" || name == "<=") return !less(other(), v);
  if (name == "ge" || name == ">=") return !less(v, other());
  if (name == "in") return binary_op("in", v, other()).b;
  if (name == "sameas") {
    Value o = other();
    if (v.is_list() && o.is_list()) return v.list == o.list;
    if (v.is_dict() && o.is_dict()) return v.dict == o.dict;
    return equal(v, o) && v.kind == o.kind &&
           (v.kind == K::None || v.kind == K::Bool || v.kind == K::Undefined);
  }
  (void)in;
  throw Error("unknown test '" + name + "'");
}

namespace {

// One function per filter (or per family of filters that share a body); `name` tells a family's
// members apart. The table below maps each name jinja2 knows to its function.
using Filter = Value (*)(Interp& in, const std::string& name, const Value& v, const Args& a);

// --- strings ---

Value filter_trim(Interp& in, const std::string&, const Value& v, const Args& a) {
  auto chars = a.get(0, "chars");
  std::string s = to_str(v);
  if (chars && chars->is_str()) return call_method(in, Value::str(s), "strip", a);
  return Value::str(strip_ws(s));
}

Value filter_tojson(Interp&, const std::string&, const Value& v, const Args& a) {
  // transformers: json.dumps(x, ensure_ascii=False, indent=indent, sort_keys=False)
  if (v.is_undefined()) throw Error("Object of type Undefined is not JSON serializable");
  auto ind = a.get(0, "indent");
  int indent = ind && ind->kind == Value::Kind::Int ? int(std::clamp<int64_t>(ind->i, 0, 64)) : -1;
  return Value::str(to_json(v, indent));
}

Value filter_string(Interp&, const std::string&, const Value& v, const Args&) {
  return Value::str(to_str(v));
}

Value filter_safe(Interp&, const std::string&, const Value& v, const Args&) { return v; }

Value filter_escape(Interp&, const std::string&, const Value& v, const Args&) {
  std::string s = to_str(v), out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value::str(out);
}

// upper, lower, capitalize, title: the str method of the same name.
Value filter_case(Interp& in, const std::string& name, const Value& v, const Args&) {
  return call_method(in, Value::str(to_str(v)), name, {});
}

Value filter_replace(Interp& in, const std::string&, const Value& v, const Args& a) {
  Args r;
  r.pos = {a.get(0, "old").value_or(Value::str("")), a.get(1, "new").value_or(Value::str(""))};
  if (auto c = a.get(2, "count")) r.pos.push_back(*c);
  return call_method(in, Value::str(to_str(v)), "replace", r);
}

Value filter_join(Interp&, const std::string&, const Value& v, const Args& a) {
  std::string sep = str_arg(a.get(0, "d"), "");
  auto attr = a.get(1, "attribute");
  std::string out;
  List items = iterate(v);
  for (size_t k = 0; k < items.size(); ++k) {
    Value x = attr && attr->is_str() ? attr_path(items[k], attr->s) : items[k];
    out += (k ? sep : "") + to_str(x);
  }
  return Value::str(out);
}

// The indent filter's pad: width= is a count of spaces or (a string) the pad itself.
std::string indent_pad(const Args& a) {
  int64_t width = 4;
  std::string pad;
  if (auto w = a.get(0, "width")) {
    if (w->is_str())
      pad = w->s;
    else
      width = w->kind == Value::Kind::Int ? w->i : 4;
  }
  if (pad.empty()) pad = std::string(size_t(std::clamp<int64_t>(width, 0, 256)), ' ');
  return pad;
}

Value filter_indent(Interp&, const std::string&, const Value& v, const Args& a) {
  std::string pad = indent_pad(a);
  bool first = a.get(1, "first").value_or(Value::boolean(false)).truthy();
  bool blank = a.get(2, "blank").value_or(Value::boolean(false)).truthy();
  std::string s = to_str(v), out;
  size_t pos = 0;
  bool first_line = true;
  while (pos <= s.size()) {
    size_t nl = s.find('\n', pos);
    std::string line = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    bool add = first_line ? first : (blank || !strip_ws(line).empty());
    out += (add ? pad : "") + line;
    if (nl == std::string::npos) break;
    out += '\n';
    pos = nl + 1;
    first_line = false;
  }
  return Value::str(out);
}

Value filter_wordcount(Interp& in, const std::string&, const Value& v, const Args&) {
  return Value::integer(call_method(in, Value::str(to_str(v)), "split", {}).list->size());
}

// --- any value ---

Value filter_length(Interp&, const std::string&, const Value& v, const Args&) {
  return Value::integer(v.is_undefined() ? 0 : v.length());
}

Value filter_default(Interp&, const std::string&, const Value& v, const Args& a) {
  bool boolean = a.get(1, "boolean").value_or(Value::boolean(false)).truthy();
  if (v.is_undefined() || (boolean && !v.truthy()))
    return a.get(0, "default_value").value_or(Value::str(""));
  return v;
}

// --- sequences and mappings ---

Value filter_list(Interp&, const std::string&, const Value& v, const Args&) {
  return Value::new_list(iterate(v));
}

Value filter_first_last(Interp&, const std::string& name, const Value& v, const Args&) {
  List items = iterate(v);
  if (items.empty()) return Value::undefined();
  return name == "first" ? items.front() : items.back();
}

Value filter_reverse(Interp&, const std::string&, const Value& v, const Args&) {
  if (v.is_str()) return slice(v, std::nullopt, std::nullopt, -1);
  List items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::new_list(std::move(items));
}

Value filter_items(Interp& in, const std::string&, const Value& v, const Args&) {
  if (v.is_undefined()) return Value::new_list();
  if (!v.is_dict()) throw Error("items filter needs a mapping");
  return call_method(in, v, "items", {});
}

Value filter_dictsort(Interp& in, const std::string&, const Value& v, const Args&) {
  if (!v.is_dict()) throw Error("dictsort filter needs a mapping");
  List items = *call_method(in, v, "items", {}).list;
  std::stable_sort(items.begin(), items.end(), [](const Value& x, const Value& y) {
    return lower_ascii((*x.list)[0].s) < lower_ascii((*y.list)[0].s);
  });
  return Value::new_list(std::move(items));
}

// select, reject: the items that pass (or fail) a test, or are truthy without one.
Value filter_select(Interp& in, const std::string& name, const Value& v, const Args& a) {
  List out;
  auto test = a.get(0, "test");
  Args targs = rest_args(a, 1);
  for (const auto& x : iterate(v)) {
    bool r = test && test->is_str() ? apply_test(in, test->s, x, targs) : x.truthy();
    if (r == (name == "select")) out.push_back(x);
  }
  return Value::new_list(std::move(out));
}

// selectattr, rejectattr: as select and reject, on one attribute of each item.
Value filter_selectattr(Interp& in, const std::string& name, const Value& v, const Args& a) {
  std::string attr = str_arg(a.get(0, "attribute"), "");
  auto test = a.get(1, "test");
  Args targs = rest_args(a, 2);
  List out;
  for (const auto& x : iterate(v)) {
    Value av = attr_path(x, attr);
    bool r = test && test->is_str() ? apply_test(in, test->s, av, targs) : av.truthy();
    if (r == (name == "selectattr")) out.push_back(x);
  }
  return Value::new_list(std::move(out));
}

// map(attribute=...) takes an attribute of each item; map('filter', ...) applies a filter.
Value filter_map(Interp& in, const std::string&, const Value& v, const Args& a) {
  List out;
  auto attr = a.get(99, "attribute");
  if (attr && attr->is_str()) {
    auto dflt = a.get(99, "default");
    for (const auto& x : iterate(v)) {
      Value r = attr_path(x, attr->s);
      out.push_back(r.is_undefined() && dflt ? *dflt : r);
    }
  } else {
    auto f = a.get(0, "filter");
    if (!f || !f->is_str()) throw Error("map needs a filter name or attribute=");
    Args fargs = rest_args(a, 1);
    for (const auto& x : iterate(v)) out.push_back(apply_filter(in, f->s, x, fargs));
  }
  return Value::new_list(std::move(out));
}

Value filter_unique(Interp&, const std::string&, const Value& v, const Args&) {
  List out;
  for (const auto& x : iterate(v)) {
    bool seen = false;
    for (const auto& y : out) seen = seen || equal(x, y);
    if (!seen) out.push_back(x);
  }
  return Value::new_list(std::move(out));
}

Value filter_sort(Interp&, const std::string&, const Value& v, const Args& a) {
  List items = iterate(v);
  bool rev = a.get(0, "reverse").value_or(Value::boolean(false)).truthy();
  auto attr = a.get(2, "attribute");
  auto key = [&](const Value& x) {
    Value k = attr && attr->is_str() ? attr_path(x, attr->s) : x;
    return k.is_str() ? Value::str(lower_ascii(k.s)) : k;
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return rev ? less(key(y), key(x)) : less(key(x), key(y));
  });
  return Value::new_list(std::move(items));
}

Value filter_sum(Interp&, const std::string&, const Value& v, const Args& a) {
  Value acc = a.get(1, "start").value_or(Value::integer(0));
  for (const auto& x : iterate(v)) acc = binary_op("+", acc, x);
  return acc;
}

Value filter_min_max(Interp&, const std::string& name, const Value& v, const Args&) {
  List items = iterate(v);
  if (items.empty()) return Value::undefined();
  Value best = items[0];
  for (const auto& x : items)
    if (name == "min" ? less(x, best) : less(best, x)) best = x;
  return best;
}

// --- numbers ---

Value filter_abs(Interp&, const std::string&, const Value& v, const Args&) {
  if (v.kind == Value::Kind::Int) return Value::integer(v.i < 0 ? -v.i : v.i);
  if (v.kind == Value::Kind::Float) return Value::number(std::fabs(v.f));
  throw Error("abs needs a number");
}

Value filter_int(Interp&, const std::string&, const Value& v, const Args& a) {
  using K = Value::Kind;
  if (v.kind == K::Int) return v;
  if (v.kind == K::Float) return Value::integer(int64_t(v.f));
  if (v.kind == K::Bool) return Value::integer(v.b);
  if (v.is_str()) {
    char* end = nullptr;
    std::string s = strip_ws(v.s);
    long long x = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0') return Value::integer(x);
  }
  return a.get(0, "default").value_or(Value::integer(0));
}

Value filter_float(Interp&, const std::string&, const Value& v, const Args& a) {
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_str()) {
    char* end = nullptr;
    std::string s = strip_ws(v.s);
    double x = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value::number(x);
  }
  return a.get(0, "default").value_or(Value::number(0));
}

Value filter_round(Interp&, const std::string&, const Value& v, const Args& a) {
  int64_t prec = 0;
  if (auto p = a.get(0, "precision"); p && p->kind == Value::Kind::Int) prec = p->i;
  std::string method = str_arg(a.get(1, "method"), "common");
  double m = std::pow(10.0, double(prec)), x = v.as_double() * m;
  double r = method == "floor" ? std::floor(x) : method == "ceil" ? std::ceil(x) : std::round(x);
  return Value::number(r / m);
}

struct NamedFilter {
  std::string_view name;
  Filter fn;
};

constexpr NamedFilter kFilters[] = {
    {"trim", filter_trim},
    {"tojson", filter_tojson},
    {"length", filter_length},
    {"count", filter_length},
    {"string", filter_string},
    {"safe", filter_safe},
    {"e", filter_escape},
    {"escape", filter_escape},
    {"upper", filter_case},
    {"lower", filter_case},
    {"capitalize", filter_case},
    {"title", filter_case},
    {"replace", filter_replace},
    {"default", filter_default},
    {"d", filter_default},
    {"join", filter_join},
    {"list", filter_list},
    {"first", filter_first_last},
    {"last", filter_first_last},
    {"reverse", filter_reverse},
    {"items", filter_items},
    {"dictsort", filter_dictsort},
    {"select", filter_select},
    {"reject", filter_select},
    {"selectattr", filter_selectattr},
    {"rejectattr", filter_selectattr},
    {"map", filter_map},
    {"unique", filter_unique},
    {"sort", filter_sort},
    {"sum", filter_sum},
    {"min", filter_min_max},
    {"max", filter_min_max},
    {"abs", filter_abs},
    {"int", filter_int},
    {"float", filter_float},
    {"round", filter_round},
    {"indent", filter_indent},
    {"wordcount", filter_wordcount},
};

}  // namespace

Value apply_filter(Interp& in, const std::string& name, const Value& v, const Args& a) {
  for (const auto& f : kFilters)
    if (f.name == name) return f.fn(in, name, v, a);
  throw Error("unknown filter '" + name + "'");
}

}  // namespace ll3::jinja
