// Which tokens of a vocabulary a Matcher can accept next. Built once per vocabulary (shared by
// all requests, used from any thread): every token's bytes in a trie, so that allowed() walks
// the grammar once per shared prefix and drops a whole subtree as soon as its prefix is refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/matcher.h"

namespace ll3::grammar {

class StateCache;

class TokenFilter {
 public:
  // token_bytes[i]: token i's bytes (empty for special/control tokens, which the grammar never
  // allows); end_tokens: end-of-generation ids, allowed exactly when the matcher can_end().
  TokenFilter(std::vector<std::string> token_bytes, std::vector<int32_t> end_tokens);

  // Fast single-token check (no allocation once the thread's scratch has grown).
  bool allows(const Matcher& m, int32_t token) const;
  // allowed[i] = 1 for each token the matcher can accept next (its whole bytes), else 0
  // (resized to n_vocab). budget >= 0: only tokens after which min_bytes_to_end() <= budget - 1,
  // so that a request that must finish within `budget` more tokens can (every byte is a token
  // in byte-level BPE); end tokens need no budget.
  void allowed(const Matcher& m, int64_t budget, std::vector<uint8_t>& allowed) const;
  int32_t n_vocab() const { return n_vocab_; }

  // Trie size, for tests and benchmarks.
  size_t n_trie_nodes() const { return nodes_.size(); }

 private:
  struct TrieNode {
    uint32_t child_begin, child_end;  // children: nodes_[child_begin, child_end), by byte
    uint32_t tok_begin, tok_end;      // tokens whose bytes end here: tok_ids_[tok_begin, tok_end)
    uint8_t byte;                     // the byte leading here from the parent
  };
  struct Walk;
  void walk(Walk& w, uint32_t node, size_t in_begin, size_t in_end) const;
  void walk_cached(StateCache& c, int64_t budget, uint8_t* out, uint32_t node, int32_t state) const;

  int32_t n_vocab_ = 0;
  std::vector<std::string> bytes_;
  std::vector<uint8_t> is_end_;
  std::vector<int32_t> end_tokens_;
  std::vector<TrieNode> nodes_;  // nodes_[0]: the root (the empty prefix)
  std::vector<int32_t> tok_ids_;
};

}  // namespace ll3::grammar
