// Fuzz target: grammars from untrusted text (GBNF and JSON Schema) and matching against them.
// Input: a mode byte (odd: JSON Schema, even: GBNF), the grammar text up to a NUL byte, then
// bytes fed to a Matcher. A text must compile or be refused with a message; a compiled grammar
// must match any bytes without crashing, keep its state on a refused byte, and its byte mask
// (TokenFilter over a one-byte vocabulary) must agree with accept().
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "grammar/token_filter.h"
#include "ll3/grammar.h"

namespace {

const ll3::grammar::TokenFilter& byte_filter() {
  static const ll3::grammar::TokenFilter f = [] {
    std::vector<std::string> bytes(257);
    for (int b = 0; b < 256; ++b) bytes[size_t(b)] = std::string(1, char(b));
    return ll3::grammar::TokenFilter(std::move(bytes), {256});
  }();
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (64 << 10)) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t nul = in.find('\0');
  std::string text(in.substr(0, nul));
  std::string_view feed = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);

  auto g = (data[0] & 1) ? ll3::Grammar::from_json_schema(text) : ll3::Grammar::from_gbnf(text);
  if (!g.ok()) {
    if (g.message().empty()) std::abort();
    return 0;
  }
  if ((*g)->to_gbnf().empty()) std::abort();
  const auto& f = byte_filter();
  ll3::grammar::Matcher m(*g);
  std::vector<uint8_t> mask;
  for (size_t i = 0; i < feed.size() && i < 256; ++i) {
    int64_t budget = (feed[i] & 1) ? -1 : int64_t(uint8_t(feed[i]));
    f.allowed(m, budget, mask);
    uint8_t b = uint8_t(feed[i]);
    bool allowed_any_budget = f.allows(m, b);
    if (mask[b] && !allowed_any_budget) std::abort();
    if (bool(mask[256]) != m.can_end()) std::abort();
    ll3::grammar::Matcher before = m;
    bool ok = m.accept(std::string_view(&feed[i], 1));
    if (ok != allowed_any_budget) std::abort();
    if (!ok) {
      if (m.can_end() != before.can_end() || m.min_bytes_to_end() != before.min_bytes_to_end()) std::abort();
      break;
    }
    if (m.min_bytes_to_end() < 0 || (m.can_end() != (m.min_bytes_to_end() == 0))) std::abort();
  }
  return 0;
}
