// Llama-3 byte-level BPE: encode text to token ids (with special-token parsing on request),
// decode ids to bytes, and a streaming detokenizer that only ever emits whole UTF-8 characters.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/vocab.h"

namespace ll3 {

class Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> create(TokenizerVocab vocab);

  // BOS first when add_bos (and the vocabulary has one). parse_special: control tokens written
  // in the text ("<|eot_id|>") become their ids; otherwise they are ordinary text. User-defined
  // tokens are always recognised (as llama.cpp does). Thread-safe.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;
  // Appends to `out` instead (no allocation once `out` has capacity and words are cached).
  void encode_into(std::string_view text, bool add_bos, bool parse_special,
                   std::vector<int32_t>& out) const;

  std::string decode(const std::vector<int32_t>& ids) const;  // bytes; special tokens as their text
  std::string_view piece(int32_t id) const;  // the raw bytes of one token ("" if out of range)

  int32_t n_vocab() const { return int32_t(vocab_.tokens.size()); }
  int32_t bos_id() const { return vocab_.bos_id; }
  int32_t eos_id() const { return vocab_.eos_id; }
  int32_t eot_id() const { return vocab_.eot_id; }
  bool is_eog(int32_t id) const;
  bool is_control(int32_t id) const {
    return id >= 0 && id < n_vocab() && vocab_.token_types[id] == kTokenControl;
  }
  // Id of a token by its stored text ("<|eot_id|>", "Ġthe"), or -1.
  int32_t token_id(std::string_view text) const;
  const TokenizerVocab& vocab() const { return vocab_; }

  // Words longer than this many bytes are merged in chunks of this size: bounds the memory a
  // hostile input (100 MB of one letter is a single 100 MB "word") can take. The reference has
  // no such bound; ids can differ only at the seams of words this long.
  static constexpr size_t kMaxWordBytes = 1 << 20;

 private:
  Tokenizer() = default;
  Status init();
  // init's steps, in order: each builds one of the lookup tables below from vocab_.
  Status check_ids();
  Status index_texts();
  Status index_merges();
  Status decode_pieces();
  void index_specials();
  void encode_fragment(std::string_view text, std::vector<int32_t>& out) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  void bpe(std::string_view word, std::vector<int32_t>& out) const;
  // (rank, merged id) of a pair of adjacent tokens, or rank -1.
  std::pair<int32_t, int32_t> find_merge(int32_t left, int32_t right) const;

  TokenizerVocab vocab_;
  std::unique_ptr<PreTokenizer> pre_;
  std::unordered_map<std::string_view, int32_t> text_to_id_;  // views into vocab_.tokens
  int32_t byte_id_[256] = {};                                 // token of each single byte

  // Merge table: open addressing on (left << 32 | right).
  struct MergeSlot {
    uint64_t key = ~0ull;
    int32_t rank = -1;
    int32_t merged = -1;
  };
  std::vector<MergeSlot> merges_;
  uint64_t merge_mask_ = 0;

  // Decoded bytes of every token: piece i is pieces_[piece_off_[i], piece_off_[i + 1]).
  std::string pieces_;
  std::vector<uint32_t> piece_off_;

  // Tokens matched in raw text: control tokens (only with parse_special) and user-defined ones.
  struct Special {
    std::string_view text;
    int32_t id;
    bool control;
  };
  std::vector<Special> specials_by_first_[256];  // longest first
  bool special_first_[256] = {};
  std::vector<bool> is_eog_;

  // Word cache: byte-level BPE result of short, frequent words.
  static constexpr size_t kCacheMaxWordBytes = 48;
  static constexpr size_t kCacheMaxEntries = 1 << 16;
  mutable std::mutex cache_mu_;
  struct SvHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  mutable std::unordered_map<std::string, std::vector<int32_t>, SvHash, std::equal_to<>> cache_;
};

// Streaming detokenizer: push ids, get back only complete UTF-8 (never half a character). Bytes
// that cannot start or continue a valid sequence come out as U+FFFD, one per maximal invalid
// subpart, as soon as that is certain (the rule of Python's errors="replace", transformers'
// streamers and WHATWG TextDecoder); flush() ends the stream the same way.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) { pending_.reserve(256); }
  std::string push(int32_t id);
  // The same into *out (cleared first), reusing its capacity: no allocation once it has grown.
  void push(int32_t id, std::string* out);
  std::string flush();

 private:
  const Tokenizer& tok_;
  std::string pending_;
};

// Convenience: a tokenizer from a GGUF file or a Hugging Face directory / tokenizer.json.
Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& model_or_dir);

}  // namespace ll3
