#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "io/gguf.h"
#include "tokenizer/unicode.h"

namespace ll3 {

static inline uint64_t pair_key(int32_t a, int32_t b) {
  return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
}

static inline uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::create(TokenizerVocab vocab) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->vocab_ = std::move(vocab);
  LL3_RETURN_IF_ERROR(t->init());
  return t;
}

Status Tokenizer::init() {
  LL3_RETURN_IF_ERROR(check_ids());
  auto pre = PreTokenizer::create();
  if (!pre.ok()) return pre.status();
  pre_ = std::move(*pre);
  LL3_RETURN_IF_ERROR(index_texts());
  LL3_RETURN_IF_ERROR(index_merges());
  LL3_RETURN_IF_ERROR(decode_pieces());
  index_specials();
  return ok_status();
}

// The vocabulary's size, its token types' count and the special ids; marks the
// end-of-generation ids.
Status Tokenizer::check_ids() {
  const TokenizerVocab& v = vocab_;
  const size_t n = v.tokens.size();
  if (n == 0) return Status::error("tokenizer: empty vocabulary");
  if (n >= (1u << 31)) return Status::error("tokenizer: vocabulary too large");
  if (v.token_types.size() != n) {
    return Status::errorf("tokenizer: %zu token types for %zu tokens", v.token_types.size(), n);
  }
  auto check_id = [&](int32_t id, const char* what) -> Status {
    if (id < -1 || id >= int32_t(n))
      return Status::errorf("tokenizer: %s id %d out of range [0, %zu)", what, id, n);
    return ok_status();
  };
  LL3_RETURN_IF_ERROR(check_id(v.bos_id, "bos"));
  LL3_RETURN_IF_ERROR(check_id(v.eos_id, "eos"));
  LL3_RETURN_IF_ERROR(check_id(v.eot_id, "eot"));
  is_eog_.assign(n, false);
  for (int32_t id : v.eog_ids) {
    LL3_RETURN_IF_ERROR(check_id(id, "end-of-generation"));
    if (id >= 0) is_eog_[id] = true;
  }
  return ok_status();
}

// Text -> id, and the id of each byte's token (byte-level BPE needs all 256).
Status Tokenizer::index_texts() {
  const TokenizerVocab& v = vocab_;
  const size_t n = v.tokens.size();
  // The first id wins if a malformed vocabulary repeats a text.
  text_to_id_.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) text_to_id_.emplace(std::string_view(v.tokens[i]), int32_t(i));

  for (int b = 0; b < 256; ++b) {
    auto it = text_to_id_.find(byte_to_utf8(uint8_t(b)));
    if (it == text_to_id_.end()) {
      return Status::errorf("tokenizer: the vocabulary has no token for byte 0x%02x", b);
    }
    byte_id_[b] = it->second;
  }
  return ok_status();
}

// Merges: "left right" -> (rank, id of left+right), in an open-addressed table.
Status Tokenizer::index_merges() {
  const TokenizerVocab& v = vocab_;
  size_t cap = 16;
  while (cap < v.merges.size() * 2) cap <<= 1;
  merges_.assign(cap, MergeSlot{});
  merge_mask_ = cap - 1;
  std::string joined;
  for (size_t r = 0; r < v.merges.size(); ++r) {
    const std::string& m = v.merges[r];
    size_t sp = m.find(' ', 1);
    if (sp == std::string::npos)
      return Status::errorf("tokenizer: merge %zu ('%s') has no space", r, m.c_str());
    std::string_view a(m.data(), sp), b(m.data() + sp + 1, m.size() - sp - 1);
    auto ia = text_to_id_.find(a), ib = text_to_id_.find(b);
    joined.assign(a);
    joined.append(b);
    auto ij = text_to_id_.find(joined);
    // A merge whose parts or result are not tokens can never apply; skip it.
    if (ia == text_to_id_.end() || ib == text_to_id_.end() || ij == text_to_id_.end()) continue;
    uint64_t key = pair_key(ia->second, ib->second);
    for (uint64_t h = mix(key) & merge_mask_;; h = (h + 1) & merge_mask_) {
      if (merges_[h].key == key) break;  // duplicate pair: the lower rank stays
      if (merges_[h].rank < 0) {
        merges_[h] = {key, int32_t(r), ij->second};
        break;
      }
    }
  }
  return ok_status();
}

// Decoded bytes of every token.
Status Tokenizer::decode_pieces() {
  const TokenizerVocab& v = vocab_;
  const size_t n = v.tokens.size();
  piece_off_.resize(n + 1);
  pieces_.reserve(n * 7);
  for (size_t i = 0; i < n; ++i) {
    piece_off_[i] = uint32_t(pieces_.size());
    const std::string& t = v.tokens[i];
    int32_t type = v.token_types[i];
    if (type == kTokenControl || type == kTokenUserDefined) {
      pieces_.append(t);
    } else {
      size_t k = 0;
      while (k < t.size()) {
        size_t start = k;
        int32_t cp = utf8_next(t, k);
        int byte = cp >= 0 ? codepoint_to_byte(uint32_t(cp)) : -1;
        if (byte >= 0)
          pieces_.push_back(char(byte));
        else
          pieces_.append(t, start, k - start);  // not byte-level text: keep it as it is
      }
    }
    if (pieces_.size() >= (1ull << 32))
      return Status::error("tokenizer: vocabulary text too large");
  }
  piece_off_[n] = uint32_t(pieces_.size());
  return ok_status();
}

// Special (control and user-defined) tokens by their first byte, longest first, so that
// encoding can match the longest special text at a position.
void Tokenizer::index_specials() {
  const TokenizerVocab& v = vocab_;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    int32_t type = v.token_types[i];
    if ((type != kTokenControl && type != kTokenUserDefined) || v.tokens[i].empty()) continue;
    uint8_t first = uint8_t(v.tokens[i][0]);
    specials_by_first_[first].push_back({v.tokens[i], int32_t(i), type == kTokenControl});
    special_first_[first] = true;
  }
  for (auto& list : specials_by_first_) {
    std::stable_sort(list.begin(), list.end(), [](const Special& a, const Special& b) {
      return a.text.size() > b.text.size();
    });
  }
}

bool Tokenizer::is_eog(int32_t id) const { return id >= 0 && id < n_vocab() && is_eog_[id]; }

int32_t Tokenizer::token_id(std::string_view text) const {
  auto it = text_to_id_.find(text);
  return it == text_to_id_.end() ? -1 : it->second;
}

std::string_view Tokenizer::piece(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return {};
  return std::string_view(pieces_.data() + piece_off_[id], piece_off_[id + 1] - piece_off_[id]);
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out.append(piece(id));
  return out;
}

std::pair<int32_t, int32_t> Tokenizer::find_merge(int32_t left, int32_t right) const {
  uint64_t key = pair_key(left, right);
  for (uint64_t h = mix(key) & merge_mask_;; h = (h + 1) & merge_mask_) {
    const MergeSlot& s = merges_[h];
    if (s.key == key) return {s.rank, s.merged};
    if (s.rank < 0) return {-1, -1};
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  encode_into(text, add_bos, parse_special, out);
  return out;
}

void Tokenizer::encode_into(std::string_view text, bool add_bos, bool parse_special,
                            std::vector<int32_t>& out) const {
  if (add_bos && vocab_.bos_id >= 0) out.push_back(vocab_.bos_id);
  // Special tokens split the text into fragments; each fragment is pre-tokenized on its own.
  // Leftmost match wins, the longest at that position.
  size_t frag = 0;
  const size_t n = text.size();
  for (size_t i = 0; i < n; ++i) {
    uint8_t c = uint8_t(text[i]);
    if (!special_first_[c]) continue;
    for (const Special& s : specials_by_first_[c]) {
      if (!parse_special && s.control) continue;
      if (s.text.size() <= n - i &&
          std::memcmp(text.data() + i, s.text.data(), s.text.size()) == 0) {
        if (i > frag) encode_fragment(text.substr(frag, i - frag), out);
        out.push_back(s.id);
        i += s.text.size() - 1;
        frag = i + 1;
        break;
      }
    }
  }
  if (frag < n) encode_fragment(text.substr(frag), out);
}

void Tokenizer::encode_fragment(std::string_view text, std::vector<int32_t>& out) const {
  thread_local std::vector<std::pair<uint32_t, uint32_t>> pieces;
  pieces.clear();
  if (utf8_is_valid(text)) {
    // The offsets are 32-bit: a text over 1 GiB is split in 1 GiB slices (at a character
    // boundary), a bound far beyond any prompt.
    constexpr size_t kSlice = size_t(1) << 30;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = std::min(text.size(), pos + kSlice);
      while (end < text.size() && (uint8_t(text[end]) & 0xC0) == 0x80) --end;
      pieces.clear();
      pre_->split(text.substr(pos, end - pos), pieces);
      for (auto [b, e] : pieces) encode_word(text.substr(pos + b, e - b), out);
      pos = end;
    }
    return;
  }
  std::string clean, regex_safe;
  sanitize_utf8(text, clean, regex_safe);
  pre_->split(regex_safe, pieces);
  for (auto [b, e] : pieces) encode_word(std::string_view(clean).substr(b, e - b), out);
}

void Tokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() <= kCacheMaxWordBytes) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t start = out.size();
  if (word.size() <= kMaxWordBytes) {
    bpe(word, out);
  } else {
    size_t pos = 0;
    while (pos < word.size()) {
      size_t end = std::min(word.size(), pos + kMaxWordBytes);
      while (end < word.size() && end > pos + 1 && (uint8_t(word[end]) & 0xC0) == 0x80) --end;
      bpe(word.substr(pos, end - pos), out);
      pos = end;
    }
  }
  if (word.size() <= kCacheMaxWordBytes) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.size() >= kCacheMaxEntries) cache_.clear();
    cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + start, out.end()));
  }
}

void Tokenizer::bpe(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  // The word in byte-level form; a word that is a token is emitted whole (tokenizer.json's
  // "ignore_merges": true, which llama.cpp applies for Llama-3 too).
  thread_local std::string text;
  text.clear();
  for (char c : word) text.append(byte_to_utf8(uint8_t(c)));
  if (auto it = text_to_id_.find(text); it != text_to_id_.end()) {
    out.push_back(it->second);
    return;
  }
  if (word.size() == 1) {  // (unreachable with a full byte table; kept for clarity)
    out.push_back(byte_id_[uint8_t(word[0])]);
    return;
  }

  // Symbols in a linked list; a min-heap of candidate merges ordered by (rank, position),
  // packed into one 64-bit key so that the heap compares once.
  struct Sym {
    int32_t id, prev, next;
  };
  struct Cand {
    uint64_t key;  // rank << 32 | left position
    int32_t right, left_id, right_id, merged;
  };
  thread_local std::vector<Sym> sym;
  thread_local std::vector<Cand> heap;
  sym.clear();
  heap.clear();
  const int32_t n = int32_t(word.size());
  for (int32_t i = 0; i < n; ++i)
    sym.push_back({byte_id_[uint8_t(word[i])], i - 1, i + 1 < n ? i + 1 : -1});
  auto worse = [](const Cand& a, const Cand& b) { return a.key > b.key; };
  auto candidate = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return false;
    auto [rank, merged] = find_merge(sym[l].id, sym[r].id);
    if (rank < 0) return false;
    heap.push_back(
        {(uint64_t(uint32_t(rank)) << 32) | uint32_t(l), r, sym[l].id, sym[r].id, merged});
    return true;
  };
  for (int32_t i = 0; i + 1 < n; ++i) candidate(i, i + 1);
  std::make_heap(heap.begin(), heap.end(), worse);  // O(n) for the initial pairs
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    Cand c = heap.back();
    heap.pop_back();
    const int32_t left = int32_t(uint32_t(c.key));
    Sym& L = sym[left];
    // Stale if either side was merged away or changed since the candidate was made.
    if (L.id != c.left_id || L.next != c.right || sym[c.right].id != c.right_id) continue;
    Sym& R = sym[c.right];
    L.id = c.merged;
    L.next = R.next;
    if (R.next >= 0) sym[R.next].prev = left;
    R.id = -1;
    if (candidate(L.prev, left)) std::push_heap(heap.begin(), heap.end(), worse);
    if (candidate(left, L.next)) std::push_heap(heap.begin(), heap.end(), worse);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

void StreamDecoder::push(int32_t id, std::string* out) {
  out->clear();
  pending_.append(tok_.piece(id));
  size_t k = utf8_complete_prefix(pending_);
  if (k == 0) return;
  append_utf8_lossy(*out, std::string_view(pending_).substr(0, k));
  pending_.erase(0, k);
}

std::string StreamDecoder::push(int32_t id) {
  std::string out;
  push(id, &out);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  append_utf8_lossy(out, pending_);
  pending_.clear();
  return out;
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& model_or_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  bool is_gguf = false;
  if (fs::is_regular_file(model_or_dir, ec)) {
    // A GGUF file starts with the magic "GGUF"; anything else is taken for tokenizer.json.
    FILE* f = std::fopen(model_or_dir.c_str(), "rb");
    if (!f) return Status::error("cannot open " + model_or_dir);
    char magic[4] = {};
    is_gguf = std::fread(magic, 1, 4, f) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
    std::fclose(f);
  } else if (!fs::is_directory(model_or_dir, ec)) {
    return Status::error("no such model file or directory: " + model_or_dir);
  }
  Result<TokenizerVocab> vocab = Status::error("unreachable");
  if (is_gguf) {
    auto g = GgufFile::open(model_or_dir);
    if (!g.ok()) return g.status();
    vocab = load_vocab_from_gguf(**g);
  } else {
    vocab = load_vocab_from_hf(model_or_dir);
  }
  if (!vocab.ok()) return vocab.status();
  return Tokenizer::create(std::move(*vocab));
}

}  // namespace ll3
