#include "tokenizer/unicode.h"

#include <array>

namespace ll3 {
namespace {

struct ByteTables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> from_cp{};  // code points below 0x144
  std::array<char[3], 256> utf8{};
  std::array<uint8_t, 256> utf8_len{};
  ByteTables() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      to_cp[b] = printable ? uint32_t(b) : next++;
      from_cp[to_cp[b]] = int16_t(b);
      std::string s;
      append_utf8(s, to_cp[b]);
      utf8_len[b] = uint8_t(s.size());
      for (size_t k = 0; k < s.size(); ++k) utf8[b][k] = s[k];
    }
  }
};

const ByteTables& tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) { return tables().to_cp[b]; }

int codepoint_to_byte(uint32_t cp) {
  return cp < tables().from_cp.size() ? tables().from_cp[cp] : -1;
}

std::string_view byte_to_utf8(uint8_t b) {
  const auto& t = tables();
  return std::string_view(t.utf8[b], t.utf8_len[b]);
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

// Per the Unicode table of well-formed byte sequences: the allowed range of the second byte
// depends on the lead byte (this is what rules out overlongs, surrogates and > U+10FFFF).
static inline bool second_byte_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

static inline size_t seq_len_for_lead(uint8_t c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

// Number of bytes at s[i] that form a (possibly truncated) well-formed prefix; `need` gets the
// full length the lead byte announces (0 for an invalid lead).
static inline size_t valid_prefix(std::string_view s, size_t i, size_t* need) {
  uint8_t c = uint8_t(s[i]);
  size_t n = seq_len_for_lead(c);
  *need = n;
  if (n <= 1) return n;
  size_t k = 1;
  for (; k < n && i + k < s.size(); ++k) {
    uint8_t b = uint8_t(s[i + k]);
    bool ok = k == 1 ? second_byte_ok(c, b) : (b & 0xC0) == 0x80;
    if (!ok) break;
  }
  return k;
}

size_t utf8_valid_len(std::string_view s, size_t i) {
  size_t need;
  size_t k = valid_prefix(s, i, &need);
  return (need != 0 && k == need) ? need : 0;
}

bool utf8_is_valid(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    if (uint8_t(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t len = utf8_valid_len(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

int32_t utf8_next(std::string_view s, size_t& i) {
  size_t len = utf8_valid_len(s, i);
  if (len == 0) {
    ++i;
    return -1;
  }
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + i;
  i += len;
  switch (len) {
    case 1:
      return p[0];
    case 2:
      return ((p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    case 3:
      return ((p[0] & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    default:
      return ((p[0] & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
  }
}

void append_utf8_lossy(std::string& out, std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t need;
    size_t k = valid_prefix(s, i, &need);
    if (need != 0 && k == need) {
      out.append(s.data() + i, need);
      i += need;
    } else {
      out.append("\xEF\xBF\xBD");
      i += k == 0 ? 1 : k;  // a maximal subpart is replaced by one U+FFFD
    }
  }
}

size_t utf8_complete_prefix(std::string_view s) {
  // Only the last up-to-3 bytes can be an incomplete sequence.
  size_t start = s.size() >= 3 ? s.size() - 3 : 0;
  for (size_t i = start; i < s.size(); ++i) {
    uint8_t c = uint8_t(s[i]);
    if ((c & 0xC0) == 0x80) continue;
    size_t need;
    size_t k = valid_prefix(s, i, &need);
    if (need > 1 && k == s.size() - i && k < need) return i;  // valid so far, truncated
  }
  return s.size();
}

}  // namespace ll3
