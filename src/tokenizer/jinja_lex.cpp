#include "tokenizer/jinja_lex.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/status.h"
#include "tokenizer/jinja_value.h"
#include "tokenizer/unicode.h"

namespace ll3::jinja {

static bool is_py_space_at(const std::string& s, size_t i, size_t* len) {
  size_t k = i;
  int32_t cp = utf8_next(s, k);
  *len = k - i;
  return cp >= 0 && py_isspace(uint32_t(cp));
}

static std::string rstrip_ws(const std::string& s) {
  size_t end = s.size();
  // Walk back over whole characters.
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (uint8_t(s[start]) & 0xC0) == 0x80) --start;
    size_t len;
    if (!is_py_space_at(s, start, &len) || start + len != end) break;
    end = start;
  }
  return s.substr(0, end);
}

// jinja2 normalises newlines and drops one trailing newline (keep_trailing_newline=False).
static std::string normalize_newlines(const std::string& src) {
  std::string norm;
  norm.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      norm += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      norm += src[i];
    }
  }
  if (!norm.empty() && norm.back() == '\n') norm.pop_back();
  return norm;
}

// The next tag opener ("{{", "{%" or "{#") at or after `pos`, or npos; *type is its second
// character.
static size_t find_tag_open(const std::string& src, size_t pos, char* type) {
  size_t open = pos;
  for (;;) {
    open = src.find('{', open);
    if (open == std::string::npos || open + 1 >= src.size()) return std::string::npos;
    char c = src[open + 1];
    if (c == '{' || c == '%' || c == '#') {
      *type = c;
      return open;
    }
    ++open;
  }
}

// lstrip_blocks: spaces and tabs between a line's start and a block tag go.
static void lstrip_block_line(std::string& text, bool line_starting) {
  size_t l_pos = text.rfind('\n');
  l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
  if (l_pos > 0 || line_starting) {
    bool only_ws = l_pos < text.size();
    for (size_t k = l_pos; k < text.size(); ++k)
      if (text[k] != ' ' && text[k] != '\t') only_ws = false;
    if (only_ws) text.erase(l_pos);
  }
}

// The offset of the tag's closer, skipping string literals inside expressions and statements;
// npos when there is none.
static size_t find_tag_close(const std::string& src, size_t inner, char type) {
  const char* closer = type == '{' ? "}}" : type == '%' ? "%}" : "#}";
  if (type == '#') return src.find(closer, inner);
  char quote = 0;
  for (size_t k = inner; k + 1 < src.size(); ++k) {
    char c = src[k];
    if (quote) {
      if (c == '\\')
        ++k;
      else if (c == quote)
        quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == closer[0] && src[k + 1] == closer[1]) {
      return k;
    }
  }
  return std::string::npos;
}

// Whitespace control after a tag that ends at `pos`: "-" leaves the whitespace to be stripped
// from the next text; otherwise a block or comment tag eats one newline (trim_blocks). Returns
// whether the next text starts a line.
static bool trim_after_tag(const std::string& src, char type, char end_mod, size_t& pos) {
  if (end_mod == '-') {
    // The stripped whitespace belongs to this match: does it end a line?
    size_t k = pos, len;
    while (k < src.size() && is_py_space_at(src, k, &len)) k += len;
    return k > pos && src[k - 1] == '\n';
  }
  if (end_mod != '+' && type != '{' && pos < src.size() && src[pos] == '\n') {
    ++pos;  // trim_blocks
    return true;
  }
  return false;
}

// Splits the source into text and tags, applying whitespace control.
std::vector<Segment> segment(std::string src) {
  src = normalize_newlines(src);
  std::vector<Segment> out;
  size_t pos = 0;
  bool line_starting = true;
  bool strip_next = false;  // the previous tag ended with "-"
  while (pos <= src.size()) {
    char type = 0;
    size_t open = find_tag_open(src, pos, &type);
    std::string text = src.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
    if (strip_next) {
      size_t k = 0, len;
      while (k < text.size() && is_py_space_at(text, k, &len)) k += len;
      text.erase(0, k);
    }
    if (open == std::string::npos) {
      if (!text.empty()) out.push_back({Segment::Text, text, pos});
      break;
    }
    // The tag's opening modifier: "-" strips the whitespace before it, "+" keeps it.
    size_t inner = open + 2;
    char mod = inner < src.size() ? src[inner] : 0;
    if (mod == '-' || mod == '+') ++inner;
    if (mod == '-')
      text = rstrip_ws(text);
    else if (mod != '+' && type != '{')
      lstrip_block_line(text, line_starting);
    if (!text.empty()) out.push_back({Segment::Text, text, pos});

    size_t close = find_tag_close(src, inner, type);
    if (close == std::string::npos) throw Error(strprintf("unclosed tag at offset %zu", open));
    size_t inner_end = close;
    char end_mod = inner_end > inner ? src[inner_end - 1] : 0;
    if (end_mod == '-' || end_mod == '+') --inner_end;
    pos = close + 2;
    strip_next = end_mod == '-';
    line_starting = trim_after_tag(src, type, end_mod, pos);
    if (type != '#') {
      out.push_back({type == '{' ? Segment::Var : Segment::Block,
                     src.substr(inner, inner_end - inner), open});
    }
    if (pos == src.size() && !strip_next) break;
  }
  return out;
}

// The lexer's steps each read one token starting at s[i] into `t` and return the offset past it.

static size_t lex_name(const std::string& s, size_t i, Tok& t) {
  size_t j = i;
  while (j < s.size() && (std::isalnum(uint8_t(s[j])) || s[j] == '_')) ++j;
  t.kind = Tok::Name;
  t.text = s.substr(i, j - i);
  return j;
}

// Python number literals: digits with "_" separators, an optional fraction and exponent.
static size_t lex_number(const std::string& s, size_t i, Tok& t) {
  size_t j = i;
  bool is_float = false;
  while (j < s.size() && (std::isdigit(uint8_t(s[j])) || s[j] == '_')) ++j;
  if (j + 1 < s.size() && s[j] == '.' && std::isdigit(uint8_t(s[j + 1]))) {
    is_float = true;
    ++j;
    while (j < s.size() && (std::isdigit(uint8_t(s[j])) || s[j] == '_')) ++j;
  }
  if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
    size_t k = j + 1;
    if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
    if (k < s.size() && std::isdigit(uint8_t(s[k]))) {
      is_float = true;
      j = k;
      while (j < s.size() && std::isdigit(uint8_t(s[j]))) ++j;
    }
  }
  std::string num;
  for (size_t k = i; k < j; ++k)
    if (s[k] != '_') num += s[k];
  if (is_float) {
    t.kind = Tok::Float;
    t.f = std::strtod(num.c_str(), nullptr);
  } else {
    t.kind = Tok::Int;
    errno = 0;
    t.i = std::strtoll(num.c_str(), nullptr, 10);
    if (errno) throw Error(strprintf("integer literal too large at offset %zu", t.pos));
  }
  return j;
}

// The character a one-letter Python escape stands for ('n' -> newline), or -1 for none.
static int simple_escape(char e) {
  switch (e) {
    case 'n':
      return '\n';
    case 't':
      return '\t';
    case 'r':
      return '\r';
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case 'v':
      return '\v';
    case 'a':
      return '\a';
    case '0':
      return '\0';
    case '\\':
      return '\\';
    case '\'':
      return '\'';
    case '"':
      return '"';
    default:
      return -1;
  }
}

// \xHH, \uHHHH, \UHHHHHHHH at s[j] (the letter): appends the code point as UTF-8 and returns
// the offset of its last digit.
static size_t append_code_point_escape(const std::string& s, size_t j, size_t base,
                                       std::string& v) {
  char e = s[j];
  size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
  if (j + n >= s.size()) throw Error(strprintf("bad \\%c escape at offset %zu", e, base + j));
  uint32_t cp = 0;
  for (size_t k = 1; k <= n; ++k) {
    char h = s[j + k];
    if (!std::isxdigit(uint8_t(h)))
      throw Error(strprintf("bad \\%c escape at offset %zu", e, base + j));
    cp = cp * 16 + uint32_t(std::isdigit(uint8_t(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
  }
  if (cp > 0x10FFFF) throw Error(strprintf("bad code point escape at offset %zu", base + j));
  append_utf8(v, cp);
  return j + n;
}

// The escape whose letter is s[j] (after a backslash): appends what it stands for and returns
// the offset of its last character.
static size_t append_escape(const std::string& s, size_t j, size_t base, std::string& v) {
  char e = s[j];
  if (int c = simple_escape(e); c >= 0) {
    v += char(c);
    return j;
  }
  if (e == '\n') return j;  // a backslash-newline is a line continuation: nothing
  if (e == 'x' || e == 'u' || e == 'U') return append_code_point_escape(s, j, base, v);
  v += '\\';
  v += e;  // unknown escapes stay as written, as in Python
  return j;
}

// A quoted string with Python's escapes.
static size_t lex_string(const std::string& s, size_t i, size_t base, Tok& t) {
  char quote = s[i];
  std::string v;
  size_t j = i + 1;
  for (;; ++j) {
    if (j >= s.size()) throw Error(strprintf("unterminated string at offset %zu", t.pos));
    char d = s[j];
    if (d == quote) break;
    if (d != '\\' || j + 1 >= s.size()) {
      v += d;
      continue;
    }
    j = append_escape(s, j + 1, base, v);
  }
  t.kind = Tok::Str;
  t.text = std::move(v);
  return j + 1;
}

// Operators, longest first so that "**" is not read as two "*".
static size_t lex_op(const std::string& s, size_t i, Tok& t) {
  static const char* ops[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                              ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};
  for (const char* op : ops) {
    size_t n = std::strlen(op);
    if (s.compare(i, n, op) == 0) {
      t.kind = Tok::Op;
      t.text = op;
      return i + n;
    }
  }
  throw Error(strprintf("unexpected character '%c' at offset %zu", s[i], t.pos));
}

std::vector<Tok> lex(const std::string& s, size_t base) {
  std::vector<Tok> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      ++i;
      continue;
    }
    Tok t;
    t.pos = base + i;
    if (std::isalpha(uint8_t(c)) || c == '_')
      i = lex_name(s, i, t);
    else if (std::isdigit(uint8_t(c)))
      i = lex_number(s, i, t);
    else if (c == '\'' || c == '"')
      i = lex_string(s, i, base, t);
    else
      i = lex_op(s, i, t);
    out.push_back(std::move(t));
  }
  Tok end;
  end.kind = Tok::End;
  end.pos = base + s.size();
  out.push_back(end);
  return out;
}

}  // namespace ll3::jinja
