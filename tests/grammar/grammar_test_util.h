// Helpers of the grammar tests: run a text through a fresh Matcher.
#pragma once

#include <memory>
#include <string>

#include "grammar/matcher.h"
#include "ll3/grammar.h"

namespace ll3::grammar::test {

inline std::shared_ptr<const Grammar> gbnf(const std::string& text) {
  auto g = Grammar::from_gbnf(text);
  if (!g.ok()) {
    std::fprintf(stderr, "gbnf failed: %s\n%s\n", g.message().c_str(), text.c_str());
    std::abort();
  }
  return *g;
}

inline std::shared_ptr<const Grammar> schema(const std::string& text) {
  auto g = Grammar::from_json_schema(text);
  if (!g.ok()) {
    std::fprintf(stderr, "schema failed: %s\n%s\n", g.message().c_str(), text.c_str());
    std::abort();
  }
  return *g;
}

// Bytes of `s` accepted one at a time before the first refused one (s.size() if none was).
inline size_t accepted_prefix(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  Matcher m(g);
  for (size_t i = 0; i < s.size(); ++i)
    if (!m.accept(std::string_view(s).substr(i, 1))) return i;
  return s.size();
}

// The whole text is a complete match.
inline bool matches(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  Matcher m(g);
  return m.accept(s) && m.can_end();
}

}  // namespace ll3::grammar::test
