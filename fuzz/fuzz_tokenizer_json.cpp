// Fuzz target: tokenizer.json (+ tokenizer_config.json) loading. Input: the tokenizer.json text,
// optionally followed by a NUL byte and a tokenizer_config.json text. A vocabulary that loads
// must build a tokenizer or be refused with a Status; a tokenizer that builds must encode and
// decode sample text, and its chat template must render (or fall back) without crashing.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return 0;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t nul = in.find('\0');
  std::string_view tok_json = in.substr(0, nul);
  std::string_view config = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);

  auto vocab = ll3::load_vocab_from_hf_json(tok_json, config);
  if (!vocab.ok()) {
    if (vocab.message().empty()) std::abort();
    return 0;
  }
  std::string chat_template = vocab->chat_template;
  auto tok = ll3::Tokenizer::create(std::move(*vocab));
  if (!tok.ok()) {
    if (tok.message().empty()) std::abort();
    return 0;
  }
  const ll3::Tokenizer& t = **tok;
  for (std::string_view s :
       {std::string_view("Hello world! 123 <|eot_id|>\n\n  x"), tok_json.substr(0, 256)}) {
    for (int flags = 0; flags < 4; ++flags) {
      auto ids = t.encode(s, flags & 2, flags & 1);
      for (int32_t id : ids)
        if (id < 0 || id >= t.n_vocab()) std::abort();
      (void)t.decode(ids);
    }
  }
  std::string warning;
  ll3::ChatTemplateOptions opt;
  opt.now = 1736942400;
  auto out =
      ll3::render_chat(chat_template, {{"system", "s", ""}, {"user", "u", ""}}, opt, &warning);
  if (!out.ok()) std::abort();  // a bad template falls back; only bad options may fail
  return 0;
}
