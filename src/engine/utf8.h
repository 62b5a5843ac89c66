// UTF-8 boundaries for streaming output: tokens are byte pieces, and a character may be split
// across two of them, so the CLI prints only up to the last complete character and keeps the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ll3 {

// Bytes in the sequence a lead byte starts (1..4); 0 for a continuation byte or a byte that can
// never start a sequence (0xC0, 0xC1, 0xF5..0xFF).
int utf8_sequence_length(uint8_t lead);

// Length of the longest prefix of `s` that does not end inside an incomplete UTF-8 character:
// s.size() unless s ends with the first bytes of a character that more bytes could still
// complete. Invalid bytes are not held back (no later byte can make them valid).
size_t utf8_complete_prefix(std::string_view s);

}  // namespace ll3
