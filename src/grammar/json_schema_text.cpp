// GBNF text for JSON values: literals, classes, the shared JSON rules, exact integer and number
// ranges and the string formats that a grammar can enforce exactly.
#include <algorithm>
#include <cctype>
#include <cstring>

#include "grammar/json_schema_internal.h"

namespace ll3::grammar::schema {

namespace {

std::string hex(uint32_t v, int digits) {
  static const char* kHex = "0123456789ABCDEF";
  std::string s(size_t(digits), '0');
  for (int k = digits - 1; k >= 0; --k, v >>= 4) s[size_t(k)] = kHex[v & 15];
  return s;
}

// One codepoint inside a GBNF class or literal.
std::string class_char(uint32_t cp) {
  if (cp < 128 && std::isalnum(int(cp))) return std::string(1, char(cp));
  if (cp <= 0xFF) return "\\x" + hex(cp, 2);
  if (cp <= 0xFFFF) return "\\u" + hex(cp, 4);
  return "\\U" + hex(cp, 8);
}

}  // namespace

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    uint8_t b = uint8_t(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (b < 0x20 || b == 0x7F) {
      out += "\\x" + hex(b, 2);
    } else {
      out += c;  // printable ASCII, and UTF-8 bytes, which the parser reads back as they are
    }
  }
  return out + "\"";
}

std::string gbnf_class(const CodepointRanges& r) {
  std::string out = "[";
  for (auto [lo, hi] : r) {
    out += class_char(lo);
    if (hi != lo) out += "-" + class_char(hi);
  }
  return out + "]";
}

const std::vector<std::pair<std::string, std::string>>& json_primitives() {
  // Whitespace is bounded: one space, or a newline and up to 16 of indentation, so that a model
  // cannot spin on whitespace. Strings exclude raw control characters, and \u escapes name no
  // lone surrogate (a pair is one character: it counts once for minLength / maxLength).
  // Exponents have at most two digits, so that a number does not overflow common parsers'
  // doubles for the sake of its exponent (1e999 is JSON, but few parsers read it back).
  static const std::vector<std::pair<std::string, std::string>> kRules = {
      {"ws", R"(( " " | "\n" [ \t]{0,16} )?)"},
      {"json-hex", R"([0-9a-fA-F])"},
      {"json-char",
       R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" ( [0-9a-cA-Ce-fE-F] json-hex{3} | [dD] [0-7] json-hex{2} ))"
       R"( | "u" [dD] [89abAB] json-hex{2} "\\u" [dD] [c-fC-F] json-hex{2} ))"},
      {"json-string", R"("\"" json-char* "\"")"},
      // At most 15 digits: every such integer is exact in a double (JavaScript's only number).
      {"json-integer", R"("-"? ( "0" | [1-9] [0-9]{0,14} ))"},
      {"json-number", R"(json-integer ( "." [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,2} )?)"},
      {"json-boolean", R"("true" | "false")"},
      {"json-null", R"("null")"},
      {"json-member", R"(json-string ws ":" ws json-value ws)"},
      {"json-object", R"("{" ws ( json-member ( "," ws json-member )* )? "}")"},
      {"json-array", R"("[" ws ( json-value ws ( "," ws json-value ws )* )? "]")"},
      {"json-value", R"(json-object | json-array | json-string | json-number | json-boolean | json-null)"},
  };
  return kRules;
}

// --- integers -------------------------------------------------------------------------------

namespace {

// Decimal strings of one length L between lo and hi (both L digits).
std::string same_length(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  if (lo == hi) return gbnf_literal(lo);
  if (lo[0] == hi[0]) return gbnf_literal(lo.substr(0, 1)) + " " + same_length(lo.substr(1), hi.substr(1));
  std::string rest_lo = lo.substr(1), rest_hi = hi.substr(1);
  bool lo_zero = rest_lo.find_first_not_of('0') == std::string::npos;
  bool hi_nine = rest_hi.find_first_not_of('9') == std::string::npos;
  std::vector<std::string> alts;
  char first = char(lo[0] + (lo_zero ? 0 : 1)), last = char(hi[0] - (hi_nine ? 0 : 1));
  if (!lo_zero) alts.push_back(gbnf_literal(lo.substr(0, 1)) + " " + same_length(rest_lo, std::string(rest_lo.size(), '9')));
  if (first <= last) {
    std::string a = first == last ? gbnf_literal(std::string(1, first)) : std::string("[") + first + "-" + last + "]";
    if (!rest_lo.empty()) a += " [0-9]{" + std::to_string(rest_lo.size()) + "}";
    alts.push_back(a);
  }
  if (!hi_nine) alts.push_back(gbnf_literal(hi.substr(0, 1)) + " " + same_length(std::string(rest_hi.size(), '0'), rest_hi));
  std::string out = "(";
  for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : " ") + alts[k];
  return out + " )";
}

std::string pow10_str(size_t digits_minus_one) { return "1" + std::string(digits_minus_one, '0'); }

// Non-negative integers without leading zeros in [a, b] (b absent: unbounded).
std::string nonneg_range(uint64_t a, std::optional<uint64_t> b) {
  std::string as = std::to_string(a);
  std::vector<std::string> alts;
  size_t max_len = b ? std::to_string(*b).size() : as.size();
  for (size_t len = as.size(); len <= max_len; ++len) {
    std::string lo = len == as.size() ? as : pow10_str(len - 1);
    std::string hi = b && len == max_len ? std::to_string(*b) : std::string(len, '9');
    alts.push_back(same_length(lo, hi));
  }
  if (!b) alts.push_back("[1-9] [0-9]{" + std::to_string(as.size()) + ",}");  // longer: all larger
  std::string out = "(";
  for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : " ") + alts[k];
  return out + " )";
}

}  // namespace

std::string integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  if (!lo || *lo < 0) {  // negatives: "-" and the magnitude in [max(1, -hi), -lo]
    uint64_t mag_lo = hi && *hi < 0 ? uint64_t(-*hi) : 1;
    std::optional<uint64_t> mag_hi;
    if (lo) mag_hi = uint64_t(-*lo);
    if (!mag_hi || mag_lo <= *mag_hi) alts.push_back("\"-\" " + nonneg_range(mag_lo, mag_hi));
  }
  if (!hi || *hi >= 0) {
    uint64_t a = lo && *lo > 0 ? uint64_t(*lo) : 0;
    std::optional<uint64_t> b;
    if (hi) b = uint64_t(*hi);
    if (!b || a <= *b) alts.push_back(nonneg_range(a, b));
  }
  if (alts.empty()) return "";
  std::string out = "(";
  for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : " ") + alts[k];
  return out + " )";
}

// --- numbers --------------------------------------------------------------------------------

namespace {

// Unsigned decimals I or I.F with p <(=) value <(=) q (q absent: unbounded), integer p, q.
std::string unsigned_decimal(uint64_t p, bool p_excl, std::optional<uint64_t> q, bool q_excl) {
  const std::string any_frac = R"(( "." [0-9]+ )?)";
  const std::string nonzero_frac = R"("." [0-9]* [1-9] [0-9]*)";
  const std::string zero_frac = R"(( "." "0"+ )?)";
  std::vector<std::string> alts;
  // Integer part p: a fraction is needed when p itself is excluded.
  if (p_excl) {
    if (!q || p < *q) alts.push_back(gbnf_literal(std::to_string(p)) + " " + nonzero_frac);
  } else if (q && p == *q) {
    if (!q_excl) alts.push_back(gbnf_literal(std::to_string(p)) + " " + zero_frac);
    return alts.empty() ? "" : alts[0];
  } else {
    alts.push_back(gbnf_literal(std::to_string(p)) + " " + any_frac);
  }
  // Integer parts strictly between p and q: any fraction.
  if (!q) {
    alts.push_back(nonneg_range(p + 1, std::nullopt) + " " + any_frac);
  } else if (*q >= p + 2) {
    alts.push_back(nonneg_range(p + 1, *q - 1) + " " + any_frac);
  }
  // Integer part q: only q itself (a zero fraction), when q is included.
  if (q && *q > p && !q_excl) alts.push_back(gbnf_literal(std::to_string(*q)) + " " + zero_frac);
  if (alts.empty()) return "";
  std::string out = "(";
  for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : " ") + alts[k];
  return out + " )";
}

}  // namespace

std::string number_range(std::optional<int64_t> lo, bool lo_excl, std::optional<int64_t> hi, bool hi_excl) {
  std::vector<std::string> alts;
  // Negative values: "-" x with x > 0, x >(=) -hi when hi < 0, x <(=) -lo.
  if (!lo || *lo < 0) {
    uint64_t p = hi && *hi < 0 ? uint64_t(-*hi) : 0;
    bool p_excl = hi && *hi < 0 ? hi_excl : true;
    std::optional<uint64_t> q;
    if (lo) q = uint64_t(-*lo);
    std::string x = unsigned_decimal(p, p_excl, q, lo_excl);
    if (!x.empty()) alts.push_back("\"-\" " + x);
  }
  // Zero and positive values.
  if (!hi || *hi > 0 || (*hi == 0 && !hi_excl)) {
    uint64_t p = lo && *lo >= 0 ? uint64_t(*lo) : 0;
    bool p_excl = lo && *lo >= 0 ? lo_excl : false;
    std::optional<uint64_t> q;
    if (hi) q = uint64_t(*hi);
    std::string x = unsigned_decimal(p, p_excl, q, hi_excl);
    if (!x.empty()) alts.push_back(x);
  }
  if (alts.empty()) return "";
  std::string out = "(";
  for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : " ") + alts[k];
  return out + " )";
}

// --- formats --------------------------------------------------------------------------------

std::optional<std::string> format_content(const std::string& format) {
  // RFC 3339 full-date with each month's days; 02-29 only in leap years (divisible by 4, and
  // centuries only when divisible by 400).
  const std::string leap_year =
      R"(( [0-9] [0-9] ( "0" [48] | [2468] [048] | [13579] [26] ) | ( "0" [48] | [2468] [048] | [13579] [26] ) "00" ))";
  const std::string date = "( [0-9]{4} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )"
                           " | ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" )"
                           " | \"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) ) | " +
                           leap_year + " \"-02-29\" )";
  // RFC 3339 full-time; a leap second (:60) is left out: valid only at particular instants.
  const std::string time = R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]+ )?)"
                           R"( ( "Z" | [-+] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))";
  const std::string octet = R"(( "25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9] ))";
  const std::string h = "[0-9a-fA-F]";
  if (format == "date") return date;
  if (format == "time") return "( " + time + " )";
  if (format == "date-time") return date + " \"T\" " + time;
  if (format == "uuid")
    return h + "{8} \"-\" " + h + "{4} \"-\" " + h + "{4} \"-\" " + h + "{4} \"-\" " + h + "{12}";
  if (format == "ipv4") return octet + " \".\" " + octet + " \".\" " + octet + " \".\" " + octet;
  return std::nullopt;
}

std::string json_char_of(const CodepointRanges& r) {
  // Printable characters stand for themselves, except '"' and '\', which JSON escapes;
  // control characters take their short escape, or \u00XX.
  CodepointRanges raw;
  std::vector<std::string> alts;
  for (auto [lo, hi] : r) {
    for (uint32_t c = lo; c <= std::min<uint32_t>(hi, 0x1F); ++c) {
      static const char* kShort = "\b\f\n\r\t";
      static const char* kLetter = "bfnrt";
      const char* s = std::strchr(kShort, int(c));
      alts.push_back(c != 0 && s ? gbnf_literal(std::string("\\") + kLetter[s - kShort])
                                 : gbnf_literal("\\u00" + hex(c, 2)));
    }
    if (hi < 0x20) continue;
    raw.emplace_back(std::max<uint32_t>(lo, 0x20), hi);
  }
  CodepointRanges printable;
  for (auto [lo, hi] : raw) {  // cut out '"' (0x22) and '\' (0x5C)
    uint32_t start = lo;
    for (uint32_t special : {0x22u, 0x5Cu}) {
      if (special < start || special > hi) continue;
      if (special > start) printable.emplace_back(start, special - 1);
      alts.push_back(gbnf_literal(special == 0x22 ? "\\\"" : "\\\\"));
      start = special + 1;
    }
    if (start <= hi) printable.emplace_back(start, hi);
  }
  if (!printable.empty()) alts.insert(alts.begin(), gbnf_class(printable));
  std::string out = "(";
  for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : " ") + alts[k];
  return out + " )";
}

}  // namespace ll3::grammar::schema
