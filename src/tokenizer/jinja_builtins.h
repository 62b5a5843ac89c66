// Jinja subset: operators, filters, tests, methods and global functions (internal).
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_value.h"

namespace ll3::jinja {

struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // Positional argument k, or keyword `name`, or nullopt.
  std::optional<Value> get(size_t k, const char* name) const;
};

// What the built-ins need from the renderer (filters such as map call back into it).
class Interp {
 public:
  virtual ~Interp() = default;
  virtual Value eval(const Expr& e) = 0;
};

Value binary_op(const std::string& op, const Value& a, const Value& b);
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value slice(const Value& obj, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step);
// The items a for loop visits: list elements, dict keys, string characters; Undefined is empty.
List iterate(const Value& v);

bool is_global_function(const std::string& name);
Value call_global(Interp& in, const std::string& name, const Args& a, std::time_t now);
Value call_method(Interp& in, const Value& obj, const std::string& name, const Args& a);
Value apply_filter(Interp& in, const std::string& name, const Value& v, const Args& a);
bool apply_test(Interp& in, const std::string& name, const Value& v, const Args& a);

}  // namespace ll3::jinja
