// Allocation of the KV cache's blocks (kv_cache.h holds their storage), with reference counts and
// a prefix cache.
//
// A block holds up to block_size consecutive positions of a sequence. Once it is full (or when
// its sequence ends) it can be named: by the chained hash of its parent (the hash of every token
// before it, rooted at the model's identity) and its own tokens. A named block is shared
// read-only by any sequence whose tokens start with that chain, its reference count says how
// many hold it, and when the count drops to zero it stays in an LRU list, still findable, until
// the pool needs the room. A sequence only ever writes positions past what it found, into blocks
// it owns alone: a partly matching block is copied (copy on write), never written through.
//
// Nothing here allocates after construction: the indexes are fixed-size open-addressing tables
// and intrusive lists over the blocks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ll3 {

// uint64 -> int32 with linear probing and backward-shift deletion; capacity fixed at
// construction (a power of two, at least twice the most entries it will hold).
class FlatIndex {
 public:
  explicit FlatIndex(size_t max_entries);
  int32_t find(uint64_t key) const;  // -1 if absent
  void put(uint64_t key, int32_t value);
  void erase(uint64_t key);
  size_t size() const { return size_; }

 private:
  size_t slot_of(uint64_t key) const;
  std::vector<uint64_t> keys_;
  std::vector<int32_t> values_;  // -1: empty slot
  size_t mask_ = 0, size_ = 0;
};

class BlockPool {
 public:
  // model_id roots every hash chain, so blocks of another model never match.
  BlockPool(int32_t n_blocks, int32_t block_size, uint64_t model_id);

  int32_t n_blocks() const { return n_blocks_; }
  int32_t block_size() const { return block_size_; }
  // Where every hash chain starts: the model's root, or with a salt (a LoRA adapter set's
  // fingerprint) a root of its own, so that KV computed with other weights never matches.
  uint64_t root_hash(uint64_t salt = 0) const;
  int32_t free_blocks() const { return n_free_; }     // unnamed, unreferenced
  int32_t cached_blocks() const { return n_cached_; } // named, unreferenced: evictable
  int32_t available() const { return n_free_ + n_cached_; }
  int32_t used_blocks() const { return n_blocks_ - available(); }
  int32_t ref_count(int32_t b) const { return blocks_[b].ref; }
  int32_t named_tokens(int32_t b) const { return blocks_[b].n_tokens; }

  // A block for the caller (reference count 1): a free one, else the least recently used cached
  // one, whose name is forgotten. -1 when every block is referenced.
  int32_t allocate();
  void retain(int32_t b);
  // Drops a reference. At zero, a named block joins the most recently used end of the cache
  // list; an unnamed one returns to the free list.
  void release(int32_t b);

  // The hash of `tokens` following the chain `parent`.
  static uint64_t chain_hash(uint64_t parent, std::span<const int32_t> tokens);

  // Names block b (referenced by the caller) as holding `tokens` (1 .. block_size) after the
  // chain `parent`; returns the chain hash through it. A block already named keeps its name
  // when the tokens agree, else it is renamed. A full block whose name another block already
  // has stays out of the full-block index (it is still findable as a partial match).
  uint64_t name(int32_t b, uint64_t parent, std::span<const int32_t> tokens);

  struct Match {
    std::vector<int32_t> blocks;  // full blocks, each retained for the caller
    uint64_t hash = 0;            // chain hash after them
    int32_t partial = -1;         // a block whose first partial_tokens tokens match next (retained)
    int32_t partial_tokens = 0;
    int64_t matched = 0;          // blocks.size() * block_size + partial_tokens
  };
  // The longest cached prefix of `tokens`, at most max_tokens of them. Full blocks come from
  // the hash index; where that chain ends, the named block after it sharing the most leading
  // tokens is the partial match (to be copied, then released).
  Match lookup(std::span<const int32_t> tokens, int64_t max_tokens, uint64_t root);
  Match lookup(std::span<const int32_t> tokens, int64_t max_tokens) { return lookup(tokens, max_tokens, root_); }

  // The cached blocks from least to most recently used (tests, diagnostics).
  std::vector<int32_t> lru_order() const;

 private:
  enum : int32_t { kNone = -1 };
  struct Block {
    int32_t ref = 0;
    int32_t n_tokens = 0;        // named tokens (0: unnamed)
    bool indexed = false;        // the full-block index points at this block
    uint64_t parent = 0, hash = 0;
    int32_t lru_prev = kNone, lru_next = kNone;  // cache list (ref 0 and named)
    int32_t sib_prev = kNone, sib_next = kNone;  // blocks named after the same parent
  };
  void unname(int32_t b);
  void lru_remove(int32_t b);
  void lru_push_back(int32_t b);
  bool tokens_equal(int32_t b, std::span<const int32_t> t) const;
  int32_t common_prefix(int32_t b, std::span<const int32_t> t) const;
  std::span<const int32_t> tokens_of(int32_t b) const {
    return {&tokens_[static_cast<size_t>(b) * block_size_], static_cast<size_t>(blocks_[b].n_tokens)};
  }

  int32_t n_blocks_, block_size_;
  uint64_t root_;
  std::vector<Block> blocks_;
  std::vector<int32_t> tokens_;   // (n_blocks, block_size) the named tokens of each block
  std::vector<int32_t> free_;     // stack of free block ids, low ids on top
  int32_t n_free_ = 0, n_cached_ = 0;
  int32_t lru_head_ = kNone, lru_tail_ = kNone;
  FlatIndex full_;       // chain hash of a full block -> the block
  FlatIndex children_;   // parent hash -> first named block after it (then sib_next)
};

}  // namespace ll3
