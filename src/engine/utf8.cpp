#include "engine/utf8.h"

namespace ll3 {

int utf8_sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;  // continuation byte, or an overlong 2-byte lead
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

namespace {

// Whether the second byte `b` may follow `lead` in a well-formed sequence (RFC 3629 excludes
// overlong forms, surrogates and code points past U+10FFFF through these ranges).
bool valid_second_byte(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return (b & 0xC0) == 0x80;
  }
}

}  // namespace

size_t utf8_complete_prefix(std::string_view s) {
  const size_t n = s.size();
  // Find the last byte that is not a continuation byte, looking back at most 3 bytes.
  size_t i = n;
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    if ((uint8_t(s[n - back]) & 0xC0) != 0x80) {
      i = n - back;
      break;
    }
  }
  if (i == n) return n;  // empty, or only stray continuation bytes at the end
  const uint8_t lead = uint8_t(s[i]);
  const int need = utf8_sequence_length(lead);
  const size_t have = n - i;
  if (need == 0 || have >= size_t(need)) return n;
  if (have >= 2 && !valid_second_byte(lead, uint8_t(s[i + 1]))) return n;
  return i;  // a character that the next piece may complete
}

}  // namespace ll3
