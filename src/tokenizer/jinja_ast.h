// The parsed form of a chat template (internal to the Jinja subset interpreter).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace ll3::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,
    Name,
    List,
    Dict,
    Attr,
    Index,
    Slice,
    Call,
    Filter,
    Test,
    Not,
    Neg,
    Binary,
    Cond
  };
  Kind kind;
  std::string name;           // Name, Attr, Call-less names of filters/tests, Binary operator
  Value value;                // Literal
  bool negate = false;        // Test: "is not"
  std::vector<ExprPtr> args;  // operands; Slice: obj, start, stop, step (may be null)
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  size_t pos = 0;  // offset in the template, for messages
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Node {
  enum class Kind { Text, Output, If, For, Set, Break, Continue, Body };
  Kind kind;
  std::string text;  // Text
  ExprPtr expr;      // Output, Set value, For iterable
  std::vector<std::pair<ExprPtr, Body>>
      branches;                      // If: (condition, body); else has a null condition
  std::vector<std::string> targets;  // For loop variables, Set names
  std::string attr;                  // Set ns.attr
  ExprPtr filter;                    // For ... if filter
  Body body, else_body;              // For, Body
  size_t pos = 0;
};

struct Template {
  Body body;
};

}  // namespace ll3::jinja
