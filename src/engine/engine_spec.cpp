// Speculative decoding in the engine: before a step, each decoding sequence guesses its next tokens
// (prompt lookup or the draft model), as many as its acceptance and the step's cost make worth it;
// after the step's sampling, the kept guesses stay and the rest are forgotten.
#include <algorithm>

#include "engine/engine_impl.h"

namespace ll3 {

// The draft model, with a KV pool of the target's positions (its KV is far smaller).
Status Engine::Impl::make_draft(const RunnerOptions& ro) {
  const Model& dm = *opt.draft_model;
  if (dm.n_vocab() != m.config.n_vocab) {
    return Status::invalid(strprintf("the draft model's vocabulary (%lld tokens) is not the model's (%lld)",
                                     static_cast<long long>(dm.n_vocab()), static_cast<long long>(m.config.n_vocab)),
                           "draft_model");
  }
  DraftOptions d;
  d.positions = stats.kv_blocks * stats.block_size;
  d.block_size = opt.block_size;
  d.max_seqs = opt.max_seqs;
  d.batch_tokens = opt.batch_tokens;
  d.max_guesses = opt.spec_max_guesses;
  d.runner = ro;
  // The draft is small: on the GPU whole when it fits beside the model (whatever -ngl split the
  // model), else on the CPU.
  if (ro.gpu_layers != 0) d.runner.gpu_layers = -1;
  Result<std::unique_ptr<DraftModel>> r = DraftModel::create(*model_impl(dm).llama, *pool, d);
  if (!r.ok()) return Status::error("draft model: " + r.message(), r.status().code());
  draft = std::move(r.value());
  return Status();
}

// The predicted cost of this step's decode rows (every running sequence one), and what one more
// row adds: the cost model's row and attention terms at the sequences' mean context, plus the
// draft model's seconds per guess, shared by the sequences that guess together.
Engine::Impl::GuessCost Engine::Impl::guess_cost() const {
  StepShape shape;
  int64_t guessing = 0;
  for (const auto& [id, sp] : seqs) {
    const SeqState& q = sched->seq(id);
    if (!q.running) continue;
    shape.add(q.n_computed, 1, true);
    guessing += sp->req.speculative && !sp->done;
  }
  GuessCost c;
  c.rows = std::max<int64_t>(1, shape.decode_rows);
  c.step_s = step_cost->predict_corrected(shape);
  const StepCostModel::Coefficients& k = step_cost->coefficients();
  // A guess row is a decode row. Until steps of several decode rows have taught the fit that
  // term (a single stream runs none unless it guesses, and the prior is pessimistic), the prompt
  // term stands in for it: a row computed alike, which the prefill teaches at once.
  const double row = step_cost->multi_row_decode_steps() >= 8 ? k[1] : std::min(k[1], k[2]);
  c.row_s = row + k[3] * static_cast<double>(shape.attention) / static_cast<double>(c.rows);
  if (draft) c.row_s += draft->seconds_per_guess() / static_cast<double>(std::max<int64_t>(1, guessing));
  return c;
}

// How many tokens s should guess in this step: what its acceptance rate and the step's load make
// worth it, within what it may still generate.
int Engine::Impl::guesses_for(const Seq* s, const SeqState& q, const GuessCost& c) const {
  // A prior of 0.6: guessing starts at a few tokens and settles on what the sequence earns.
  int k = draft_length(s->spec_rate.rate(0.6), opt.spec_max_guesses, c.rows, c.step_s, c.row_s);
  k = std::max(k, opt.spec_min_guesses);
  const int64_t len = static_cast<int64_t>(q.tokens.size());
  int64_t room = std::min(s->max_len, max_seq_tokens) - len;  // the token list's reserve
  if (s->req.max_tokens >= 0) room = std::min(room, s->req.max_tokens - s->n_generated - 1);
  return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(k, room)));
}

// Guesses for every running, decoding sequence that speculates, handed to the scheduler.
void Engine::Impl::propose() {
  guessed.clear();
  if (opt.spec == SpecMode::kOff || draft_failed) return;
  draft_jobs.clear();
  const GuessCost cost = guess_cost();
  for (auto& [id, sp] : seqs) {
    Seq* s = sp.get();
    if (s->done || !s->req.speculative) continue;
    const SeqState& q = sched->seq(id);
    if (!q.running || q.pending() != 1 || q.all_logits) continue;
    const int k = guesses_for(s, q, cost);
    if (k <= 0) {
      s->spec_rate.idle();
      continue;
    }
    s->guess_base = static_cast<int64_t>(q.tokens.size());
    s->n_accepted = 0;
    const std::span<int32_t> out = std::span<int32_t>(s->guesses).first(static_cast<size_t>(k));
    if (draft) {
      draft_jobs.push_back({id, q.tokens, k, out, 0});
      continue;
    }
    const int64_t n = ngram_guess(q.tokens, 2, 4, out);
    if (n == 0) continue;
    sched->draft(id, out.first(static_cast<size_t>(n)));
    guessed.push_back(s);
  }
  if (draft_jobs.empty()) return;
  if (Status st = draft->guess(draft_jobs); !st.ok()) {
    // Guesses are optional: say so once and decode without them from now on.
    log.warn("draft model: " + st.message() + "; speculation is off from here");
    draft_failed = true;
    return;
  }
  for (const DraftModel::Job& j : draft_jobs) {
    if (j.n_out == 0) continue;
    sched->draft(j.id, j.out.first(static_cast<size_t>(j.n_out)));
    guessed.push_back(seqs.at(j.id).get());
  }
}

// After sampling: each guessing sequence's accepted guesses stay, the rest are forgotten; the
// acceptance feeds the next step's guess count and the statistics.
void Engine::Impl::verify_guesses() {
  int64_t tried = 0, accepted = 0;
  for (const SampleRow& sr : to_sample) {
    if (sr.n_guesses == 0) continue;
    Seq* s = sr.seq;
    sched->verified(s->id, s->n_accepted);
    s->spec_rate.add(s->n_accepted, sr.n_guesses);
    tried += sr.n_guesses;
    accepted += s->n_accepted;
  }
  if (tried == 0) return;
  std::lock_guard<std::mutex> lk(mu);
  stats.spec_guessed += tried;
  stats.spec_accepted += accepted;
}

// The draft model forgets what the model did not keep: the rejected guesses, and all guesses of
// a sequence the step had no room for.
void Engine::Impl::rollback_draft() {
  if (!draft) return;
  for (Seq* s : guessed) {
    if (!s->done) draft->rollback(s->id, s->guess_base + s->n_accepted);
    s->n_accepted = 0;
  }
  guessed.clear();
}

}  // namespace ll3
