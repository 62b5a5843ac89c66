#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tokenizer/unicode.h"

namespace ll3::jinja {

namespace {
// Bounds the recursion of repr, tojson, comparisons and JSON import: values nested deeper than
// this (or a namespace that contains itself) are an error, not a stack overflow.
constexpr int kMaxNesting = 512;
thread_local int g_nesting = 0;
struct NestGuard {
  NestGuard() {
    if (++g_nesting > kMaxNesting) {
      --g_nesting;
      throw Error("value nested too deeply (or containing itself)");
    }
  }
  ~NestGuard() { --g_nesting; }
  NestGuard(const NestGuard&) = delete;
  NestGuard& operator=(const NestGuard&) = delete;
};
}  // namespace

Value Value::from_json(const nlohmann::ordered_json& j) {
  NestGuard guard;
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return none();
    case nlohmann::ordered_json::value_t::boolean:
      return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      return u <= uint64_t(INT64_MAX) ? integer(int64_t(u)) : number(double(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return number(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      l.reserve(j.size());
      for (const auto& e : j) l.push_back(from_json(e));
      return new_list(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it)
        d.emplace_back(it.key(), from_json(it.value()));
      return new_dict(std::move(d));
    }
    default:
      return undefined();
  }
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return b;
    case Kind::Int:
      return i != 0;
    case Kind::Float:
      return f != 0;
    case Kind::Str:
      return !s.empty();
    case Kind::List:
      return !list->empty();
    case Kind::Dict:
      return !dict->empty();
    case Kind::Func:
      return true;
  }
  return false;
}

const Value* Value::get(const std::string& key) const {
  if (kind != Kind::Dict) return nullptr;
  for (const auto& [k, v] : *dict)
    if (k == key) return &v;
  return nullptr;
}

void Value::set(const std::string& key, Value v) {
  for (auto& [k, old] : *dict)
    if (k == key) {
      old = std::move(v);
      return;
    }
  dict->emplace_back(key, std::move(v));
}

int64_t Value::length() const {
  switch (kind) {
    case Kind::Str: {
      int64_t n = 0;  // code points, as Python counts
      for (char c : s) n += (uint8_t(c) & 0xC0) != 0x80;
      return n;
    }
    case Kind::List:
      return int64_t(list->size());
    case Kind::Dict:
      return int64_t(dict->size());
    default:
      throw Error(std::string("object of type '") + kind_name(*this) + "' has no len()");
  }
}

const char* kind_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
      return "Undefined";
    case Value::Kind::None:
      return "NoneType";
    case Value::Kind::Bool:
      return "bool";
    case Value::Kind::Int:
      return "int";
    case Value::Kind::Float:
      return "float";
    case Value::Kind::Str:
      return "str";
    case Value::Kind::List:
      return "list";
    case Value::Kind::Dict:
      return v.is_namespace ? "Namespace" : "dict";
    case Value::Kind::Func:
      return "function";
  }
  return "?";
}

bool equal(const Value& a, const Value& b) {
  NestGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.kind != Value::Kind::Float && b.kind != Value::Kind::Float) {
      int64_t x = a.kind == Value::Kind::Bool ? a.b : a.i,
              y = b.kind == Value::Kind::Bool ? b.b : b.i;
      return x == y;
    }
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return true;
    case Value::Kind::Str:
    case Value::Kind::Func:
      return a.s == b.s;
    case Value::Kind::List:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equal((*a.list)[k], (*b.list)[k])) return false;
      return true;
    case Value::Kind::Dict:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, v] : *a.dict) {
        const Value* o = b.get(k);
        if (!o || !equal(v, *o)) return false;
      }
      return true;
    default:
      return false;
  }
}

bool less(const Value& a, const Value& b) {
  NestGuard guard;
  if (a.is_number() && b.is_number()) return a.as_double() < b.as_double();
  if (a.is_str() && b.is_str()) return a.s < b.s;  // byte order = code point order in UTF-8
  if (a.is_list() && b.is_list()) {
    size_t n = std::min(a.list->size(), b.list->size());
    for (size_t k = 0; k < n; ++k) {
      if (less((*a.list)[k], (*b.list)[k])) return true;
      if (less((*b.list)[k], (*a.list)[k])) return false;
    }
    return a.list->size() < b.list->size();
  }
  throw Error(std::string("'<' not supported between '") + kind_name(a) + "' and '" + kind_name(b) +
              "'");
}

std::string python_float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  // Shortest digits that round-trip, then Python's layout: scientific when the exponent is
  // < -4 or >= 16, else positional with at least one fractional digit.
  char buf[40];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  std::string sci = buf;  // d.ddde[+-]XX
  size_t epos = sci.find('e');
  int exp10 = std::atoi(sci.c_str() + epos + 1);
  std::string mant = sci.substr(0, epos);
  bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits.push_back(c);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp10 < -4 || exp10 >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];  // a double needs "e-324" at most; room for any int, so never truncated
    std::snprintf(e, sizeof e, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    return out + e;
  }
  if (exp10 < 0) {
    out += "0." + std::string(size_t(-exp10 - 1), '0') + digits;
  } else if (size_t(exp10) + 1 >= digits.size()) {
    out += digits + std::string(size_t(exp10) + 1 - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, size_t(exp10) + 1) + "." + digits.substr(size_t(exp10) + 1);
  }
  return out;
}

static std::string py_quote(const std::string& s) {
  // Python repr of a str: single quotes unless the text has ' and no ".
  bool sq = s.find('\'') != std::string::npos, dq = s.find('"') != std::string::npos;
  char q = (sq && !dq) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == q || c == '\\')
      out += '\\', out += char(c);
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7F) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else
      out += char(c);
  }
  return out + q;
}

std::string repr(const Value& v) {
  NestGuard guard;
  switch (v.kind) {
    case Value::Kind::Str:
      return py_quote(v.s);
    case Value::Kind::List: {
      std::string out = v.is_tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) out += (k ? ", " : "") + repr((*v.list)[k]);
      if (v.is_tuple) return out + (v.list->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Value::Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : *v.dict) {
        out += (first ? "" : ", ") + py_quote(k) + ": " + repr(x);
        first = false;
      }
      return out + "}";
    }
    default:
      return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
      return "";
    case Value::Kind::None:
      return "None";
    case Value::Kind::Bool:
      return v.b ? "True" : "False";
    case Value::Kind::Int:
      return std::to_string(v.i);
    case Value::Kind::Float:
      return python_float_repr(v.f);
    case Value::Kind::Str:
      return v.s;
    case Value::Kind::Func:
      return "<function " + v.s + ">";
    default:
      return repr(v);
  }
}

static void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

static void json_dump(std::string& out, const Value& v, int indent, int depth) {
  NestGuard guard;
  auto newline = [&](int d) {
    out += '\n';
    out.append(size_t(indent) * size_t(d), ' ');
  };
  switch (v.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      out += "null";
      return;
    case Value::Kind::Bool:
      out += v.b ? "true" : "false";
      return;
    case Value::Kind::Int:
      out += std::to_string(v.i);
      return;
    case Value::Kind::Float:
      if (std::isnan(v.f))
        out += "NaN";
      else if (std::isinf(v.f))
        out += v.f > 0 ? "Infinity" : "-Infinity";
      else
        out += python_float_repr(v.f);
      return;
    case Value::Kind::Str:
    case Value::Kind::Func:
      json_string(out, v.s);
      return;
    case Value::Kind::List: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        json_dump(out, (*v.list)[k], indent, depth + 1);
      }
      if (indent >= 0) newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      if (v.dict->empty()) {
        out += "{}";
        return;
      }
      out += '{';
      bool first = true;
      for (const auto& [k, x] : *v.dict) {
        if (!first) out += indent >= 0 ? "," : ", ";
        first = false;
        if (indent >= 0) newline(depth + 1);
        json_string(out, k);
        out += ": ";
        json_dump(out, x, indent, depth + 1);
      }
      if (indent >= 0) newline(depth);
      out += '}';
      return;
    }
  }
}

std::string to_json(const Value& v, int indent) {
  std::string out;
  json_dump(out, v, indent, 0);
  return out;
}

uint64_t nesting_depth(const Value& v, uint64_t limit, uint64_t* visited) {
  ++*visited;
  if (limit == 0) return 1;
  uint64_t d = 0;
  if (v.is_list()) {
    for (const auto& x : *v.list)
      if (x.is_list() || x.is_dict()) d = std::max(d, nesting_depth(x, limit - 1, visited));
  } else if (v.is_dict()) {
    for (const auto& [k, x] : *v.dict)
      if (x.is_list() || x.is_dict()) d = std::max(d, nesting_depth(x, limit - 1, visited));
  } else {
    return 0;
  }
  return d + 1;
}

bool py_isspace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace ll3::jinja
