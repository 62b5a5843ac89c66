// Jinja subset: the evaluator. Python semantics where the templates can observe them
// (truthiness, `+`, comparisons, str(), slicing by code point, jinja2's Undefined).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "tokenizer/jinja.h"
#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/unicode.h"

namespace ll3::jinja {
namespace {

enum class Flow { Normal, Break, Continue };

class Renderer : public Interp {
 public:
  Renderer(std::time_t now, const RenderLimits& limits) : now_(now), limits_(limits) {}

  std::string out;

  void push_scope() { scopes_.emplace_back(); }
  void pop_scope() { scopes_.pop_back(); }
  void define(const std::string& name, Value v) { scopes_.back()[name] = std::move(v); }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return f->second;
    }
    if (is_global_function(name)) return Value::func(name);
    return Value::undefined();
  }

  void step() {
    if (++steps_ > limits_.max_steps) throw Error("template ran too long (step limit)");
  }

  Flow exec(const Body& body) {
    for (const auto& n : body) {
      Flow f = exec(*n);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow exec(const Node& n) {
    step();
    switch (n.kind) {
      case Node::Kind::Text:
        emit(n.text);
        return Flow::Normal;
      case Node::Kind::Output:
        emit(to_str(eval(*n.expr)));
        return Flow::Normal;
      case Node::Kind::If:
        for (const auto& [cond, body] : n.branches) {
          if (!cond || eval(*cond).truthy()) return exec(body);
        }
        return Flow::Normal;
      case Node::Kind::For:
        return exec_for(n);
      case Node::Kind::Set:
        exec_set(n);
        return Flow::Normal;
      case Node::Kind::Break:
        return Flow::Break;
      case Node::Kind::Continue:
        return Flow::Continue;
      case Node::Kind::Body:
        return exec(n.body);
    }
    return Flow::Normal;
  }

  void emit(const std::string& s) {
    if (out.size() + s.size() > limits_.max_output_bytes) throw Error("template output too large");
    out += s;
  }

  void exec_set(const Node& n) {
    Value v = eval(*n.expr);
    if (!n.attr.empty()) {
      Value ns = lookup(n.targets[0]);
      if (!ns.is_dict() || !ns.is_namespace)
        throw Error("cannot assign attribute on non-namespace object");
      // A namespace is the one mutable object: keep what it holds shallow, so that a loop like
      // {% set ns.x = [ns.x] %} cannot build a chain deep enough to overflow the stack.
      uint64_t visited = 0;
      if (nesting_depth(v, 256, &visited) > 256) throw Error("value nested too deeply");
      steps_ += visited;
      ns.set(n.attr, std::move(v));
      return;
    }
    if (n.targets.size() == 1) {
      define(n.targets[0], std::move(v));
      return;
    }
    List items = iterate(v);
    if (items.size() != n.targets.size()) throw Error("wrong number of values to unpack in set");
    for (size_t k = 0; k < items.size(); ++k) define(n.targets[k], items[k]);
  }

  Flow exec_for(const Node& n) {
    List items = iterate(eval(*n.expr));
    // The loop's own scope: assignments inside do not leak (jinja2 scoping).
    push_scope();
    if (n.filter) {
      List kept;
      for (auto& it : items) {
        bind_targets(n.targets, it);
        if (eval(*n.filter).truthy()) kept.push_back(it);
      }
      items.swap(kept);
    }
    const int64_t len = int64_t(items.size());
    for (int64_t k = 0; k < len; ++k) {
      step();
      scopes_.back().clear();
      bind_targets(n.targets, items[size_t(k)]);
      Value loop = Value::new_dict();
      loop.set("index", Value::integer(k + 1));
      loop.set("index0", Value::integer(k));
      loop.set("revindex", Value::integer(len - k));
      loop.set("revindex0", Value::integer(len - k - 1));
      loop.set("first", Value::boolean(k == 0));
      loop.set("last", Value::boolean(k == len - 1));
      loop.set("length", Value::integer(len));
      loop.set("previtem", k > 0 ? items[size_t(k - 1)] : Value::undefined());
      loop.set("nextitem", k + 1 < len ? items[size_t(k + 1)] : Value::undefined());
      define("loop", loop);
      Flow f = exec(n.body);
      if (f == Flow::Break) break;
    }
    pop_scope();
    if (items.empty() && !n.else_body.empty()) return exec(n.else_body);
    return Flow::Normal;
  }

  void bind_targets(const std::vector<std::string>& targets, const Value& item) {
    if (targets.size() == 1) {
      define(targets[0], item);
      return;
    }
    List parts = iterate(item);
    if (parts.size() != targets.size()) {
      throw Error(strprintf("cannot unpack %zu values into %zu loop variables", parts.size(),
                            targets.size()));
    }
    for (size_t k = 0; k < parts.size(); ++k) define(targets[k], parts[k]);
  }

  Value eval(const Expr& e) override {
    switch (e.kind) {
      case Expr::Kind::Literal:
        return e.value;
      case Expr::Kind::Name:
        return lookup(e.name);
      case Expr::Kind::List: {
        List l;
        for (const auto& a : e.args) l.push_back(eval(*a));
        Value v = Value::new_list(std::move(l));
        v.is_tuple = e.name == "tuple";
        return v;
      }
      case Expr::Kind::Dict: {
        Value d = Value::new_dict();
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
          Value key = eval(*e.args[k]);
          if (!key.is_str()) throw Error("only string dictionary keys are supported");
          d.set(key.s, eval(*e.args[k + 1]));
        }
        return d;
      }
      case Expr::Kind::Attr:
        return get_attr(eval(*e.args[0]), e.name);
      case Expr::Kind::Index:
        return get_item(eval(*e.args[0]), eval(*e.args[1]));
      case Expr::Kind::Slice:
        return eval_slice(e);
      case Expr::Kind::Call:
        return eval_call(e);
      case Expr::Kind::Filter: {
        Value v = eval(*e.args[0]);
        Args a = eval_args(e, 1);
        return apply_filter(*this, e.name, v, a);
      }
      case Expr::Kind::Test: {
        Value v = eval(*e.args[0]);
        Args a = eval_args(e, 1);
        bool r = apply_test(*this, e.name, v, a);
        return Value::boolean(e.negate ? !r : r);
      }
      case Expr::Kind::Not:
        return Value::boolean(!eval(*e.args[0]).truthy());
      case Expr::Kind::Neg: {
        Value v = eval(*e.args[0]);
        if (v.kind == Value::Kind::Int) return Value::integer(-v.i);
        if (v.kind == Value::Kind::Float) return Value::number(-v.f);
        if (v.kind == Value::Kind::Bool) return Value::integer(-int64_t(v.b));
        throw Error(std::string("bad operand type for unary -: '") + kind_name(v) + "'");
      }
      case Expr::Kind::Binary:
        return eval_binary(e);
      case Expr::Kind::Cond:
        if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : Value::undefined();
    }
    return Value::undefined();
  }

  Args eval_args(const Expr& e, size_t first) {
    Args a;
    for (size_t k = first; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k]));
    for (const auto& [name, x] : e.kwargs) a.kw.emplace_back(name, eval(*x));
    return a;
  }

  Value eval_binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value a = eval(*e.args[0]);
      return a.truthy() ? eval(*e.args[1]) : a;
    }
    if (op == "or") {
      Value a = eval(*e.args[0]);
      return a.truthy() ? a : eval(*e.args[1]);
    }
    Value a = eval(*e.args[0]), b = eval(*e.args[1]);
    return binary_op(op, a, b);
  }

  Value eval_slice(const Expr& e) {
    Value obj = eval(*e.args[0]);
    auto opt = [&](int k) -> std::optional<int64_t> {
      if (!e.args[k]) return std::nullopt;
      Value v = eval(*e.args[k]);
      if (v.is_none()) return std::nullopt;
      if (v.kind != Value::Kind::Int) throw Error("slice indices must be integers");
      return v.i;
    };
    return slice(obj, opt(1), opt(2), opt(3));
  }

  Value eval_call(const Expr& e) {
    const Expr& callee = *e.args[0];
    Args a = eval_args(e, 1);
    if (callee.kind == Expr::Kind::Attr) {
      Value obj = eval(*callee.args[0]);
      return call_method(*this, obj, callee.name, a);
    }
    Value f = eval(callee);
    if (f.kind != Value::Kind::Func) {
      throw Error(std::string("'") + kind_name(f) + "' object is not callable");
    }
    return call_global(*this, f.s, a, now_);
  }

 private:
  std::vector<std::unordered_map<std::string, Value>> scopes_;
  std::time_t now_;
  RenderLimits limits_;
  uint64_t steps_ = 0;
};

}  // namespace

Result<std::string> render(const Template& t, const nlohmann::ordered_json& context,
                           std::time_t now, const RenderLimits& limits) {
  if (!context.is_object())
    return Status::error("chat template: the context must be a JSON object");
  Renderer r(now, limits);
  try {
    r.push_scope();
    for (auto it = context.begin(); it != context.end(); ++it)
      r.define(it.key(), Value::from_json(it.value()));
    r.push_scope();  // the template's own top-level assignments
    r.exec(t.body);
  } catch (const Error& e) {
    return Status::error(std::string("chat template: ") + e.what());
  }
  return std::move(r.out);
}

}  // namespace ll3::jinja
