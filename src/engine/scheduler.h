// Iteration-level scheduling (continuous batching). Each step takes every running sequence's
// pending tokens (one when generating, a chunk when prefilling) oldest first, then admits waiting
// sequences by priority and arrival while the token budget, the sequence limit and the KV blocks
// allow. A newly admitted sequence starts from the longest prefix the cache holds. When a running
// sequence needs a block and none can be had, the newest running sequence is preempted: its blocks
// are released (its full blocks stay cached) and it waits again, to be recomputed later.
//
// Pure bookkeeping: no model, no threads. Blocks are the KV manager's (kv/kv_manager.h). A step
// is handed out as plain data (SchedulerOutput: ids, counts, tokens, block tables); the engine
// runs it and reports back with computed().
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/kv_manager.h"

namespace ll3 {

struct SchedulerOptions {
  int64_t batch_tokens = 256;
  int64_t max_seqs = 64;
  // Logit rows a step has beyond one per sequence, shared by the all_logits prompt chunks.
  int64_t prompt_logit_rows = 32;
  // The most blocks one sequence's table holds (0: unknown): sizes the step's block-table array
  // once, so that scheduling never allocates.
  int64_t max_seq_blocks = 0;
};

// One sequence's part of a step.
struct ScheduledSeq {
  uint64_t id = 0;
  int64_t n_past = 0;        // positions already computed
  int64_t n_tokens = 0;      // new tokens: positions n_past .. n_past + n_tokens - 1
  int32_t token_begin = 0;   // its first new token in SchedulerOutput::tokens
  int32_t block_begin = 0;   // its block table in SchedulerOutput::block_ids...
  int32_t n_blocks = 0;      // ...holding positions 0 .. n_past + n_tokens - 1
  bool logits = false;       // the step completes the known tokens: sample the next one
  bool all_logits = false;   // a prompt chunk whose every row is scored (prompt log-probabilities)
};

// A step, as plain data. Valid until the next schedule().
struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;
  std::vector<int32_t> tokens;     // every sequence's new tokens, sequence after sequence
  std::vector<int32_t> block_ids;  // every sequence's block table, sequence after sequence
  std::vector<BlockCopy> copies;   // KV rows to copy before anything writes the cache
  std::vector<uint64_t> admitted;  // sequences admitted in this step
  std::vector<uint64_t> preempted; // sequences preempted in this step (waiting again)
  int64_t n_tokens = 0;

  std::span<const int32_t> block_table(const ScheduledSeq& s) const {
    return std::span<const int32_t>(block_ids).subspan(static_cast<size_t>(s.block_begin), static_cast<size_t>(s.n_blocks));
  }
};

// What the scheduler knows of a sequence (read-only to others).
struct SeqState {
  uint64_t id = 0;
  int priority = 0;
  uint64_t arrival = 0;          // add() order
  std::vector<int32_t> tokens;   // prompt, then the generated tokens
  int64_t n_prompt = 0;
  int64_t n_computed = 0;        // positions 0 .. n_computed-1 have KV
  bool running = false;
  bool admitted_once = false;
  int64_t cached_tokens = 0;     // prompt tokens found cached at the first admission
  // Logits of every prompt position: no prefix lookup, and prompt chunks limited by
  // SchedulerOptions::prompt_logit_rows. Cleared once the prompt is scored.
  bool all_logits = false;
  int64_t preemptions = 0;

  int64_t pending() const { return static_cast<int64_t>(tokens.size()) - n_computed; }
};

class Scheduler {
 public:
  Scheduler(KvManager& kv, const SchedulerOptions& options);

  // Queues a sequence. tokens: its prompt (n_prompt = tokens.size()); max_len: the most tokens it
  // will ever hold (its token list and block table are reserved for them now).
  void add(uint64_t id, std::vector<int32_t> tokens, int64_t max_len, int priority, bool all_logits);
  // A token sampled for id: the next step computes it.
  void append(uint64_t id, int32_t token) { seqs_.at(id).tokens.push_back(token); }
  // id's prompt has been scored: it may use the prefix cache again if it is ever recomputed.
  void prompt_scored(uint64_t id) { seqs_.at(id).all_logits = false; }
  // Takes id out of the waiting or running list, releases its blocks (naming its last, partly
  // filled block first, so a later request can copy it) and forgets it.
  void remove(uint64_t id);

  // The next step (no seqs when nothing can run).
  const SchedulerOutput& schedule();
  // After the step's forward pass: advances n_computed and names the blocks that became full.
  void computed(const SchedulerOutput& out);

  const SeqState& seq(uint64_t id) const { return seqs_.at(id); }
  size_t n_running() const { return running_.size(); }
  size_t n_waiting() const { return waiting_.size(); }
  // The waiting sequence that is admitted next (0 when none waits).
  uint64_t next_waiting() const { return waiting_.empty() ? 0 : waiting_.front()->id; }

 private:
  void enqueue(SeqState* s);
  // Moves a waiting s into the running list with its cached prefix, or returns false.
  bool admit(SeqState* s, int64_t budget, int64_t* n_tokens);
  // The tokens of s to run with `budget` left in the step (and the step's extra logit rows).
  int64_t chunk(const SeqState* s, int64_t budget) const;
  // Adds n tokens of s to the step (taking its extra logit rows).
  void add_to_step(SeqState* s, int64_t n);
  void preempt(SeqState* s);
  void release(SeqState* s);

  KvManager& kv_;
  SchedulerOptions opt_;
  std::unordered_map<uint64_t, SeqState> seqs_;
  std::vector<SeqState*> running_;  // admission order
  std::vector<SeqState*> waiting_;  // priority (high first), then arrival
  uint64_t arrivals_ = 0;
  SchedulerOutput out_;
  int64_t extra_rows_ = 0;  // this step's logit rows left for all_logits chunks
};

}  // namespace ll3
