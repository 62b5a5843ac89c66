// A draft model for speculative decoding: a smaller model with the target's tokenizer (or the
// same model at a lower quantization) that guesses each sequence's next tokens greedily. It keeps
// its own KV cache per sequence, computed along the target's tokens: each call first catches a
// sequence up on the tokens it has not seen (the prompt, the target's verified tokens), then
// guesses, all sequences batched in each of its steps. After verification, rollback() forgets
// the guesses the target rejected.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/runner.h"
#include "kv/block_pool.h"
#include "kv/kv_cache.h"
#include "kv/kv_manager.h"

namespace ll3 {

struct DraftOptions {
  int64_t positions = 0;     // KV positions for all sequences together
  int64_t block_size = 16;
  int64_t max_seqs = 64;
  int64_t batch_tokens = 256;  // tokens per draft step (catch-up chunks and guesses)
  int max_guesses = 8;         // the most guesses per sequence and call
  RunnerOptions runner;
};

class DraftModel {
 public:
  static Result<std::unique_ptr<DraftModel>> create(const LlamaModel& model, ThreadPool& pool, const DraftOptions& o);

  // Starts tracking sequence id, which will hold at most max_len tokens.
  void open(uint64_t id, int64_t max_len);
  void close(uint64_t id);
  // id's first n tokens are still the target's (the rest were rejected guesses): keep only their KV.
  void rollback(uint64_t id, int64_t n);

  struct Job {
    uint64_t id = 0;
    std::span<const int32_t> tokens;  // the target's tokens so far (the last one not yet computed)
    int k = 0;                        // guesses wanted
    std::span<int32_t> out;           // room for k
    int64_t n_out = 0;                // guesses made: 0 when the sequence is still catching up
  };
  // Guesses for every job, batched. A job whose catch-up does not fit this call's first step
  // (batch_tokens) makes progress but no guesses. A job the KV pool has no room for makes none.
  Status guess(std::span<Job> jobs);
  // Seconds of one of its guessing steps (all sequences' next guess at once), a running average
  // of the steps after the first (which also catches up on new tokens: a whole prompt at first).
  double seconds_per_guess() const { return guess_s_; }

 private:
  DraftModel(const LlamaModel& model, const DraftOptions& o) : m_(model), opt_(o) {}
  // One draft step over plan_*; the argmax of each logits row into argmax_.
  Status run();

  const LlamaModel& m_;
  DraftOptions opt_;
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<BlockPool> blocks_;
  std::unique_ptr<KvManager> kvm_;
  std::unique_ptr<ModelRunner> runner_;
  std::unordered_map<uint64_t, int64_t> done_;  // positions whose KV each sequence holds
  double guess_s_ = 0;

  // Per step, sized once.
  std::vector<int32_t> tokens_, rows_, argmax_;
  std::vector<SeqBatch> seqs_;
  std::vector<size_t> in_step_;  // the job of each of the step's sequences
  std::vector<float> logits_;
};

}  // namespace ll3
