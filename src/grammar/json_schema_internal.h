// Pieces of the JSON Schema compiler (json_schema.cpp) that stand on their own: GBNF text
// helpers, the shared JSON rules, integer and number ranges, string formats and the regex
// subset of `pattern`. Each returns a GBNF expression (rule names, literals, groups).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "grammar/utf8_ranges.h"

namespace ll3::grammar::schema {

// "text" as a GBNF literal (bytes outside printable ASCII escaped).
std::string gbnf_literal(std::string_view bytes);
// A GBNF character class matching exactly the codepoints of `r` (normalized, non-empty).
std::string gbnf_class(const CodepointRanges& r);

// The shared JSON rules (ws, json-string, json-value, ...), in an order where each appears
// after nothing it needs; `name` -> GBNF body.
const std::vector<std::pair<std::string, std::string>>& json_primitives();

// Integers in [lo, hi] (either side open when absent), exact. |bounds| <= 1e18.
std::string integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);
// Numbers (decimal notation, no exponent) in the range with integer bounds; excl: strict.
std::string number_range(std::optional<int64_t> lo, bool lo_excl, std::optional<int64_t> hi, bool hi_excl);

// The content (between the quotes) of a string of this format, or nullopt when the format is
// not one that can be enforced.
std::optional<std::string> format_content(const std::string& format);

// A JSON string (quotes included) whose decoded value matches `pattern` (ECMA-262 subset:
// literals, classes, \d \w \s, groups, alternation, ? * + {m,n}, ^ $ at the ends). The error
// names what is not supported.
Result<std::string> pattern_string(const std::string& pattern);
// The JSON-string content (escaped where JSON needs it) of one codepoint of `r`.
std::string json_char_of(const CodepointRanges& r);

}  // namespace ll3::grammar::schema
