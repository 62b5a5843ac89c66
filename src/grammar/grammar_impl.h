// The compiled form of a grammar: rules over BYTES. A rule is a list of alternatives; an
// alternative is a sequence of elements, each either one byte out of a set or a reference to a
// rule. All alternatives live in one flat array (`elems`), each terminated by kEnd, so a parse
// position is a single index. UTF-8 is expanded into byte sequences when the grammar is built
// (utf8_ranges.h), and repetition into helper rules (grammar_builder.h), so matching only ever
// tests one byte against a 256-bit set.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ll3/grammar.h"

namespace ll3::grammar {

// 256 bits: which byte values a terminal element accepts.
struct ByteSet {
  std::array<uint64_t, 4> w{};
  bool test(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) { w[b >> 6] |= uint64_t(1) << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) set(uint8_t(b));
  }
  bool empty() const { return (w[0] | w[1] | w[2] | w[3]) == 0; }
  ByteSet& operator|=(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) w[i] |= o.w[i];
    return *this;
  }
  bool operator==(const ByteSet& o) const { return w == o.w; }
};

// Element encoding: the kind in the top two bits, an index (byte set or rule) below.
enum : uint32_t { kEnd = 0u, kSetTag = 1u << 30, kRuleTag = 2u << 30, kTagMask = 3u << 30 };
inline bool is_end(uint32_t e) { return e == kEnd; }
inline bool is_set(uint32_t e) { return (e & kTagMask) == kSetTag; }
inline bool is_rule(uint32_t e) { return (e & kTagMask) == kRuleTag; }
inline uint32_t elem_index(uint32_t e) { return e & ~kTagMask; }
inline uint32_t make_set(uint32_t i) { return kSetTag | i; }
inline uint32_t make_rule(uint32_t i) { return kRuleTag | i; }

// "Cannot finish": minimum lengths saturate here (unproductive rules, e.g. `a ::= "x" a`).
inline constexpr int32_t kInfLen = 1 << 29;
inline int32_t sat_add(int32_t a, int32_t b) { return a + b >= kInfLen ? kInfLen : a + b; }

// Limits on what a grammar may grow to (GBNF and schemas are untrusted input).
inline constexpr size_t kMaxElems = 4u << 20;
inline constexpr size_t kMaxRules = 1u << 18;

}  // namespace ll3::grammar

namespace ll3 {

struct Grammar::Impl {
  std::vector<uint32_t> elems;        // all alternatives, each ending with kEnd
  std::vector<uint32_t> alt_off;      // rule r's alternatives: alt_start[alt_off[r] .. alt_off[r+1])
  std::vector<uint32_t> alt_start;    // index into elems of an alternative's first element
  std::vector<grammar::ByteSet> sets;  // terminals' byte sets (deduplicated)
  // min_rest[p]: fewest bytes that finish the alternative containing position p from p on.
  std::vector<int32_t> min_rest;
  std::vector<std::string> rule_names;
  uint32_t root = 0;
  std::string gbnf;  // the grammar's text (what to_gbnf returns)

  uint32_t n_rules() const { return uint32_t(alt_off.size() - 1); }
};

}  // namespace ll3
