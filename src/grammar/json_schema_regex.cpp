// `pattern` (ECMA-262 regular expressions, a subset) -> GBNF over the JSON-encoded string. A
// pattern matches anywhere in the string unless anchored, so an unanchored side becomes any
// characters (json-char*). What the subset leaves out (backreferences, lookaround, \b, \p{...},
// anchors inside) is refused by name rather than approximated.
#include <cctype>

#include "grammar/json_schema_internal.h"

namespace ll3::grammar::schema {

namespace {

constexpr int kMaxDepth = 32;
constexpr int64_t kMaxCount = 1000;

CodepointRanges digit_set() { return {{'0', '9'}}; }
CodepointRanges word_set() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
CodepointRanges space_set() {
  return normalize_ranges({{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                           {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
                           {0xFEFF, 0xFEFF}});
}

class RegexParser {
 public:
  explicit RegexParser(const std::string& p) : p_(p) {}

  Result<std::string> parse() {
    bool start_anchor = false, end_anchor = false;
    std::string body = p_;
    if (!body.empty() && body[0] == '^') {
      start_anchor = true;
      i_ = 1;
    }
    if (body.size() > i_ && body.back() == '$') {
      // A '$' that a backslash escapes is a literal (count the backslashes before it).
      size_t k = body.size() - 1, slashes = 0;
      while (k > 0 && body[k - 1] == '\\') --k, ++slashes;
      if (slashes % 2 == 0) {
        end_anchor = true;
        end_ = body.size() - 1;
      }
    }
    if (end_ == std::string::npos) end_ = p_.size();
    auto e = parse_alt(0);
    if (!e.ok()) return e;
    if (i_ != end_) return fail(std::string("unexpected '") + p_[i_] + "'");
    std::string out = "\"\\\"\" ";
    if (!start_anchor) out += "json-char* ";
    out += *e;
    if (!end_anchor) out += " json-char*";
    return out + " \"\\\"\"";
  }

 private:
  Status fail(const std::string& what) const {
    return Status::error(what + " (at offset " + std::to_string(i_) + " of the pattern)");
  }
  bool more() const { return i_ < end_; }
  char peek() const { return more() ? p_[i_] : '\0'; }

  Result<std::string> parse_alt(int depth) {
    if (depth > kMaxDepth) return fail("groups nested too deeply");
    std::vector<std::string> alts;
    for (;;) {
      auto s = parse_concat(depth);
      if (!s.ok()) return s;
      alts.push_back(s->empty() ? "\"\"" : *s);
      if (peek() != '|') break;
      ++i_;
    }
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : " ") + alts[k];
    return out + " )";
  }

  Result<std::string> parse_concat(int depth) {
    std::string out;
    while (more() && peek() != '|' && peek() != ')') {
      auto atom = parse_atom(depth);
      if (!atom.ok()) return atom;
      auto q = parse_quantifier(*atom);
      if (!q.ok()) return q;
      out += (out.empty() ? "" : " ") + *q;
    }
    return out;
  }

  Result<std::string> parse_quantifier(const std::string& atom) {
    char c = peek();
    std::string suffix;
    if (c == '*' || c == '+' || c == '?') {
      ++i_;
      suffix = std::string(1, c);
    } else if (c == '{' && i_ + 1 < end_ && std::isdigit(uint8_t(p_[i_ + 1]))) {
      ++i_;
      auto m = parse_int();
      if (!m.ok()) return m.status();
      std::string s = "{" + std::to_string(*m);
      if (peek() == ',') {
        ++i_;
        s += ",";
        if (peek() != '}') {
          auto n = parse_int();
          if (!n.ok()) return n.status();
          if (*n < *m) return fail("quantifier {m,n} with n below m");
          s += std::to_string(*n);
        }
      }
      if (peek() != '}') return fail("unterminated quantifier");
      ++i_;
      suffix = s + "}";
    } else {
      return atom;
    }
    if (peek() == '?') ++i_;  // lazy: the same strings match
    if (peek() == '+') return fail("possessive quantifier");
    if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') return fail("nothing to repeat");
    return "( " + atom + " )" + suffix;
  }

  Result<int64_t> parse_int() {
    int64_t v = 0;
    if (!std::isdigit(uint8_t(peek()))) return fail("expected a number in the quantifier");
    while (std::isdigit(uint8_t(peek()))) {
      v = v * 10 + (p_[i_++] - '0');
      if (v > kMaxCount) return fail("repetition count over " + std::to_string(kMaxCount));
    }
    return v;
  }

  Result<std::string> parse_atom(int depth) {
    char c = peek();
    if (c == '(') {
      ++i_;
      if (peek() == '?') {
        if (p_.compare(i_, 2, "?:") == 0) {
          i_ += 2;
        } else if (p_.compare(i_, 2, "?<") == 0 && i_ + 2 < end_ && p_[i_ + 2] != '=' && p_[i_ + 2] != '!') {
          size_t close = p_.find('>', i_);
          if (close == std::string::npos || close >= end_) return fail("unterminated group name");
          i_ = close + 1;
        } else {
          return fail("lookaround '(?...)'");
        }
      }
      auto inner = parse_alt(depth + 1);
      if (!inner.ok()) return inner;
      if (peek() != ')') return fail("unclosed '('");
      ++i_;
      return "( " + *inner + " )";
    }
    if (c == '[') return parse_class();
    if (c == '.') {
      ++i_;
      return json_char_of(complement_ranges({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
    }
    if (c == '^' || c == '$') return fail(std::string("anchor '") + c + "' inside the pattern");
    if (c == '*' || c == '+' || c == '?') return fail("nothing to repeat");
    if (c == ')') return fail("unmatched ')'");
    CodepointRanges set;
    if (c == '\\') {
      auto s = parse_escape(false);
      if (!s.ok()) return s.status();
      set = *s;
    } else {
      uint32_t cp = decode_utf8(p_, i_);
      set = {{cp, cp}};
    }
    return json_char_of(normalize_ranges(set));
  }

  // After '\': a set (one codepoint for a plain escape).
  Result<CodepointRanges> parse_escape(bool in_class) {
    ++i_;
    if (!more()) return fail("pattern ends with '\\'");
    char c = p_[i_++];
    switch (c) {
      case 'd': return digit_set();
      case 'D': return complement_ranges(digit_set());
      case 'w': return word_set();
      case 'W': return complement_ranges(word_set());
      case 's': return space_set();
      case 'S': return complement_ranges(space_set());
      case 'n': return CodepointRanges{{'\n', '\n'}};
      case 'r': return CodepointRanges{{'\r', '\r'}};
      case 't': return CodepointRanges{{'\t', '\t'}};
      case 'f': return CodepointRanges{{'\f', '\f'}};
      case 'v': return CodepointRanges{{'\v', '\v'}};
      case '0': return CodepointRanges{{0, 0}};
      case 'x': return hex_escape(2);
      case 'u': return hex_escape(4);
      case 'b':
        if (in_class) return CodepointRanges{{'\b', '\b'}};
        return fail("word boundary '\\b'");
      case 'B': return fail("word boundary '\\B'");
      case 'p': case 'P': return fail("Unicode property escape '\\" + std::string(1, c) + "'");
      case 'k': return fail("named backreference '\\k'");
      case 'c': return fail("control escape '\\c'");
      default:
        if (std::isdigit(uint8_t(c))) return fail("backreference '\\" + std::string(1, c) + "'");
        if (std::isalnum(uint8_t(c))) return fail("unknown escape '\\" + std::string(1, c) + "'");
        --i_;
        uint32_t cp = decode_utf8(p_, i_);  // an escaped punctuation character stands for itself
        return CodepointRanges{{cp, cp}};
    }
  }

  Result<CodepointRanges> hex_escape(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      char c = peek();
      if (!std::isxdigit(uint8_t(c))) return fail("bad hex escape");
      v = v * 16 + uint32_t(std::isdigit(uint8_t(c)) ? c - '0' : std::tolower(c) - 'a' + 10);
      ++i_;
    }
    if (v >= 0xD800 && v <= 0xDFFF) return fail("surrogate escape");
    return CodepointRanges{{v, v}};
  }

  Result<std::string> parse_class() {
    ++i_;
    bool negate = peek() == '^';
    if (negate) ++i_;
    CodepointRanges set;
    while (more() && peek() != ']') {  // ECMA-262: "[]" matches nothing, "[^]" anything
      auto lo = class_atom();
      if (!lo.ok()) return lo.status();
      if (peek() == '-' && i_ + 1 < end_ && p_[i_ + 1] != ']' && lo->size() == 1 && (*lo)[0].first == (*lo)[0].second) {
        ++i_;
        auto hi = class_atom();
        if (!hi.ok()) return hi.status();
        if (hi->size() != 1 || (*hi)[0].first != (*hi)[0].second) return fail("class range to a set");
        if ((*hi)[0].first < (*lo)[0].first) return fail("reversed class range");
        set.emplace_back((*lo)[0].first, (*hi)[0].first);
      } else {
        set.insert(set.end(), lo->begin(), lo->end());
      }
    }
    if (peek() != ']') return fail("unterminated character class");
    ++i_;
    set = normalize_ranges(set);
    if (negate) set = complement_ranges(set);
    if (set.empty()) return fail("character class that matches nothing");
    return json_char_of(set);
  }

  Result<CodepointRanges> class_atom() {
    if (peek() == '\\') return parse_escape(true);
    if (peek() == '[' && i_ + 1 < end_ && (p_[i_ + 1] == ':' || p_[i_ + 1] == '=' || p_[i_ + 1] == '.')) {
      return fail("POSIX class");
    }
    uint32_t cp = decode_utf8(p_, i_);
    return CodepointRanges{{cp, cp}};
  }

  const std::string& p_;
  size_t i_ = 0;
  size_t end_ = std::string::npos;
};

}  // namespace

Result<std::string> pattern_string(const std::string& pattern) {
  if (pattern.size() > 4096) return Status::error("pattern longer than 4096 bytes");
  RegexParser p(pattern);
  return p.parse();
}

}  // namespace ll3::grammar::schema
