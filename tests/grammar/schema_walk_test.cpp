// Random walks through every schema of the corpus: bytes drawn at random among those the
// grammar allows (a 256-token byte vocabulary through TokenFilter, with a budget), until the end
// token is drawn. Every text must parse as JSON and validate against its schema (a small
// validator of the keywords the compiler supports), and end within its budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "grammar/token_filter.h"
#include "grammar_test_util.h"
#include "schema_corpus.h"

namespace ll3::grammar {
namespace {

using json = nlohmann::json;

size_t codepoints(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

bool ascii(const std::string& s) {
  for (char c : s)
    if (uint8_t(c) >= 0x80) return false;
  return true;
}

bool valid_date(const std::string& s) {
  static const std::regex re(R"(^(\d{4})-(\d{2})-(\d{2})$)");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  int y = std::stoi(m[1]), mo = std::stoi(m[2]), d = std::stoi(m[3]);
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return mo >= 1 && mo <= 12 && d >= 1 && d <= days[mo - 1] + (mo == 2 && leap);
}

bool valid_format(const std::string& f, const std::string& s) {
  static const std::regex time(R"(^([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([zZ]|[+-]([01]\d|2[0-3]):[0-5]\d)$)");
  static const std::regex uuid(R"(^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$)");
  static const std::regex ipv4(R"(^((25[0-5]|2[0-4]\d|1\d\d|[1-9]\d|\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]\d|\d)$)");
  if (f == "date") return valid_date(s);
  if (f == "time") return std::regex_match(s, time);
  if (f == "date-time") {
    size_t t = s.find_first_of("Tt");
    return t != std::string::npos && valid_date(s.substr(0, t)) && std::regex_match(s.substr(t + 1), time);
  }
  if (f == "uuid") return std::regex_match(s, uuid);
  if (f == "ipv4") return std::regex_match(s, ipv4);
  return false;
}

// Why v is not valid under s ("" when it is).
std::string invalid(const json& v, const json& s, const json& root, int depth = 0) {
  if (depth > 100) return "too deep";
  if (s.is_boolean()) return s.get<bool>() ? "" : "false schema";
  if (s.contains("$ref")) {
    std::string r = s["$ref"];
    return invalid(v, r == "#" ? root : root.at(json::json_pointer(r.substr(1))), root, depth + 1);
  }
  if (s.contains("allOf"))
    for (const auto& b : s["allOf"])
      if (auto w = invalid(v, b, root, depth + 1); !w.empty()) return "allOf: " + w;
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key)) continue;
    int n = 0;
    for (const auto& b : s[key]) n += invalid(v, b, root, depth + 1).empty();
    if (n == 0 || (n > 1 && std::string(key) == "oneOf")) return std::string(key) + ": " + std::to_string(n) + " match";
  }
  if (s.contains("const") && v != s["const"]) return "const";
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return "enum";
  if (v.is_null() && s.value("nullable", false)) return "";
  if (s.contains("type")) {
    json types = s["type"].is_array() ? s["type"] : json::array({s["type"]});
    bool ok = false;
    for (const auto& t : types) {
      ok = ok || (t == "null" && v.is_null()) || (t == "boolean" && v.is_boolean()) || (t == "object" && v.is_object()) ||
           (t == "array" && v.is_array()) || (t == "string" && v.is_string()) || (t == "number" && v.is_number()) ||
           (t == "integer" && v.is_number() && v.get<double>() == std::floor(v.get<double>()));
    }
    if (!ok) return "type";
  }
  if (v.is_string()) {
    std::string str = v;
    if (s.contains("minLength") && codepoints(str) < s["minLength"].get<size_t>()) return "minLength";
    if (s.contains("maxLength") && codepoints(str) > s["maxLength"].get<size_t>()) return "maxLength";
    if (s.contains("format") && !valid_format(s["format"], str)) return "format";
    // std::regex works on bytes: a non-ASCII string is checked by the corpus cases instead.
    if (s.contains("pattern") && ascii(str) && !std::regex_search(str, std::regex(s["pattern"].get<std::string>())))
      return "pattern";
  }
  if (v.is_number()) {
    double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return "minimum";
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return "maximum";
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return "exclusiveMinimum";
    if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return "exclusiveMaximum";
  }
  if (v.is_object()) {
    const json props = s.value("properties", json::object());
    for (const auto& r : s.value("required", json::array()))
      if (!v.contains(r.get<std::string>())) return "required " + r.get<std::string>();
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (auto w = invalid(x, props[k], root, depth + 1); !w.empty()) return k + ": " + w;
      } else if (s.contains("additionalProperties")) {
        if (auto w = invalid(x, s["additionalProperties"], root, depth + 1); !w.empty()) return "extra " + k + ": " + w;
      }
    }
  }
  if (v.is_array()) {
    const json prefix = s.value("prefixItems", json::array());
    for (size_t i = 0; i < v.size(); ++i) {
      const json& sub = i < prefix.size() ? prefix[i] : s.value("items", json(true));
      if (auto w = invalid(v[i], sub, root, depth + 1); !w.empty()) return "[" + std::to_string(i) + "]: " + w;
    }
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return "minItems";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return "maxItems";
  }
  return "";
}

TEST(SchemaWalk, RandomTextsParseAndValidate) {
  std::vector<std::string> bytes(257);
  for (int b = 0; b < 256; ++b) bytes[size_t(b)] = std::string(1, char(b));
  const int32_t kEnd = 256;
  TokenFilter f(bytes, {kEnd});
  std::mt19937 rng(1234);
  std::vector<uint8_t> mask;
  int texts = 0;
  for (const auto& c : test::schema_corpus()) {
    SCOPED_TRACE(c.name);
    auto g = test::schema(c.schema);
    json schema = json::parse(c.schema);
    for (int walk = 0; walk < 12; ++walk) {
      Matcher m(g);
      const int64_t budget = m.min_bytes_to_end() + 1 + int64_t(rng() % 120);
      std::string text;
      bool ended = false;
      for (int64_t left = budget; left >= 0 && !ended; --left) {
        f.allowed(m, left, mask);
        if (walk == 0) {  // the mask against one accept() per byte
          for (int b = 0; b < 256; ++b) {
            Matcher copy = m;
            bool want = copy.accept(bytes[size_t(b)]) && copy.min_bytes_to_end() <= left - 1;
            ASSERT_EQ(bool(mask[size_t(b)]), want) << "byte " << b << " after " << text;
          }
          ASSERT_EQ(bool(mask[kEnd]), m.can_end());
        }
        std::vector<int32_t> choices;
        for (int32_t t = 0; t <= kEnd; ++t)
          if (mask[size_t(t)]) choices.push_back(t);
        ASSERT_FALSE(choices.empty()) << text;
        // Ending is likelier than any one byte, so that walks finish before the budget forces them.
        int32_t t = mask[kEnd] && rng() % 4 == 0 ? kEnd : choices[rng() % choices.size()];
        if (t == kEnd) {
          ended = true;
        } else {
          ASSERT_TRUE(m.accept(bytes[size_t(t)]));
          text += bytes[size_t(t)];
        }
      }
      ASSERT_TRUE(ended) << text;
      ASSERT_TRUE(m.can_end());
      json v = json::parse(text, nullptr, false);
      ASSERT_FALSE(v.is_discarded()) << text;
      EXPECT_EQ(invalid(v, schema, schema), "") << text;
      if (getenv("SHOW_WALKS")) std::printf("%s: %s\n", c.name, text.c_str());
      ++texts;
    }
  }
  EXPECT_GE(texts, 30 * 12);
}

}  // namespace
}  // namespace ll3::grammar
