#include "grammar/utf8_ranges.h"

#include <algorithm>

namespace ll3::grammar {

CodepointRanges normalize_ranges(CodepointRanges r) {
  CodepointRanges out;
  for (auto& [lo, hi] : r) hi = std::min(hi, kMaxCodepoint);
  std::sort(r.begin(), r.end());
  for (auto [lo, hi] : r) {
    if (lo > hi) continue;
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

CodepointRanges complement_ranges(const CodepointRanges& r) {
  CodepointRanges out;
  uint32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodepoint) out.emplace_back(next, kMaxCodepoint);
  return out;
}

static int utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

static void encode(uint32_t cp, uint8_t* b) {
  switch (utf8_len(cp)) {
    case 1: b[0] = uint8_t(cp); break;
    case 2: b[0] = uint8_t(0xC0 | (cp >> 6)); b[1] = uint8_t(0x80 | (cp & 0x3F)); break;
    case 3:
      b[0] = uint8_t(0xE0 | (cp >> 12));
      b[1] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
      b[2] = uint8_t(0x80 | (cp & 0x3F));
      break;
    default:
      b[0] = uint8_t(0xF0 | (cp >> 18));
      b[1] = uint8_t(0x80 | ((cp >> 12) & 0x3F));
      b[2] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
      b[3] = uint8_t(0x80 | (cp & 0x3F));
  }
}

// [lo, hi] has one encoded length. Splits it until every piece is a "box": each byte position
// varies over a full range independently of the others, so one shape describes it exactly.
static void split_same_length(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>& out) {
  int n = utf8_len(lo);
  for (int i = 1; i < n; ++i) {
    uint32_t m = (uint32_t(1) << (6 * i)) - 1;  // the low i continuation bytes
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      split_same_length(lo, lo | m, out);
      split_same_length((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      split_same_length(lo, (hi & ~m) - 1, out);
      split_same_length(hi & ~m, hi, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a);
  encode(hi, b);
  ByteRangeSeq seq;
  for (int k = 0; k < n; ++k) seq.emplace_back(a[k], b[k]);
  out.push_back(std::move(seq));
}

std::vector<ByteRangeSeq> utf8_sequences(const CodepointRanges& r) {
  static const uint32_t kBounds[] = {0x7F, 0x7FF, 0xD7FF, 0xDFFF, 0xFFFF, 0x10FFFF};
  std::vector<ByteRangeSeq> out;
  for (auto [lo, hi] : r) {
    uint32_t start = lo;
    for (uint32_t bound : kBounds) {
      if (start > hi) break;
      if (start > bound) continue;
      uint32_t end = std::min(hi, bound);
      if (bound != 0xDFFF) split_same_length(start, end, out);  // surrogates: never valid
      start = end + 1;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  uint8_t b[4];
  encode(cp, b);
  out.append(reinterpret_cast<const char*>(b), size_t(utf8_len(cp)));
}

uint32_t decode_utf8(const std::string& s, size_t& i) {
  uint8_t c = uint8_t(s[i]);
  int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n <= 1 || i + size_t(n) > s.size()) {
    ++i;
    return c;
  }
  uint32_t cp = c & (0x7F >> n);
  for (int k = 1; k < n; ++k) {
    uint8_t d = uint8_t(s[i + size_t(k)]);
    if ((d & 0xC0) != 0x80) {
      ++i;
      return c;
    }
    cp = (cp << 6) | (d & 0x3F);
  }
  i += size_t(n);
  return cp;
}

}  // namespace ll3::grammar
