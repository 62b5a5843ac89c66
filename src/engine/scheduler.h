// Iteration-level scheduling (continuous batching) over one block pool. Each step takes every
// running sequence's pending tokens (one when generating, a chunk when prefilling) oldest first,
// then admits waiting sequences by priority and arrival while the token budget, the sequence
// limit and the free blocks allow. A newly admitted sequence starts from the longest prefix the
// pool has cached. When a running sequence needs a block and none can be freed, the newest
// running sequence is preempted: its blocks are released (its full blocks stay cached) and it
// waits again, to be recomputed later.
//
// Pure bookkeeping: no model, no threads. The engine runs the forward pass of each step and
// reports back with computed().
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kv/block_pool.h"

namespace ll3 {

// The scheduler's view of a sequence.
struct SeqState {
  uint64_t id = 0;
  int priority = 0;
  uint64_t arrival = 0;          // submit order
  std::vector<int32_t> tokens;   // prompt, then the generated tokens
  int64_t n_prompt = 0;
  int64_t n_computed = 0;        // positions 0 .. n_computed-1 have KV in `blocks`
  std::vector<int32_t> blocks;   // block table
  bool running = false;
  bool admitted_once = false;
  int64_t cached_tokens = 0;     // prompt tokens found cached at the first admission
  // Logits of every prompt position (prompt log-probabilities): no prefix lookup, and prompt
  // chunks limited by SchedulerOptions::prompt_logit_rows. Cleared once the prompt is scored.
  bool all_logits = false;
  int64_t preemptions = 0;
  // Prefix-cache naming: the first named_blocks blocks are named; chain is the hash through them.
  int64_t named_blocks = 0;
  uint64_t chain = 0;

  int64_t pending() const { return static_cast<int64_t>(tokens.size()) - n_computed; }
};

struct SchedulerOptions {
  int64_t batch_tokens = 256;
  int64_t max_seqs = 64;
  bool prefix_cache = true;
  // Logit rows a step has beyond one per sequence, shared by the all_logits prompt chunks.
  int64_t prompt_logit_rows = 32;
};

class Scheduler {
 public:
  Scheduler(BlockPool& pool, const SchedulerOptions& options);

  // Called when a step finds no free block: frees some (e.g. unpins sessions) and returns true,
  // or returns false. Preemption is the last resort.
  void set_reclaim(std::function<bool()> reclaim) { reclaim_ = std::move(reclaim); }

  void enqueue(SeqState* s);
  // Takes s out of the waiting or running list and releases its blocks (naming its last,
  // partly filled block first, so a later request can copy it).
  void remove(SeqState* s);
  // Names s's last partly filled block, so that what it computed can be found after it ends.
  void name_tail(SeqState* s);

  struct Item {
    SeqState* seq;
    int64_t n_tokens;   // tokens[n_computed .. n_computed + n_tokens)
    bool logits;        // the step completes the known tokens: sample the next one
    // seq->all_logits and the chunk is prompt: logits of every row, not only the last.
    bool all_logits = false;
  };
  // KV rows to copy before the step: the first n_tokens positions of block src into dst.
  struct Copy {
    int32_t src, dst, n_tokens;
  };
  struct Step {
    std::vector<Item> items;
    std::vector<Copy> copies;
    std::vector<SeqState*> preempted;
    std::vector<SeqState*> admitted;
    int64_t n_tokens = 0;
  };
  // The next step (empty items when nothing can run). Valid until the next call.
  const Step& schedule();
  // After the step's forward pass: advances n_computed and names the blocks that became full.
  void computed(const Step& step);

  const std::vector<SeqState*>& running() const { return running_; }
  const std::vector<SeqState*>& waiting() const { return waiting_; }
  BlockPool& pool() { return pool_; }

 private:
  // Grows s's block table to hold `end` positions; false (nothing kept) if the pool has no room.
  bool grow(SeqState* s, int64_t end);
  bool grow_or_reclaim(SeqState* s, int64_t end);
  // Moves a waiting s into the running list with its cached prefix, or returns false.
  bool admit(SeqState* s, int64_t budget, int64_t* n_tokens);
  // The tokens of s to run with `budget` left in the step (and the step's extra logit rows).
  int64_t chunk(const SeqState* s, int64_t budget) const;
  // The step's item for n tokens of s (taking its extra logit rows).
  Item item(SeqState* s, int64_t n);
  void preempt(SeqState* s);
  void release_blocks(SeqState* s);

  BlockPool& pool_;
  SchedulerOptions opt_;
  std::function<bool()> reclaim_;
  std::vector<SeqState*> running_;  // admission order
  std::vector<SeqState*> waiting_;  // priority (high first), then arrival
  Step step_;
  int64_t extra_rows_ = 0;  // this step's logit rows left for all_logits chunks
};

}  // namespace ll3
