// llama.cpp's GBNF notation, parsed into a GrammarBuilder. A rule is `name ::= alternatives`;
// it ends at a newline unless the line ends inside parentheses or right after `|` or `::=`.
// Elements: "literals", [classes] (^ negates, a-b ranges), rule names, ( groups ), `.` (any
// character), each optionally followed by ?, *, +, {m}, {m,}, {m,n}; `#` starts a comment.
// Literals and classes are Unicode text; \xHH, \uHHHH and \UHHHHHHHH name codepoints.
#include "grammar/gbnf_parser.h"

#include <cctype>
#include <unordered_set>

#include "grammar/grammar_builder.h"

namespace ll3::grammar {

namespace {

constexpr int kMaxNesting = 64;          // parenthesized groups inside each other
constexpr size_t kMaxText = 8u << 20;    // bytes of GBNF text
constexpr int64_t kMaxRepeat = 100000;  // m and n of {m,n}

bool is_name_char(char c) { return std::isalnum(uint8_t(c)) || c == '-' || c == '_'; }

class GbnfParser {
 public:
  explicit GbnfParser(const std::string& text) : s_(text) {}

  Result<std::unique_ptr<Grammar::Impl>> parse(const std::string& root) {
    if (s_.size() > kMaxText) return Status::errorf("gbnf: text too long (%zu bytes, limit %zu)", s_.size(), kMaxText);
    skip_space(true);
    while (i_ < s_.size()) {
      LL3_RETURN_IF_ERROR(parse_rule());
      skip_space(true);
    }
    auto where = [this](size_t off) { return location(off); };
    auto g = b_.finish(root, where);
    if (!g.ok()) return g.status().with_context("gbnf: ");
    return g;
  }

 private:
  std::string location(size_t off) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < off && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return "line " + std::to_string(line) + " column " + std::to_string(col);
  }
  Status error_at(size_t off, const std::string& what) const {
    return Status::error("gbnf: " + location(off) + ": " + what);
  }
  bool at_end() const { return i_ >= s_.size(); }
  char peek(size_t k = 0) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }

  // Spaces, tabs and comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (!at_end()) {
      char c = s_[i_];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++i_;
      } else if (c == '#') {
        while (!at_end() && s_[i_] != '\n') ++i_;
      } else if (c == '\r' && peek(1) == '\n' && newlines) {
        ++i_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    size_t start = i_;
    while (!at_end() && is_name_char(s_[i_])) ++i_;
    return s_.substr(start, i_ - start);
  }

  Status parse_rule() {
    size_t start = i_;
    std::string name = parse_name();
    if (name.empty()) return error_at(i_, "expected a rule name");
    skip_space(false);
    if (s_.compare(i_, 3, "::=") != 0) return error_at(i_, "expected '::=' after rule name '" + name + "'");
    i_ += 3;
    uint32_t r = b_.rule(name, start);
    if (b_.is_defined(r) && defined_here_.count(r)) return error_at(start, "rule '" + name + "' is defined twice");
    b_.mark_defined(r, start);
    defined_here_.insert(r);
    skip_space(true);
    LL3_RETURN_IF_ERROR(parse_alternatives(r, name, 0));
    if (!at_end() && s_[i_] != '\n' && s_[i_] != '\r') {
      return error_at(i_, std::string("unexpected '") + s_[i_] + "' in rule '" + name + "'");
    }
    return Status();
  }

  Status parse_alternatives(uint32_t r, const std::string& name, int depth) {
    for (;;) {
      Seq seq;
      LL3_RETURN_IF_ERROR(parse_sequence(seq, name, depth));
      LL3_RETURN_IF_ERROR(b_.add_alt(r, std::move(seq)));
      if (peek() != '|') return Status();
      ++i_;
      skip_space(true);
    }
  }

  Status parse_sequence(Seq& seq, const std::string& name, int depth) {
    for (;;) {
      char c = peek();
      if (at_end() || c == '|' || c == ')' || c == '\n' || c == '\r') return Status();
      size_t start = i_;
      Seq item;
      LL3_RETURN_IF_ERROR(parse_element(item, name, depth));
      skip_space(depth > 0);
      LL3_RETURN_IF_ERROR(parse_postfix(item, name, start));
      seq.insert(seq.end(), item.begin(), item.end());
      skip_space(depth > 0);
    }
  }

  Status parse_element(Seq& item, const std::string& name, int depth) {
    size_t start = i_;
    char c = peek();
    if (c == '"') {
      ++i_;
      std::string bytes;
      while (peek() != '"') {
        if (at_end() || peek() == '\n') return error_at(start, "unterminated literal");
        if (peek() == '\\') {
          auto cp = parse_escape();
          if (!cp.ok()) return cp.status();
          append_utf8(bytes, *cp);
        } else {
          bytes += s_[i_++];
        }
      }
      ++i_;
      item = b_.literal(bytes);
      return Status();
    }
    if (c == '[') return parse_class(item, name);
    if (c == '.') {
      ++i_;
      return set_class(item, complement_ranges({}), name, start);
    }
    if (c == '(') {
      if (depth >= kMaxNesting) return error_at(i_, "groups nested too deeply");
      ++i_;
      skip_space(true);
      uint32_t r = b_.helper_rule(name);
      LL3_RETURN_IF_ERROR(parse_alternatives(r, name, depth + 1));
      if (peek() != ')') return error_at(start, "unclosed '('");
      ++i_;
      item = Seq{make_rule(r)};
      return Status();
    }
    if (is_name_char(c)) {
      std::string ref = parse_name();
      size_t after = i_;
      skip_space(false);
      if (s_.compare(i_, 3, "::=") == 0) return error_at(start, "missing newline before rule '" + ref + "'");
      i_ = after;
      item = Seq{make_rule(b_.rule(ref, start))};
      return Status();
    }
    return error_at(i_, std::string("unexpected '") + c + "'");
  }

  Status set_class(Seq& item, const CodepointRanges& ranges, const std::string& name, size_t start) {
    auto seq = b_.codepoint_class(ranges, name);
    if (!seq.ok()) return error_at(start, seq.message());
    item = std::move(*seq);
    return Status();
  }

  Status parse_class(Seq& item, const std::string& name) {
    size_t start = i_++;
    bool negate = peek() == '^';
    if (negate) ++i_;
    CodepointRanges ranges;
    while (peek() != ']') {
      if (at_end() || peek() == '\n') return error_at(start, "unterminated character class");
      auto lo = parse_class_char();
      if (!lo.ok()) return lo.status();
      uint32_t hi = *lo;
      if (peek() == '-' && peek(1) != ']' && peek(1) != '\n' && i_ + 1 < s_.size()) {
        ++i_;
        auto h = parse_class_char();
        if (!h.ok()) return h.status();
        hi = *h;
        if (hi < *lo) return error_at(start, "character class range is reversed");
      }
      ranges.emplace_back(*lo, hi);
    }
    ++i_;
    ranges = normalize_ranges(std::move(ranges));
    if (negate) ranges = complement_ranges(ranges);
    return set_class(item, ranges, name, start);
  }

  Result<uint32_t> parse_class_char() {
    if (peek() == '\\') return parse_escape();
    return decode_utf8(s_, i_);
  }

  // At a backslash: the codepoint it names.
  Result<uint32_t> parse_escape() {
    size_t start = i_++;
    if (at_end()) return error_at(start, "escape at end of text");
    char c = s_[i_++];
    switch (c) {
      case 'n': return uint32_t('\n');
      case 'r': return uint32_t('\r');
      case 't': return uint32_t('\t');
      case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'':
        return uint32_t(uint8_t(c));
      case 'x': return parse_hex(start, 2);
      case 'u': return parse_hex(start, 4);
      case 'U': return parse_hex(start, 8);
      default: return error_at(start, std::string("unknown escape '\\") + c + "'");
    }
  }

  Result<uint32_t> parse_hex(size_t start, int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      char c = peek();
      if (!std::isxdigit(uint8_t(c))) return error_at(start, "expected " + std::to_string(digits) + " hex digits");
      v = v * 16 + uint32_t(std::isdigit(uint8_t(c)) ? c - '0' : (std::tolower(c) - 'a' + 10));
      ++i_;
    }
    if (v > kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF)) return error_at(start, "escape names no valid codepoint");
    return v;
  }

  Result<int64_t> parse_count() {
    size_t start = i_;
    int64_t v = 0;
    if (!std::isdigit(uint8_t(peek()))) return error_at(i_, "expected a number");
    while (std::isdigit(uint8_t(peek()))) {
      v = v * 10 + (s_[i_++] - '0');
      if (v > kMaxRepeat) return error_at(start, "repetition count too large");
    }
    return v;
  }

  Status parse_postfix(Seq& item, const std::string& name, size_t start) {
    char c = peek();
    int64_t min = 0, max = -1;
    if (c == '*') {
      ++i_;
    } else if (c == '+') {
      ++i_;
      min = 1;
    } else if (c == '?') {
      ++i_;
      max = 1;
    } else if (c == '{') {
      ++i_;
      skip_space(true);
      auto m = parse_count();
      if (!m.ok()) return m.status();
      min = max = *m;
      skip_space(true);
      if (peek() == ',') {
        ++i_;
        skip_space(true);
        max = -1;
        if (peek() != '}') {
          auto n = parse_count();
          if (!n.ok()) return n.status();
          max = *n;
          skip_space(true);
        }
      }
      if (peek() != '}') return error_at(i_, "expected '}'");
      ++i_;
    } else {
      return Status();
    }
    if (item.size() != 1) {  // a multi-byte literal: repeat it as a whole
      uint32_t r = b_.helper_rule(name);
      LL3_RETURN_IF_ERROR(b_.add_alt(r, std::move(item)));
      item = Seq{make_rule(r)};
    }
    auto rep = b_.repeat(item[0], min, max, name);
    if (!rep.ok()) return error_at(start, rep.message());
    item = std::move(*rep);
    return Status();
  }

  const std::string& s_;
  size_t i_ = 0;
  GrammarBuilder b_;
  std::unordered_set<uint32_t> defined_here_;
};

}  // namespace

Result<std::unique_ptr<Grammar::Impl>> parse_gbnf(const std::string& text, const std::string& root) {
  GbnfParser p(text);
  auto g = p.parse(root);
  if (!g.ok()) return g.status();
  (*g)->gbnf = text;
  return g;
}

}  // namespace ll3::grammar
