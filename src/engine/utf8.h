// UTF-8 boundaries for streaming output: tokens are byte pieces, and a character may be split
// across two of them, so the CLI prints only up to the last complete character and keeps the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

// utf8_complete_prefix (the longest prefix not ending inside a character) lives with the
// tokenizer's UTF-8 helpers.
#include "tokenizer/unicode.h"

namespace ll3 {

// Bytes in the sequence a lead byte starts (1..4); 0 for a continuation byte or a byte that can
// never start a sequence (0xC0, 0xC1, 0xF5..0xFF).
int utf8_sequence_length(uint8_t lead);


}  // namespace ll3
