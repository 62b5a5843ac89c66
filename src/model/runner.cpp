#include "model/runner.h"

namespace ll3 {

Status validate_plan(const BatchPlan& plan, int64_t max_tokens, int64_t n_vocab, int64_t bs, int64_t n_blocks) {
  const int64_t n = static_cast<int64_t>(plan.tokens.size());
  if (n == 0) return Status::error("forward: empty batch");
  if (n > max_tokens) {
    return Status::errorf("forward: batch of %lld tokens exceeds the maximum of %lld",
                          static_cast<long long>(n), static_cast<long long>(max_tokens));
  }
  for (int32_t t : plan.tokens) {
    if (t < 0 || t >= n_vocab) {
      return Status::errorf("forward: token id %d is out of range (vocabulary of %lld)", t,
                            static_cast<long long>(n_vocab));
    }
  }
  int64_t covered = 0;
  for (const SeqBatch& s : plan.seqs) {
    if (s.token_begin != covered || s.n_tokens <= 0 || s.n_past < 0) {
      return Status::error("forward: sequences must cover the batch in order, each with tokens");
    }
    covered += s.n_tokens;
    const int64_t end = static_cast<int64_t>(s.n_past) + s.n_tokens;
    if (static_cast<int64_t>(s.block_table.size()) * bs < end) {
      return Status::errorf("forward: block table of %zu blocks cannot hold %lld positions",
                            s.block_table.size(), static_cast<long long>(end));
    }
    for (int32_t b : s.block_table) {
      if (b < 0 || b >= n_blocks) return Status::errorf("forward: KV block id %d out of range", b);
    }
  }
  if (covered != n) return Status::error("forward: sequences do not cover the batch");
  for (int32_t r : plan.logit_rows) {
    if (r < 0 || r >= n) return Status::errorf("forward: logit row %d out of range", r);
  }
  return Status();
}

}  // namespace ll3
