// The raw Llama-3 vocabulary as both file kinds carry it: GGUF metadata (tokenizer.ggml.*) and a
// Hugging Face tokenizer.json (+ tokenizer_config.json). Loading either gives the same struct,
// and the GGUF writer uses it to write tokenizer metadata back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ll3 {

class GgufFile;

// GGUF token types (llama.cpp's numbering).
enum TokenType : int32_t {
  kTokenUndefined = 0,
  kTokenNormal = 1,
  kTokenUnknown = 2,
  kTokenControl = 3,
  kTokenUserDefined = 4,
  kTokenUnused = 5,
  kTokenByte = 6,
};

struct TokenizerVocab {
  std::vector<std::string> tokens;   // id -> token text as stored (byte-level unicode form)
  std::vector<int32_t> token_types;  // id -> TokenType
  std::vector<std::string> merges;   // rank order, "left right"
  int32_t bos_id = -1, eos_id = -1, eot_id = -1;
  std::vector<int32_t> eog_ids;  // every end-of-generation id (eos, eot, eom, <|end_of_text|>)
  bool add_bos = true;
  std::string chat_template;  // may be empty
  std::string pre = "llama-bpe";
};

// From GGUF metadata (tokenizer.ggml.model must be "gpt2").
Result<TokenizerVocab> load_vocab_from_gguf(const GgufFile& f);

// dir_or_file: a directory with tokenizer.json (+ optional tokenizer_config.json and
// generation_config.json), or a tokenizer.json itself.
Result<TokenizerVocab> load_vocab_from_hf(const std::string& dir_or_file);

// The same from buffers (tests, fuzzing). config_json may be empty.
Result<TokenizerVocab> load_vocab_from_hf_json(std::string_view tokenizer_json,
                                               std::string_view config_json);

// Fills eog_ids from eos/eot and the well-known end-of-generation token texts; sorted, unique.
void finalize_eog_ids(TokenizerVocab& v);

}  // namespace ll3
