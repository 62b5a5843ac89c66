// The KV manager: each sequence's block table and prefix-cache chain, between the scheduler (which
// decides who runs) and the block pool (which owns the blocks). It looks a new sequence's prefix
// up in the cache, grows its table as it computes, names the blocks it fills so later requests
// find them, and gives everything back when the sequence ends or is preempted. The scheduler
// never touches a block id itself.
//
// A sequence is known by its id from open() to close(). Its tokens are the caller's: every call
// that hashes or names passes them in. Nothing here allocates on the per-token path: block tables
// are reserved at open().
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"

namespace ll3 {

// KV rows to copy before a step: the first n_tokens positions of block src into dst.
struct BlockCopy {
  int32_t src, dst, n_tokens;
};

class KvManager {
 public:
  KvManager(BlockPool& pool, bool prefix_cache);

  // Called when an allocation finds no free block: frees some (e.g. unpins a session) and returns
  // true, or returns false. Preemption, the scheduler's last resort, comes only after it.
  void set_reclaim(std::function<bool()> reclaim) { reclaim_ = std::move(reclaim); }
  // Asks the reclaim callback for blocks once: true if it freed some.
  bool reclaim() { return reclaim_ && reclaim_(); }

  // Starts tracking sequence `id` with an empty table of room for max_blocks blocks. Its chain
  // starts at the pool's root for `salt` (BlockPool::root_hash): 0 for the base model.
  void open(uint64_t id, int64_t max_blocks, uint64_t salt = 0);
  // Forgets `id`; its blocks must have been freed.
  void close(uint64_t id);

  // For a sequence with no blocks: takes the longest cached prefix of tokens[0 .. max_tokens)
  // (full blocks shared, a partly matching block copied into one of its own, the copy appended to
  // *copies). Returns the positions it now holds (0 without the prefix cache).
  int64_t lookup(uint64_t id, std::span<const int32_t> tokens, int64_t max_tokens, std::vector<BlockCopy>* copies);
  // Grows id's table to hold `end` positions, reclaiming when the pool is short. False, with the
  // table as it was, when there is no room even then.
  bool allocate(uint64_t id, int64_t end);
  // Names the blocks that the first n_computed tokens filled (full blocks only).
  void name_full(uint64_t id, std::span<const int32_t> tokens, int64_t n_computed);
  // Names id's last, partly filled block too, so what it computed can be found after it ends.
  void name_tail(uint64_t id, std::span<const int32_t> tokens, int64_t n_computed);
  // Releases id's blocks, last first (so eviction takes a chain's tail before the head that
  // other prompts share), after naming its tail. The table is empty afterwards.
  void free(uint64_t id, std::span<const int32_t> tokens, int64_t n_computed);
  // Releases id's blocks without naming anything (an admission that found no room).
  void drop(uint64_t id);
  // Shrinks id's table to the blocks that hold `end` positions, releasing the rest (the rows of
  // rejected speculative tokens). Those blocks were grown for them, never shared or named.
  void trim(uint64_t id, int64_t end);

  std::span<const int32_t> blocks(uint64_t id) const { return seqs_.at(id).blocks; }
  // Blocks that allocate() can still hand out without reclaiming: free plus cached.
  int64_t available() const { return pool_.available(); }
  int64_t block_size() const { return pool_.block_size(); }
  BlockPool& pool() { return pool_; }

 private:
  struct SeqBlocks {
    std::vector<int32_t> blocks;  // block table: positions [i * bs, (i + 1) * bs) in blocks[i]
    int64_t named = 0;            // the first `named` blocks are named...
    uint64_t chain = 0;           // ...and chain is the hash through them
    uint64_t root = 0;            // where its chain starts
  };
  bool grow(SeqBlocks& s, int64_t end);
  void reset(SeqBlocks& s);

  BlockPool& pool_;
  bool prefix_cache_;
  std::function<bool()> reclaim_;
  std::unordered_map<uint64_t, SeqBlocks> seqs_;
};

}  // namespace ll3
