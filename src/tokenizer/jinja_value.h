// Values of the Jinja subset interpreter (chat templates): Python-like semantics for what chat
// templates use — truthiness, equality, str(), repr() and json.dumps() formatting.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ll3::jinja {

// Errors inside the interpreter unwind to render(), which turns them into a Status; nothing
// outside src/tokenizer/jinja_*.cpp sees an exception.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order, like Python dicts

struct Value {
  enum class Kind { Undefined, None, Bool, Int, Float, Str, List, Dict, Func };
  Kind kind = Kind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;               // Str; the function name for Func
  std::shared_ptr<List> list;  // shared: Python lists and dicts are references
  std::shared_ptr<Dict> dict;
  bool is_namespace = false;  // a namespace() object: attributes can be set
  bool is_tuple = false;      // a List that Python would hold as a tuple (repr uses parentheses)

  static Value undefined() { return Value(); }
  static Value none() {
    Value v;
    v.kind = Kind::None;
    return v;
  }
  static Value boolean(bool x) {
    Value v;
    v.kind = Kind::Bool;
    v.b = x;
    return v;
  }
  static Value integer(int64_t x) {
    Value v;
    v.kind = Kind::Int;
    v.i = x;
    return v;
  }
  static Value number(double x) {
    Value v;
    v.kind = Kind::Float;
    v.f = x;
    return v;
  }
  static Value str(std::string x) {
    Value v;
    v.kind = Kind::Str;
    v.s = std::move(x);
    return v;
  }
  static Value func(std::string name) {
    Value v;
    v.kind = Kind::Func;
    v.s = std::move(name);
    return v;
  }
  static Value new_list(List items = {}) {
    Value v;
    v.kind = Kind::List;
    v.list = std::make_shared<List>(std::move(items));
    return v;
  }
  static Value new_dict(Dict items = {}) {
    Value v;
    v.kind = Kind::Dict;
    v.dict = std::make_shared<Dict>(std::move(items));
    return v;
  }
  static Value from_json(const nlohmann::ordered_json& j);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_str() const { return kind == Kind::Str; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  double as_double() const {
    return kind == Kind::Float ? f : kind == Kind::Int ? double(i) : b ? 1.0 : 0.0;
  }

  bool truthy() const;
  // dict lookup; nullptr when absent
  const Value* get(const std::string& key) const;
  void set(const std::string& key, Value v);
  // Python len(); throws for values without one
  int64_t length() const;
};

bool equal(const Value& a, const Value& b);
// Python's <; throws for unorderable pairs.
bool less(const Value& a, const Value& b);

std::string to_str(const Value& v);  // str(v) as Jinja prints it ({{ v }})
std::string repr(const Value& v);    // Python repr
// json.dumps(v, ensure_ascii=False, indent=indent) (indent < 0: compact ", " / ": " separators).
std::string to_json(const Value& v, int indent = -1);
std::string python_float_repr(double x);
const char* kind_name(const Value& v);

// Container nesting of v, looking at most `limit` levels down (returns limit + 1 when deeper);
// *visited counts the values looked at.
uint64_t nesting_depth(const Value& v, uint64_t limit, uint64_t* visited);

// Python str.isspace() for one code point (what str.strip() removes).
bool py_isspace(uint32_t cp);

}  // namespace ll3::jinja
