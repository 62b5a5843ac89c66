// Embedding requests (Request::pooling): their prompts are admitted, chunked and batched like any
// other, but each chunk asks the runner for the final hidden rows (after the output norm, what
// the LM head would read) instead of logits. The rows are pooled into the sequence's own buffer
// as they come (a sum for the mean, the last prompt row for kLast); when the prompt is complete
// the vector goes to on_embedding and the request finishes (kStop), never having sampled.
//
// The prefix cache is not looked up for them (Scheduler::add's embedding flag): a cached
// position has KV but no hidden row to pool. Their full blocks are still named, so a generation
// that starts alike can reuse them.
#include <algorithm>

#include "core/check.h"
#include "engine/engine_impl.h"

namespace ll3 {

// An embedding request's own checks, at submit; the prompt's size against what one sequence can
// hold. It generates nothing: max_tokens and speculation are set aside.
Status Engine::Impl::prepare_embedding(Request* r) const {
  if (r->pooling != Pooling::kMean && r->pooling != Pooling::kLast) return Status::invalid("unknown pooling", "pooling");
  if (r->grammar) return Status::invalid("an embedding request generates nothing: no grammar", "grammar");
  if (r->prompt_logprobs >= 0) return Status::invalid("an embedding request has no prompt log-probabilities", "prompt_logprobs");
  if (!r->session_id.empty()) return Status::invalid("an embedding request cannot use a session", "session_id");
  const int64_t n = static_cast<int64_t>(r->tokens.size());
  if (n > max_seq_tokens) {
    return Status::invalid(strprintf("the input has %lld tokens; a sequence holds at most %lld (context %lld, KV pool %lld)",
                                     static_cast<long long>(n), static_cast<long long>(max_seq_tokens),
                                     static_cast<long long>(m.config.context_length),
                                     static_cast<long long>(stats.kv_blocks * stats.block_size)),
                           "input", StatusCode::kTooLong);
  }
  r->max_tokens = 0;
  r->speculative = false;
  return Status();
}

// The step's hidden rows of embedding sequence s's chunk `it`: every row for the mean, only the
// prompt's last for kLast.
void Engine::Impl::plan_hidden(Seq* s, const ScheduledSeq& it) {
  const int64_t n_prompt = sched->seq(s->id).n_prompt;
  int64_t first = 0, n = it.n_tokens;
  if (s->req.pooling == Pooling::kLast) {
    first = n_prompt - 1 - it.n_past;
    if (first < 0 || first >= it.n_tokens) return;
    n = 1;
  }
  hidden_runs.push_back({s, it.n_past + first, static_cast<int32_t>(hidden_rows.size()), static_cast<int32_t>(n)});
  for (int64_t i = 0; i < n; ++i) hidden_rows.push_back(it.token_begin + static_cast<int32_t>(first + i));
}

// Pools the step's hidden rows into their sequences, in position order (the same sum whatever
// the chunks were, so a request's vector does not depend on what it was batched with), and
// finishes the sequences whose prompt is complete.
void Engine::Impl::pool_hidden() {
  const int64_t dim = m.config.dim;
  for (const HiddenRun& run : hidden_runs) {
    Seq* s = run.seq;
    if (s->done) continue;
    const int64_t n_prompt = sched->seq(s->id).n_prompt;
    for (int32_t i = 0; i < run.n; ++i) {
      const int64_t pos = run.pos + i;
      // A sequence preempted and recomputed from the start passes positions it has pooled.
      if (s->req.pooling == Pooling::kMean && pos < s->n_pooled) continue;
      const float* row = &hidden[static_cast<size_t>((run.row + i) * dim)];
      if (s->req.pooling == Pooling::kLast) {
        std::copy(row, row + dim, s->pooled.begin());
      } else {
        LL3_CHECK(pos == s->n_pooled);
        for (int64_t j = 0; j < dim; ++j) s->pooled[static_cast<size_t>(j)] += row[j];
      }
      s->n_pooled = pos + 1;
    }
    if (s->n_pooled < n_prompt) continue;
    std::vector<float> out(static_cast<size_t>(dim));
    const double scale = s->req.pooling == Pooling::kMean ? 1.0 / static_cast<double>(n_prompt) : 1.0;
    for (int64_t j = 0; j < dim; ++j) out[static_cast<size_t>(j)] = static_cast<float>(s->pooled[static_cast<size_t>(j)] * scale);
    if (s->req.on_embedding) s->req.on_embedding(out);
    finish(s, FinishReason::kStop);
  }
}

}  // namespace ll3
