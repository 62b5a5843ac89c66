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

// Splits the source into text and tags, applying whitespace control.
std::vector<Segment> segment(std::string src) {
  // jinja2 normalises newlines and drops one trailing newline (keep_trailing_newline=False).
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
  src.swap(norm);

  std::vector<Segment> out;
  size_t pos = 0;
  bool line_starting = true;
  bool strip_next = false;  // the previous tag ended with "-"
  while (pos <= src.size()) {
    size_t open = pos;
    char type = 0;
    for (;;) {
      open = src.find('{', open);
      if (open == std::string::npos || open + 1 >= src.size()) {
        open = std::string::npos;
        break;
      }
      char c = src[open + 1];
      if (c == '{' || c == '%' || c == '#') {
        type = c;
        break;
      }
      ++open;
    }
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
    size_t inner = open + 2;
    char mod = inner < src.size() ? src[inner] : 0;
    if (mod == '-') {
      text = rstrip_ws(text);
      ++inner;
    } else {
      if (mod == '+') ++inner;
      if (mod != '+' && type != '{') {  // lstrip_blocks
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if (l_pos > 0 || line_starting) {
          bool only_ws = l_pos < text.size();
          for (size_t k = l_pos; k < text.size(); ++k)
            if (text[k] != ' ' && text[k] != '\t') only_ws = false;
          if (only_ws) text.erase(l_pos);
        }
      }
    }
    if (!text.empty()) out.push_back({Segment::Text, text, pos});

    // Find the closer, skipping string literals inside expressions and statements.
    const char* closer = type == '{' ? "}}" : type == '%' ? "%}" : "#}";
    size_t close = std::string::npos;
    if (type == '#') {
      close = src.find(closer, inner);
    } else {
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
          close = k;
          break;
        }
      }
    }
    if (close == std::string::npos) throw Error(strprintf("unclosed tag at offset %zu", open));
    size_t inner_end = close;
    char end_mod = inner_end > inner ? src[inner_end - 1] : 0;
    if (end_mod == '-' || end_mod == '+') --inner_end;
    pos = close + 2;
    strip_next = end_mod == '-';
    line_starting = false;
    if (strip_next) {
      // The stripped whitespace belongs to this match: does it end a line?
      size_t k = pos, len;
      while (k < src.size() && is_py_space_at(src, k, &len)) k += len;
      line_starting = k > pos && src[k - 1] == '\n';
    } else if (end_mod != '+' && type != '{' && pos < src.size() && src[pos] == '\n') {
      ++pos;  // trim_blocks
      line_starting = true;
    }
    if (type != '#') {
      out.push_back({type == '{' ? Segment::Var : Segment::Block,
                     src.substr(inner, inner_end - inner), open});
    }
    if (pos == src.size() && !strip_next) break;
  }
  return out;
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
    if (std::isalpha(uint8_t(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(uint8_t(s[j])) || s[j] == '_')) ++j;
      t.kind = Tok::Name;
      t.text = s.substr(i, j - i);
      i = j;
    } else if (std::isdigit(uint8_t(c))) {
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
      i = j;
    } else if (c == '\'' || c == '"') {
      // Python string escapes.
      std::string v;
      size_t j = i + 1;
      for (;; ++j) {
        if (j >= s.size()) throw Error(strprintf("unterminated string at offset %zu", t.pos));
        char d = s[j];
        if (d == c) break;
        if (d != '\\' || j + 1 >= s.size()) {
          v += d;
          continue;
        }
        char e = s[++j];
        switch (e) {
          case 'n':
            v += '\n';
            break;
          case 't':
            v += '\t';
            break;
          case 'r':
            v += '\r';
            break;
          case 'b':
            v += '\b';
            break;
          case 'f':
            v += '\f';
            break;
          case 'v':
            v += '\v';
            break;
          case 'a':
            v += '\a';
            break;
          case '0':
            v += '\0';
            break;
          case '\\':
            v += '\\';
            break;
          case '\'':
            v += '\'';
            break;
          case '"':
            v += '"';
            break;
          case '\n':
            break;
          case 'x':
          case 'u':
          case 'U': {
            size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            if (j + n >= s.size())
              throw Error(strprintf("bad \\%c escape at offset %zu", e, base + j));
            uint32_t cp = 0;
            for (size_t k = 1; k <= n; ++k) {
              char h = s[j + k];
              if (!std::isxdigit(uint8_t(h)))
                throw Error(strprintf("bad \\%c escape at offset %zu", e, base + j));
              cp = cp * 16 +
                   uint32_t(std::isdigit(uint8_t(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
            }
            if (cp > 0x10FFFF)
              throw Error(strprintf("bad code point escape at offset %zu", base + j));
            append_utf8(v, cp);
            j += n;
            break;
          }
          default:
            v += '\\';
            v += e;  // unknown escapes stay as written, as in Python
        }
      }
      t.kind = Tok::Str;
      t.text = std::move(v);
      i = j + 1;
    } else {
      static const char* ops[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*",
                                  "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                  "]",  "{",  "}",  ",",  ".",  ":",  "|"};
      bool found = false;
      for (const char* op : ops) {
        size_t n = std::strlen(op);
        if (s.compare(i, n, op) == 0) {
          t.kind = Tok::Op;
          t.text = op;
          i += n;
          found = true;
          break;
        }
      }
      if (!found) throw Error(strprintf("unexpected character '%c' at offset %zu", c, t.pos));
    }
    out.push_back(std::move(t));
  }
  Tok end;
  end.kind = Tok::End;
  end.pos = base + s.size();
  out.push_back(end);
  return out;
}

}  // namespace ll3::jinja
