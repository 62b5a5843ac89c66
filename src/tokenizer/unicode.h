// UTF-8 helpers and the GPT-2 byte-level mapping used by the Llama-3 vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ll3 {

// GPT-2 "bytes to unicode": every byte maps to one printable code point (printable bytes map to
// themselves, the rest to U+0100..U+0143), so that a token's bytes can be stored as text.
uint32_t byte_to_codepoint(uint8_t b);
// The inverse; -1 when `cp` is not the image of a byte.
int codepoint_to_byte(uint32_t cp);
// UTF-8 of byte_to_codepoint(b) (1 or 2 bytes).
std::string_view byte_to_utf8(uint8_t b);

// Appends the UTF-8 encoding of `cp`. Surrogates are encoded like any other 3-byte code point
// (the reference tokenizer does the same); cp must be <= 0x10FFFF.
void append_utf8(std::string& out, uint32_t cp);

// Length of the valid UTF-8 sequence at s[i], or 0 when the bytes there are not a valid,
// complete sequence (strict: no overlongs, no surrogates, nothing above U+10FFFF).
size_t utf8_valid_len(std::string_view s, size_t i);
// True when the whole string is valid UTF-8.
bool utf8_is_valid(std::string_view s);

// Decodes one code point at s[i] and advances i; returns -1 (and advances by 1) on an error.
// Strict like utf8_valid_len.
int32_t utf8_next(std::string_view s, size_t& i);

// Appends `bytes` to `out` as valid UTF-8, replacing each maximal invalid subpart with U+FFFD
// (the WHATWG / Python errors="replace" rule).
void append_utf8_lossy(std::string& out, std::string_view bytes);

// For a streaming decoder: how many leading bytes of `s` can be emitted now. A trailing,
// still-incomplete but so far valid sequence is held back; everything else is final.
size_t utf8_complete_prefix(std::string_view s);

}  // namespace ll3
