// Jinja subset: segments and tokens (jinja_lex) -> statement tree and expression trees, with
// jinja2's operator precedence.
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "tokenizer/jinja.h"
#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_lex.h"
#include "tokenizer/unicode.h"

namespace ll3::jinja {

void TemplateDeleter::operator()(Template* t) const { delete t; }

namespace {

constexpr int kMaxDepth = 200;  // nesting of expressions and blocks (bounds the recursion)

class ExprParser {
 public:
  ExprParser(std::vector<Tok> toks) : t_(std::move(toks)) {}

  const Tok& peek(size_t k = 0) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  bool at_end() const { return peek().kind == Tok::End; }
  bool is_op(const char* op, size_t k = 0) const {
    return peek(k).kind == Tok::Op && peek(k).text == op;
  }
  bool is_name(const char* n, size_t k = 0) const {
    return peek(k).kind == Tok::Name && peek(k).text == n;
  }
  Tok next() { return t_[std::min(p_++, t_.size() - 1)]; }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(strprintf("%s at offset %zu", what.c_str(), peek().pos));
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "'");
    ++p_;
  }
  std::string expect_name() {
    if (peek().kind != Tok::Name) fail("expected a name");
    return next().text;
  }
  void expect_end() {
    if (!at_end()) fail("unexpected '" + peek().text + "'");
  }

  ExprPtr make(Expr::Kind k, size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->pos = pos;
    return e;
  }

  // expression := or ("if" or ("else" expression)?)?
  ExprPtr expression() {
    Depth d(this);
    ExprPtr e = parse_or();
    if (is_name("if")) {
      size_t pos = next().pos;
      auto c = make(Expr::Kind::Cond, pos);
      ExprPtr cond = parse_or();
      ExprPtr other;
      if (is_name("else")) {
        next();
        other = expression();
      }
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(other));
      return c;
    }
    return e;
  }

  // The iterable of a for loop: no conditional expression (its "if" filters the loop).
  ExprPtr expression_no_cond() {
    Depth d(this);
    return parse_or();
  }

  // A tuple without parentheses (for loops, set): a, b
  std::vector<std::string> name_list() {
    std::vector<std::string> names{expect_name()};
    while (is_op(",")) {
      next();
      names.push_back(expect_name());
    }
    return names;
  }

 private:
  struct Depth {
    ExprParser* p;
    explicit Depth(ExprParser* q) : p(q) {
      if (++p->depth_ > kMaxDepth) p->fail("expression nested too deeply");
    }
    ~Depth() { --p->depth_; }
  };

  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b, size_t pos) {
    auto e = make(Expr::Kind::Binary, pos);
    e->name = op;
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }
  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      size_t pos = next().pos;
      e = binary("or", std::move(e), parse_and(), pos);
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      size_t pos = next().pos;
      e = binary("and", std::move(e), parse_not(), pos);
    }
    return e;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      Depth d(this);
      auto e = make(Expr::Kind::Not, next().pos);
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr e = parse_concat();
    for (;;) {
      size_t pos = peek().pos;
      std::string op;
      if (peek().kind == Tok::Op &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
           peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "notin";
      } else {
        return e;
      }
      e = binary(op, std::move(e), parse_concat(), pos);
    }
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_add();
    while (is_op("~")) {
      size_t pos = next().pos;
      e = binary("~", std::move(e), parse_add(), pos);
    }
    return e;
  }
  ExprPtr parse_add() {
    ExprPtr e = parse_mul();
    while (is_op("+") || is_op("-")) {
      Tok op = next();
      e = binary(op.text, std::move(e), parse_mul(), op.pos);
    }
    return e;
  }
  ExprPtr parse_mul() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      Tok op = next();
      e = binary(op.text, std::move(e), parse_pow(), op.pos);
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      Tok op = next();
      e = binary("**", std::move(e), parse_unary(true), op.pos);
    }
    return e;
  }
  ExprPtr parse_unary(bool with_filter) {
    Depth d(this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      Tok op = next();
      ExprPtr inner = parse_unary(false);
      if (op.text == "-") {
        e = make(Expr::Kind::Neg, op.pos);
        e->args.push_back(std::move(inner));
      } else {
        e = std::move(inner);
      }
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filters(std::move(e));
    return e;
  }
  void call_args(Expr* e) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().kind == Tok::Name && is_op("=", 1)) {
        std::string k = next().text;
        next();
        e->kwargs.emplace_back(k, expression());
      } else {
        e->args.push_back(expression());
      }
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
  }
  ExprPtr parse_postfix(ExprPtr e) {
    for (;;) {
      if (is_op(".")) {
        size_t pos = next().pos;
        auto a = make(Expr::Kind::Attr, pos);
        if (peek().kind == Tok::Int)
          a->name = std::to_string(next().i);  // x.0 is x[0]
        else
          a->name = expect_name();
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (is_op("[")) {
        size_t pos = next().pos;
        ExprPtr parts[3];
        bool slice = false;
        for (int k = 0; k < 3; ++k) {
          if (!is_op(":") && !is_op("]")) parts[k] = expression();
          if (k < 2 && is_op(":")) {
            next();
            slice = true;
          } else {
            break;
          }
        }
        expect_op("]");
        if (slice) {
          auto s = make(Expr::Kind::Slice, pos);
          s->args.push_back(std::move(e));
          for (auto& p : parts) s->args.push_back(std::move(p));
          e = std::move(s);
        } else {
          if (!parts[0]) fail("empty subscript");
          auto ix = make(Expr::Kind::Index, pos);
          ix->args.push_back(std::move(e));
          ix->args.push_back(std::move(parts[0]));
          e = std::move(ix);
        }
      } else if (is_op("(")) {
        auto c = make(Expr::Kind::Call, peek().pos);
        c->args.push_back(std::move(e));
        call_args(c.get());
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  ExprPtr parse_filters(ExprPtr e) {
    for (;;) {
      if (is_op("|")) {
        size_t pos = next().pos;
        auto f = make(Expr::Kind::Filter, pos);
        f->name = expect_name();
        while (is_op(".")) {  // dotted filter names do not exist in our set; keep the error clear
          next();
          f->name += "." + expect_name();
        }
        f->args.push_back(std::move(e));
        if (is_op("(")) call_args(f.get());
        e = std::move(f);
      } else if (is_name("is")) {
        size_t pos = next().pos;
        auto t = make(Expr::Kind::Test, pos);
        if (is_name("not")) {
          next();
          t->negate = true;
        }
        t->name = expect_name();
        t->args.push_back(std::move(e));
        if (is_op("(")) {
          call_args(t.get());
        } else if (peek().kind == Tok::Str || peek().kind == Tok::Int ||
                   peek().kind == Tok::Float ||
                   (peek().kind == Tok::Name && !is_name("and") && !is_name("or") &&
                    !is_name("else") && !is_name("if") && !is_name("in") && !is_name("not") &&
                    !is_name("is"))) {
          t->args.push_back(parse_postfix(parse_primary()));  // "is divisibleby 3"
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }
  ExprPtr parse_primary() {
    const Tok& t = peek();
    size_t pos = t.pos;
    if (t.kind == Tok::Str) {
      auto e = make(Expr::Kind::Literal, pos);
      std::string s = next().text;
      while (peek().kind == Tok::Str) s += next().text;  // adjacent literals concatenate
      e->value = Value::str(std::move(s));
      return e;
    }
    if (t.kind == Tok::Int || t.kind == Tok::Float) {
      auto e = make(Expr::Kind::Literal, pos);
      Tok n = next();
      e->value = n.kind == Tok::Int ? Value::integer(n.i) : Value::number(n.f);
      return e;
    }
    if (t.kind == Tok::Name) {
      std::string n = next().text;
      auto e = make(Expr::Kind::Literal, pos);
      if (n == "true" || n == "True")
        e->value = Value::boolean(true);
      else if (n == "false" || n == "False")
        e->value = Value::boolean(false);
      else if (n == "none" || n == "None")
        e->value = Value::none();
      else {
        e->kind = Expr::Kind::Name;
        e->name = n;
      }
      return e;
    }
    if (is_op("(")) {
      next();
      if (is_op(")")) {
        next();
        auto l = make(Expr::Kind::List, pos);  // () : an empty tuple
        l->name = "tuple";
        return l;
      }
      ExprPtr e = expression();
      if (is_op(",")) {  // a tuple, as a list
        auto l = make(Expr::Kind::List, pos);
        l->name = "tuple";
        l->args.push_back(std::move(e));
        while (is_op(",")) {
          next();
          if (is_op(")")) break;
          l->args.push_back(expression());
        }
        e = std::move(l);
      }
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto l = make(Expr::Kind::List, pos);
      while (!is_op("]")) {
        l->args.push_back(expression());
        if (!is_op(",")) break;
        next();
      }
      expect_op("]");
      return l;
    }
    if (is_op("{")) {
      next();
      auto d = make(Expr::Kind::Dict, pos);
      while (!is_op("}")) {
        d->args.push_back(expression());
        expect_op(":");
        d->args.push_back(expression());
        if (!is_op(",")) break;
        next();
      }
      expect_op("}");
      return d;
    }
    fail(t.kind == Tok::End ? "unexpected end of expression" : "unexpected '" + t.text + "'");
  }

  std::vector<Tok> t_;
  size_t p_ = 0;
  int depth_ = 0;
};

// ---- statements ----
class StmtParser {
 public:
  explicit StmtParser(std::vector<Segment> segs) : segs_(std::move(segs)) {}

  Body parse_all() {
    std::string end;
    Body b = parse_body({}, &end);
    return b;
  }

 private:
  static std::string first_word(const std::string& s) {
    size_t i = 0;
    while (i < s.size() && std::isspace(uint8_t(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && (std::isalnum(uint8_t(s[j])) || s[j] == '_')) ++j;
    return s.substr(i, j - i);
  }

  // Parses nodes until a block whose keyword is in `stops` (returned in *stop, its segment
  // left at i_), or the end (only allowed when stops is empty).
  Body parse_body(const std::vector<std::string>& stops, std::string* stop) {
    if (++depth_ > kMaxDepth) throw Error("blocks nested too deeply");
    Body body;
    while (i_ < segs_.size()) {
      const Segment& s = segs_[i_];
      if (s.kind == Segment::Text) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::Text;
        n->text = s.text;
        body.push_back(std::move(n));
        ++i_;
        continue;
      }
      if (s.kind == Segment::Var) {
        ExprParser p(lex(s.text, s.pos));
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::Output;
        n->pos = s.pos;
        n->expr = p.expression();
        p.expect_end();
        body.push_back(std::move(n));
        ++i_;
        continue;
      }
      std::string kw = first_word(s.text);
      for (const auto& st : stops) {
        if (kw == st) {
          *stop = kw;
          --depth_;
          return body;
        }
      }
      body.push_back(parse_block(s));
    }
    if (!stops.empty())
      throw Error("missing {% " + stops.back() + " %} at the end of the template");
    --depth_;
    return body;
  }

  // A block tag and, for if / for / generation, its body up to the matching end tag.
  std::unique_ptr<Node> parse_block(const Segment& s) {
    ExprParser p(lex(s.text, s.pos));
    std::string kw = p.expect_name();
    auto n = std::make_unique<Node>();
    n->pos = s.pos;
    ++i_;
    if (kw == "if") {
      parse_if(p, *n);
    } else if (kw == "for") {
      parse_for(p, *n);
    } else if (kw == "set") {
      parse_set(p, *n);
    } else if (kw == "break" || kw == "continue") {
      p.expect_end();
      n->kind = kw == "break" ? Node::Kind::Break : Node::Kind::Continue;
    } else if (kw == "generation") {  // transformers' assistant-mask marker: renders its body
      p.expect_end();
      n->kind = Node::Kind::Body;
      std::string stop;
      n->body = parse_body({"endgeneration"}, &stop);
      ++i_;
    } else {
      throw Error(strprintf("unsupported tag '%s' at offset %zu", kw.c_str(), s.pos));
    }
    return n;
  }

  // {% if c %}...{% elif c %}...{% else %}...{% endif %}: one branch per condition, the else
  // branch's condition null.
  void parse_if(ExprParser& p, Node& n) {
    n.kind = Node::Kind::If;
    ExprPtr cond = p.expression();
    p.expect_end();
    for (;;) {
      std::string stop;
      Body b = parse_body({"elif", "else", "endif"}, &stop);
      n.branches.emplace_back(std::move(cond), std::move(b));
      const Segment& t = segs_[i_++];
      ExprParser q(lex(t.text, t.pos));
      q.expect_name();
      if (stop == "elif") {
        cond = q.expression();
        q.expect_end();
      } else if (stop == "else") {
        q.expect_end();
        Body eb = parse_body({"endif"}, &stop);
        ++i_;
        n.branches.emplace_back(nullptr, std::move(eb));
        break;
      } else {
        q.expect_end();
        break;
      }
    }
  }

  // {% for a, b in xs if c %}...{% else %}...{% endfor %}
  void parse_for(ExprParser& p, Node& n) {
    n.kind = Node::Kind::For;
    n.targets = p.name_list();
    if (!p.is_name("in")) p.fail("expected 'in'");
    p.next();
    n.expr = p.expression_no_cond();
    if (p.is_name("if")) {
      p.next();
      n.filter = p.expression();
    }
    if (p.is_name("recursive")) p.fail("recursive loops are not supported");
    p.expect_end();
    std::string stop;
    n.body = parse_body({"else", "endfor"}, &stop);
    ++i_;
    if (stop == "else") {
      n.else_body = parse_body({"endfor"}, &stop);
      ++i_;
    }
  }

  // {% set x = e %}, {% set ns.attr = e %}, {% set a, b = e1, e2 %}
  void parse_set(ExprParser& p, Node& n) {
    n.kind = Node::Kind::Set;
    n.targets = p.name_list();
    if (n.targets.size() == 1 && p.is_op(".")) {
      p.next();
      n.attr = p.expect_name();
    }
    if (!p.is_op("=")) p.fail("block assignment ({% set x %}...{% endset %}) is not supported");
    p.next();
    n.expr = p.expression();
    if (p.is_op(",")) {  // set a, b = 1, 2
      auto l = std::make_unique<Expr>();
      l->kind = Expr::Kind::List;
      l->args.push_back(std::move(n.expr));
      while (p.is_op(",")) {
        p.next();
        l->args.push_back(p.expression());
      }
      n.expr = std::move(l);
    }
    p.expect_end();
  }

  std::vector<Segment> segs_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<TemplatePtr> parse(const std::string& source) {
  try {
    auto segs = segment(source);
    StmtParser sp(std::move(segs));
    TemplatePtr t(new Template());
    t->body = sp.parse_all();
    return t;
  } catch (const Error& e) {
    return Status::error(std::string("chat template: ") + e.what());
  }
}

}  // namespace ll3::jinja
