#include "tokenizer/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/status.h"
#include "tokenizer/unicode.h"

namespace ll3::jinja {

std::optional<Value> Args::get(size_t k, const char* name) const {
  if (k < pos.size()) return pos[k];
  for (const auto& [n, v] : kw)
    if (n == name) return v;
  return std::nullopt;
}

namespace {

[[noreturn]] void type_error(const char* what, const Value& a, const Value& b) {
  throw Error(strprintf("unsupported operand type(s) for %s: '%s' and '%s'", what, kind_name(a),
                        kind_name(b)));
}

std::vector<std::string> chars_of(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t j = i + 1;
    while (j < s.size() && (uint8_t(s[j]) & 0xC0) == 0x80) ++j;
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

bool is_strip_char(const std::string& s, size_t i, size_t* len,
                   const std::optional<std::string>& chars) {
  size_t k = i;
  int32_t cp = utf8_next(s, k);
  *len = k - i;
  if (!chars) return cp >= 0 && py_isspace(uint32_t(cp));
  for (const auto& c : chars_of(*chars))
    if (s.compare(i, *len, c) == 0) return true;
  return false;
}

std::string py_strip(const std::string& s, bool left, bool right,
                     const std::optional<std::string>& chars) {
  auto cs = chars_of(s);
  size_t b = 0, e = cs.size();
  auto strip_one = [&](const std::string& c) {
    size_t len;
    return is_strip_char(c, 0, &len, chars) && len == c.size();
  };
  if (left)
    while (b < e && strip_one(cs[b])) ++b;
  if (right)
    while (e > b && strip_one(cs[e - 1])) --e;
  std::string out;
  for (size_t k = b; k < e; ++k) out += cs[k];
  return out;
}

std::string ascii_upper(std::string s) {
  for (char& c : s) c = char(std::toupper(uint8_t(c)));
  return s;
}
std::string ascii_lower(std::string s) {
  for (char& c : s) c = char(std::tolower(uint8_t(c)));
  return s;
}
std::string capitalize(const std::string& s) {
  std::string out = ascii_lower(s);
  if (!out.empty()) out[0] = char(std::toupper(uint8_t(out[0])));
  return out;
}
std::string title(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    bool alpha = std::isalpha(uint8_t(c)) || (uint8_t(c) & 0x80);
    c = start ? char(std::toupper(uint8_t(c))) : char(std::tolower(uint8_t(c)));
    start = !alpha;
  }
  return out;
}
std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        int64_t count) {
  if (from.empty()) {
    std::string out;
    int64_t n = 0;
    for (const auto& c : chars_of(s)) {
      if (count < 0 || n++ < count) out += to;
      out += c;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  std::string out;
  size_t pos = 0;
  int64_t n = 0;
  for (;;) {
    size_t f = s.find(from, pos);
    if (f == std::string::npos || (count >= 0 && n >= count)) break;
    out.append(s, pos, f - pos);
    out += to;
    pos = f + from.size();
    ++n;
  }
  out.append(s, pos, std::string::npos);
  return out;
}
std::string as_str_arg(const std::optional<Value>& v, const std::string& dflt) {
  if (!v || v->is_none()) return dflt;
  if (!v->is_str()) throw Error("expected a string argument");
  return v->s;
}
int64_t as_int_arg(const std::optional<Value>& v, int64_t dflt) {
  if (!v || v->is_none()) return dflt;
  if (v->kind == Value::Kind::Int) return v->i;
  if (v->kind == Value::Kind::Bool) return v->b;
  throw Error("expected an integer argument");
}

// Python str(x) for the join/concat family, with Undefined rejected where Python would fail.
std::string str_of(const Value& v) { return to_str(v); }

Value arith(const std::string& op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) type_error(op.c_str(), a, b);
  bool ints = a.kind != Value::Kind::Float && b.kind != Value::Kind::Float;
  int64_t x = a.kind == Value::Kind::Bool ? a.b : a.i, y = b.kind == Value::Kind::Bool ? b.b : b.i;
  double fx = a.as_double(), fy = b.as_double();
  if (op == "+" || op == "-" || op == "*") {
    if (ints) {
      int64_t r;
      bool over = op == "+"   ? __builtin_add_overflow(x, y, &r)
                  : op == "-" ? __builtin_sub_overflow(x, y, &r)
                              : __builtin_mul_overflow(x, y, &r);
      if (!over) return Value::integer(r);
    }
    return Value::number(op == "+" ? fx + fy : op == "-" ? fx - fy : fx * fy);
  }
  if (op == "/") {
    if (fy == 0) throw Error("division by zero");
    return Value::number(fx / fy);
  }
  if (op == "//" || op == "%") {
    if (ints) {
      if (y == 0) throw Error("integer division or modulo by zero");
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) --q, r += y;  // Python floors
      return Value::integer(op == "//" ? q : r);
    }
    if (fy == 0) throw Error("float division or modulo by zero");
    double q = std::floor(fx / fy);
    return Value::number(op == "//" ? q : fx - q * fy);
  }
  if (op == "**") {
    if (ints && y >= 0 && y < 64) {
      double p = std::pow(double(x), double(y));
      if (std::fabs(p) < 9e18) {
        int64_t r = 1;
        for (int64_t k = 0; k < y; ++k) r *= x;
        return Value::integer(r);
      }
    }
    return Value::number(std::pow(fx, fy));
  }
  type_error(op.c_str(), a, b);
}

Value repeat(const Value& seq, int64_t n) {
  n = std::max<int64_t>(n, 0);
  if (seq.is_str()) {
    if (double(seq.s.size()) * double(n) > double(1 << 26))
      throw Error("string repetition too large");
    std::string out;
    for (int64_t k = 0; k < n; ++k) out += seq.s;
    return Value::str(out);
  }
  if (double(seq.list->size()) * double(n) > double(1 << 22))
    throw Error("list repetition too large");
  List out;
  for (int64_t k = 0; k < n; ++k) out.insert(out.end(), seq.list->begin(), seq.list->end());
  return Value::new_list(std::move(out));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Value::Kind::Str:
      if (!item.is_str()) throw Error("'in <string>' requires string as left operand");
      return container.s.find(item.s) != std::string::npos;
    case Value::Kind::List:
      for (const auto& x : *container.list)
        if (equal(x, item)) return true;
      return false;
    case Value::Kind::Dict:
      return item.is_str() && container.get(item.s) != nullptr;
    case Value::Kind::Undefined:
      throw Error("'in' on an undefined value");
    default:
      throw Error(std::string("argument of type '") + kind_name(container) + "' is not iterable");
  }
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value::str(str_of(a) + str_of(b));
  if (op == "==") return Value::boolean(equal(a, b));
  if (op == "!=") return Value::boolean(!equal(a, b));
  if (op == "<") return Value::boolean(less(a, b));
  if (op == ">") return Value::boolean(less(b, a));
  if (op == "<=") return Value::boolean(!less(b, a));
  if (op == ">=") return Value::boolean(!less(a, b));
  if (op == "in") return Value::boolean(contains(b, a));
  if (op == "notin") return Value::boolean(!contains(b, a));
  if (op == "+") {
    if (a.is_str() && b.is_str()) return Value::str(a.s + b.s);
    if (a.is_list() && b.is_list()) {
      List l = *a.list;
      l.insert(l.end(), b.list->begin(), b.list->end());
      return Value::new_list(std::move(l));
    }
    return arith(op, a, b);
  }
  if (op == "*") {
    if ((a.is_str() || a.is_list()) &&
        (b.kind == Value::Kind::Int || b.kind == Value::Kind::Bool)) {
      return repeat(a, b.kind == Value::Kind::Int ? b.i : b.b);
    }
    if ((b.is_str() || b.is_list()) &&
        (a.kind == Value::Kind::Int || a.kind == Value::Kind::Bool)) {
      return repeat(b, a.kind == Value::Kind::Int ? a.i : a.b);
    }
  }
  if (op == "%" && a.is_str()) throw Error("printf-style string formatting is not supported");
  return arith(op, a, b);
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) throw Error("'" + name + "' of an undefined value");
  if (obj.is_dict()) {
    const Value* v = obj.get(name);
    return v ? *v : Value::undefined();
  }
  if (obj.is_list() && !name.empty() && std::isdigit(uint8_t(name[0]))) {
    return get_item(obj, Value::integer(std::atoll(name.c_str())));
  }
  return Value::undefined();
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) throw Error("subscript of an undefined value");
  if (obj.is_dict()) {
    if (!key.is_str()) return Value::undefined();
    const Value* v = obj.get(key.s);
    return v ? *v : Value::undefined();
  }
  if (obj.is_list() || obj.is_str()) {
    if (key.kind != Value::Kind::Int) {
      if (key.is_str())
        return Value::undefined();  // an attribute such as .append: not a value here
      throw Error("indices must be integers");
    }
    if (obj.is_list()) {
      int64_t n = int64_t(obj.list->size()), k = key.i < 0 ? key.i + n : key.i;
      return k >= 0 && k < n ? (*obj.list)[size_t(k)] : Value::undefined();
    }
    auto cs = chars_of(obj.s);
    int64_t n = int64_t(cs.size()), k = key.i < 0 ? key.i + n : key.i;
    return k >= 0 && k < n ? Value::str(cs[size_t(k)]) : Value::undefined();
  }
  return Value::undefined();
}

Value slice(const Value& obj, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step) {
  if (!obj.is_list() && !obj.is_str())
    throw Error(std::string("cannot slice a '") + kind_name(obj) + "'");
  std::vector<std::string> cs;
  if (obj.is_str()) cs = chars_of(obj.s);
  int64_t n = obj.is_list() ? int64_t(obj.list->size()) : int64_t(cs.size());
  int64_t st = step.value_or(1);
  if (st == 0) throw Error("slice step cannot be zero");
  // Python's slice.indices().
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v < 0 ? *v + n : *v;
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t b = clamp(start, st > 0 ? 0 : n - 1), e = clamp(stop, st > 0 ? n : -1);
  List items;
  std::string s;
  for (int64_t k = b; st > 0 ? k < e : k > e; k += st) {
    if (obj.is_list())
      items.push_back((*obj.list)[size_t(k)]);
    else
      s += cs[size_t(k)];
  }
  return obj.is_list() ? Value::new_list(std::move(items)) : Value::str(s);
}

List iterate(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
      return {};
    case Value::Kind::List:
      return *v.list;
    case Value::Kind::Dict: {
      List keys;
      for (const auto& [k, x] : *v.dict) keys.push_back(Value::str(k));
      return keys;
    }
    case Value::Kind::Str: {
      List out;
      for (auto& c : chars_of(v.s)) out.push_back(Value::str(c));
      return out;
    }
    default:
      throw Error(std::string("'") + kind_name(v) + "' object is not iterable");
  }
}

bool is_global_function(const std::string& name) {
  return name == "raise_exception" || name == "strftime_now" || name == "namespace" ||
         name == "range" || name == "dict";
}

Value call_global(Interp&, const std::string& name, const Args& a, std::time_t now) {
  if (name == "raise_exception") {
    auto msg = a.get(0, "message");
    throw Error("raise_exception: " + (msg ? to_str(*msg) : std::string()));
  }
  if (name == "strftime_now") {
    std::string fmt = as_str_arg(a.get(0, "format"), "%Y-%m-%d");
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[256];
    size_t n = fmt.size() < 100 ? std::strftime(buf, sizeof buf, fmt.c_str(), &tm) : 0;
    return Value::str(std::string(buf, n));
  }
  if (name == "namespace" || name == "dict") {
    Value d = Value::new_dict();
    d.is_namespace = name == "namespace";
    if (!a.pos.empty() && a.pos[0].is_dict())
      for (const auto& [k, v] : *a.pos[0].dict) d.set(k, v);
    for (const auto& [k, v] : a.kw) d.set(k, v);
    return d;
  }
  if (name == "range") {
    int64_t b = 0, e, st = 1;
    if (a.pos.size() == 1)
      e = as_int_arg(a.pos[0], 0);
    else if (a.pos.size() >= 2)
      b = as_int_arg(a.pos[0], 0), e = as_int_arg(a.pos[1], 0);
    else
      throw Error("range expects 1 to 3 arguments");
    if (a.pos.size() >= 3) st = as_int_arg(a.pos[2], 1);
    if (st == 0) throw Error("range() step must not be zero");
    List out;
    for (int64_t k = b; st > 0 ? k < e : k > e; k += st) {
      if (out.size() >= 100000) throw Error("range too large");
      out.push_back(Value::integer(k));
    }
    return Value::new_list(std::move(out));
  }
  throw Error("unknown function '" + name + "'");
}

namespace {

// str.split() without a separator: runs of whitespace, at most `maxsplit` splits (< 0: any).
List split_whitespace(const std::string& s, int64_t maxsplit) {
  List parts;
  std::string cur;
  bool in_word = false;
  auto cs = chars_of(s);
  for (size_t k = 0; k < cs.size(); ++k) {
    size_t len;
    bool ws = is_strip_char(cs[k], 0, &len, std::nullopt);
    if (ws && in_word && (maxsplit < 0 || int64_t(parts.size()) < maxsplit)) {
      parts.push_back(Value::str(cur));
      cur.clear();
      in_word = false;
    } else if (!ws || in_word) {
      cur += cs[k];
      in_word = true;
    }
  }
  if (in_word) parts.push_back(Value::str(py_strip(cur, false, true, std::nullopt)));
  return parts;
}

// str.split(sep): at each occurrence of `d`, at most `maxsplit` splits (< 0: any).
List split_on(const std::string& s, const std::string& d, int64_t maxsplit) {
  if (d.empty()) throw Error("empty separator");
  List parts;
  size_t pos = 0;
  for (;;) {
    size_t f = s.find(d, pos);
    if (f == std::string::npos || (maxsplit >= 0 && int64_t(parts.size()) >= maxsplit)) break;
    parts.push_back(Value::str(s.substr(pos, f - pos)));
    pos = f + d.size();
  }
  parts.push_back(Value::str(s.substr(pos)));
  return parts;
}

Value str_split(const std::string& s, const Args& a) {
  auto sep = a.get(0, "sep");
  int64_t maxsplit = as_int_arg(a.get(1, "maxsplit"), -1);
  if (!sep || sep->is_none()) return Value::new_list(split_whitespace(s, maxsplit));
  return Value::new_list(split_on(s, as_str_arg(sep, ""), maxsplit));
}

Value str_join(const std::string& s, const Args& a) {
  std::string out;
  List items = iterate(a.get(0, "iterable").value_or(Value::new_list()));
  for (size_t k = 0; k < items.size(); ++k) {
    if (!items[k].is_str()) throw Error("sequence item is not a string in str.join");
    out += (k ? s : "") + items[k].s;
  }
  return Value::str(out);
}

// The str methods; nullopt for a name str has no method of.
std::optional<Value> str_method(const std::string& s, const std::string& name, const Args& a) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto chars = a.get(0, "chars");
    std::optional<std::string> cs;
    if (chars && !chars->is_none()) cs = as_str_arg(chars, "");
    return Value::str(py_strip(s, name != "rstrip", name != "lstrip", cs));
  }
  if (name == "upper") return Value::str(ascii_upper(s));
  if (name == "lower") return Value::str(ascii_lower(s));
  if (name == "title") return Value::str(title(s));
  if (name == "capitalize") return Value::str(capitalize(s));
  if (name == "startswith" || name == "endswith") {
    std::string x = as_str_arg(a.get(0, "prefix"), "");
    bool r = name == "startswith"
                 ? s.compare(0, x.size(), x) == 0
                 : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
    return Value::boolean(r);
  }
  if (name == "replace") {
    return Value::str(replace_all(s, as_str_arg(a.get(0, "old"), ""),
                                  as_str_arg(a.get(1, "new"), ""),
                                  as_int_arg(a.get(2, "count"), -1)));
  }
  if (name == "find") {
    size_t f = s.find(as_str_arg(a.get(0, "sub"), ""));
    return Value::integer(f == std::string::npos ? -1 : int64_t(chars_of(s.substr(0, f)).size()));
  }
  if (name == "split") return str_split(s, a);
  if (name == "join") return str_join(s, a);
  return std::nullopt;
}

// The dict methods; nullopt for a name dict has no method of.
std::optional<Value> dict_method(const Value& obj, const std::string& name, const Args& a) {
  if (name == "items" || name == "keys" || name == "values") {
    List out;
    for (const auto& [k, v] : *obj.dict) {
      if (name == "items") {
        Value pair = Value::new_list({Value::str(k), v});
        pair.is_tuple = true;
        out.push_back(std::move(pair));
      } else
        out.push_back(name == "keys" ? Value::str(k) : v);
    }
    return Value::new_list(std::move(out));
  }
  if (name == "get") {
    auto key = a.get(0, "key");
    const Value* v = key && key->is_str() ? obj.get(key->s) : nullptr;
    return v ? *v : a.get(1, "default").value_or(Value::none());
  }
  return std::nullopt;
}

// The list methods that do not modify the list; nullopt for a name list has no method of.
std::optional<Value> list_method(const Value& obj, const std::string& name, const Args& a) {
  if (name == "append" || name == "extend" || name == "pop" || name == "insert" ||
      name == "remove") {
    // transformers renders in jinja2's ImmutableSandboxedEnvironment, which refuses this.
    throw Error("access to list." + name + " is unsafe (immutable sandbox)");
  }
  if (name == "count" || name == "index") {
    Value x = a.get(0, "value").value_or(Value::none());
    int64_t n = 0;
    for (size_t k = 0; k < obj.list->size(); ++k) {
      if (equal((*obj.list)[k], x)) {
        if (name == "index") return Value::integer(int64_t(k));
        ++n;
      }
    }
    if (name == "index") throw Error("list.index(x): x not in list");
    return Value::integer(n);
  }
  return std::nullopt;
}

}  // namespace

Value call_method(Interp& in, const Value& obj, const std::string& name, const Args& a) {
  std::optional<Value> r;
  if (obj.is_str())
    r = str_method(obj.s, name, a);
  else if (obj.is_dict())
    r = dict_method(obj, name, a);
  else if (obj.is_list())
    r = list_method(obj, name, a);
  else if (obj.is_undefined())
    throw Error("'" + name + "' of an undefined value");
  if (r) return *r;
  (void)in;
  throw Error(std::string("'") + kind_name(obj) + "' object has no method '" + name + "'");
}

}  // namespace ll3::jinja
