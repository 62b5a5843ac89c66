// The Llama-3 pre-tokenizer: splits text into the pieces BPE runs on, with the split regex of
// tokenizer.json run by PCRE2 (UTF + UCP, JIT-compiled).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ll3 {

// The regex as tokenizer.json and the issue state it.
extern const char* const kLlama3SplitRegex;

class PreTokenizer {
 public:
  static Result<std::unique_ptr<PreTokenizer>> create();
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Appends the [begin, end) byte ranges of the pieces of `text` (which must be valid UTF-8,
  // see sanitize_utf8) to `out`, offset by `base`. Thread-safe.
  void split(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& out,
             uint32_t base = 0) const;

 private:
  PreTokenizer() = default;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

// For text that is not valid UTF-8: the reference (llama.cpp) decodes leniently, turning each
// byte it cannot decode into U+FFFD and re-encoding what it decoded. `out` gets those bytes;
// `regex_safe` the same text with code points PCRE2 refuses (surrogates) swapped for a private-use
// character of the same regex classes and the same length, so offsets agree between the two.
void sanitize_utf8(std::string_view text, std::string& out, std::string& regex_safe);

}  // namespace ll3
