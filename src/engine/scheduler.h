// Iteration-level scheduling (continuous batching). Each step takes every running sequence's
// pending tokens (one when generating, a chunk when prefilling) oldest first, then admits waiting
// sequences by priority and arrival while the token budget, the sequence limit and the KV blocks
// allow. A newly admitted sequence starts from the longest prefix the cache holds. When a running
// sequence needs a block and none can be had, the newest running sequence is preempted: its blocks
// are released (its full blocks stay cached) and it waits again, to be recomputed later.
//
// With a step cost model (SchedulerOptions::cost), a step that has decode rows takes them first,
// then prompt chunks (running prefills and admissions, by priority then arrival) only as large
// as keeps the step's predicted time within the inter-token target: a long prompt then slows the
// running streams by a bounded factor instead of stalling them for a whole batch_tokens chunk.
//
// Pure bookkeeping: no model, no threads. Blocks are the KV manager's (kv/kv_manager.h). A step
// is handed out as plain data (SchedulerOutput: ids, counts, tokens, block tables); the engine
// runs it and reports back with computed().
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/step_cost.h"
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
  // Logit rows a step has for guessed tokens (speculation; 0: none), shared by the sequences
  // that guess.
  int64_t draft_rows = 0;
  // Latency-bounded steps (null: every step takes up to batch_tokens, prompts included). While
  // a step has decode rows, its prompt chunks are cut so that the cost model's prediction of the
  // step stays within itl_target_s (0: kDefaultItlFactor x the step's decode rows alone;
  // negative: no bound). The first prompt of a step always gets min_prompt_chunk tokens, so a
  // prompt never starves behind streams whose decode rows alone exceed the target.
  const StepCostModel* cost = nullptr;
  double itl_target_s = 0;
  int64_t min_prompt_chunk = 16;
};

// The default inter-token target, as a multiple of the step of decode rows alone. While a long
// prompt is prefilled beside running streams, their inter-token time is at most this multiple
// of the step they would otherwise run, and the prompt gets (1 - 1 / factor) of each step, so
// its time to first token stretches by factor / (factor - 1) over an idle engine's, and by what
// small chunks cost more per token than whole ones (about 10% on two Zen 5 cores; 2.0-2.2x
// measured at 2.2). 2.2 keeps the promise of at most 3x the streams' gaps before the prompt
// came, with the streams' own step growing as their contexts do (about 15% over a 4096-token
// prefill) and the p99's noise (steps 10-15% over the target on a shared 2-core host).
inline constexpr double kDefaultItlFactor = 2.2;

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
  int32_t n_draft = 0;       // the last n_draft new tokens are guesses: every row from the last
                             // known token on gives logits (1 + n_draft rows)
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
  StepShape shape;                 // the step's cost features (StepCostModel)

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
  // An embedding's prompt: no prefix lookup (a cached position has no hidden row to pool).
  bool embedding = false;
  int64_t preemptions = 0;
  int64_t n_draft = 0;     // the last n_draft tokens are guesses, until verified()
  int64_t n_rejected = 0;  // guesses verified() rejected in this step (computed() skips them)
  uint64_t last_step = 0;  // the last schedule() that ran it

  int64_t pending() const { return static_cast<int64_t>(tokens.size()) - n_computed; }
};

class Scheduler {
 public:
  Scheduler(KvManager& kv, const SchedulerOptions& options);

  // Queues a sequence. tokens: its prompt (n_prompt = tokens.size()); max_len: the most tokens it
  // will ever hold (its token list and block table are reserved for them now).
  // kv_salt: the LoRA adapter set's fingerprint (0: the base), which keys its prefix cache.
  void add(uint64_t id, std::vector<int32_t> tokens, int64_t max_len, int priority, bool all_logits,
           bool embedding = false, uint64_t kv_salt = 0);
  // A token sampled for id: the next step computes it.
  void append(uint64_t id, int32_t token) { seqs_.at(id).tokens.push_back(token); }
  // id's prompt has been scored: it may use the prefix cache again if it is ever recomputed.
  void prompt_scored(uint64_t id) { seqs_.at(id).all_logits = false; }
  // Guessed next tokens of a running, decoding sequence (speculation): the next step computes
  // them after its last known token, each row giving logits. Guesses the step has no room for
  // (tokens, logit rows or KV blocks) are dropped before it runs.
  void draft(uint64_t id, std::span<const int32_t> guesses);
  // After the step: the first n_accepted of id's guesses were right; the rest are forgotten, and
  // computed() neither counts nor keeps their KV.
  void verified(uint64_t id, int64_t n_accepted);
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
  // The inter-token target (seconds) of the last step that bounded its prompt chunks, or 0.
  double itl_target() const { return target_; }

 private:
  void enqueue(SeqState* s);
  // Moves a waiting s into the running list with its cached prefix, or returns false.
  bool admit(SeqState* s, int64_t budget, int64_t* n_tokens);
  // The tokens of s to run with `budget` left in the step (and the step's extra logit rows).
  int64_t chunk(const SeqState* s, int64_t budget) const;
  // The largest part of an n-token prompt chunk of s that keeps the step's predicted time
  // within the target (n when the step is not bounded).
  int64_t fit_latency(const SeqState* s, int64_t n) const;
  // Latency-bounded steps: the prompt chunks after the decode rows, running prefills and
  // waiting sequences together by priority, then arrival.
  void schedule_prompts(int64_t* budget);
  // Adds n tokens of s to the step (taking its extra logit rows).
  void add_to_step(SeqState* s, int64_t n);
  void preempt(SeqState* s);
  // Keeps at most `keep` of s's guesses.
  void drop_drafts(SeqState* s, int64_t keep = 0);
  void release(SeqState* s);

  KvManager& kv_;
  SchedulerOptions opt_;
  std::unordered_map<uint64_t, SeqState> seqs_;
  std::vector<SeqState*> running_;  // admission order
  std::vector<SeqState*> waiting_;  // priority (high first), then arrival
  uint64_t arrivals_ = 0;
  SchedulerOutput out_;
  int64_t extra_rows_ = 0;  // this step's logit rows left for all_logits chunks
  int64_t draft_rows_ = 0;  // this step's logit rows left for guesses
  uint64_t steps_ = 0;      // schedule() calls
  bool bounded_ = false;    // this step's prompt chunks are cut to target_
  double target_ = 0;       // seconds
  std::vector<SeqState*> prefills_;  // schedule_prompts' scratch (capacity max_seqs)
};

}  // namespace ll3
