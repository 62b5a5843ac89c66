// Codepoint sets (character classes) as UTF-8 byte sequences. The grammar works on bytes, so a
// class like [^"\\] becomes alternatives such as [\x20-\x21\x23-\x5b\x5d-\x7f] |
// [\xc2-\xdf][\x80-\xbf] | \xe0[\xa0-\xbf][\x80-\xbf] | ... that match exactly the valid UTF-8
// encodings of its codepoints (never surrogates, never overlong forms).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ll3::grammar {

inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// Inclusive codepoint ranges.
using CodepointRanges = std::vector<std::pair<uint32_t, uint32_t>>;

// Sorted, merged, clipped to [0, 0x10FFFF].
CodepointRanges normalize_ranges(CodepointRanges r);
// Every valid codepoint (surrogates excluded) not in `r` (normalized).
CodepointRanges complement_ranges(const CodepointRanges& r);

// One UTF-8 encoding shape: byte k of a match lies in [seq[k].first, seq[k].second].
using ByteRangeSeq = std::vector<std::pair<uint8_t, uint8_t>>;
// The encodings of every valid codepoint in `r` (normalized), as disjoint shapes.
std::vector<ByteRangeSeq> utf8_sequences(const CodepointRanges& r);

// Appends the UTF-8 encoding of cp (cp <= 0x10FFFF).
void append_utf8(std::string& out, uint32_t cp);
// Decodes one codepoint at s[i] (advancing i); invalid UTF-8 yields the byte itself.
uint32_t decode_utf8(const std::string& s, size_t& i);

}  // namespace ll3::grammar
