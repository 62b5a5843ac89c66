// One engine step: the scheduler's plan becomes a forward pass, its logits rows are sampled (and
// verify the guesses of speculative decoding), and each token goes to its request.
#include <algorithm>
#include <cmath>

#include "engine/engine_impl.h"

namespace ll3 {

namespace {

// The log-softmax of `row` at `target`, and the k (<= kMaxTopLogprobs) best into `top`, best
// first, ties to the lower id. `top` has room for k: nothing is allocated.
float log_softmax_at(const float* row, int64_t V, int32_t target, int k, std::vector<TopLogprob>* top) {
  float mx = -INFINITY;
  for (int64_t v = 0; v < V; ++v) mx = std::max(mx, row[v]);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v] - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  top->clear();
  for (int64_t v = 0; v < V && k > 0; ++v) {
    if (static_cast<int>(top->size()) == k && row[v] - lse <= top->back().logprob) continue;
    TopLogprob t{static_cast<int32_t>(v), row[v] - lse};
    auto pos = std::find_if(top->begin(), top->end(), [&](const TopLogprob& x) { return t.logprob > x.logprob; });
    top->insert(pos, t);
    if (static_cast<int>(top->size()) > k) top->pop_back();
  }
  return row[target] - lse;
}
}  // namespace

// Samples the next token of every sequence whose logits this step made, in parallel (one
// sampler's scratch per thread), with log-probabilities where asked.
void Engine::Impl::sample_all() {
  const int64_t V = m.config.n_vocab;
  pool->parallel_for_dynamic(static_cast<int64_t>(to_sample.size()), 1, [&](int64_t b, int64_t e, int thread) {
    for (int64_t i = b; i < e; ++i) {
      const SampleRow& sr = to_sample[i];
      Seq* s = sr.seq;
      if (s->grammar) {  // never guesses (prepare_grammar)
        const float* row = &logits[static_cast<size_t>(sr.row * V)];
        s->sampled = sample_constrained(thread, s, row, *sr.history);
        s->n_accepted = 0;
        if (s->req.logprobs || s->req.top_logprobs > 0) {
          s->lps[0].logprob = log_softmax_at(row, V, s->sampled, s->req.top_logprobs, &s->lps[0].top);
        }
        continue;
      }
      // Row j follows token base + j: it verifies guess j (kept with the model's agreement, see
      // Sampler::verify), or after the last guess samples one more token.
      const std::span<const int32_t> toks(*sr.history);
      const size_t base = toks.size() - static_cast<size_t>(sr.n_guesses);
      for (int32_t j = 0; j <= sr.n_guesses; ++j) {
        const float* row = &logits[static_cast<size_t>((sr.row + j) * V)];
        const int32_t guess = j < sr.n_guesses ? toks[base + static_cast<size_t>(j)] : -1;
        bool accepted = false;
        const int32_t t = samplers[thread]->verify(s->sampler, row, toks.first(base + static_cast<size_t>(j)), guess, &accepted);
        if (s->req.logprobs || s->req.top_logprobs > 0) {
          RowLogprob& lp = s->lps[static_cast<size_t>(j)];
          lp.logprob = log_softmax_at(row, V, t, s->req.top_logprobs, &lp.top);
        }
        if (accepted) continue;
        s->sampled = t;
        s->n_accepted = j;
        break;
      }
    }
  });
}

// The log-probabilities of the prompt tokens this step's rows scored, in parallel.
void Engine::Impl::score_prompts() {
  const int64_t V = m.config.n_vocab;
  pool->parallel_for_dynamic(static_cast<int64_t>(prompt_rows.size()), 1, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const PromptRow& pr = prompt_rows[i];
      PromptTokenLogprob& lp = pr.seq->prompt_lps[static_cast<size_t>(pr.pos)];
      lp.logprob = log_softmax_at(&logits[static_cast<size_t>(pr.row * V)], V, lp.token, pr.seq->req.prompt_logprobs,
                                  &lp.top_logprobs);
    }
  });
}

// Hands token t, at position pos of the sequence, to its request, and finishes the request or
// appends t (an accepted guess is in the token list already).
void Engine::Impl::handle_token(Seq* s, int32_t t, int64_t pos, const RowLogprob& lp) {
  s->keep_limit = pos;  // if it finishes here, t is not part of what a session keeps
  if (s->req.max_tokens == 0) {  // the prompt only
    finish(s, FinishReason::kLength);
    return;
  }
  if ((!s->req.ignore_eos || s->grammar) && tok.is_eog(t)) {
    finish(s, FinishReason::kStop);
    return;
  }
  const double tn = now_seconds();
  if (s->n_generated == 0) s->t_first = tn;
  ++s->n_generated;
  s->ev.index = s->n_generated - 1;
  s->ev.token = t;
  s->ev.piece.assign(tok.piece(t));
  s->decoder.push(t, &s->decoded);
  StopStringMatcher::Step sp = s->stops.feed(s->decoded);
  s->ev.text.assign(sp.emit);
  s->ev.seconds = tn - s->t_submit;
  s->ev.logprob = lp.logprob;
  s->ev.top_logprobs.assign(lp.top.begin(), lp.top.end());
  const bool keep = !s->req.on_token || s->req.on_token(s->ev);
  {
    std::lock_guard<std::mutex> lk(mu);
    ++stats.generated_tokens;
  }
  if (sp.stopped || (s->grammar && s->grammar->must_end())) {
    finish(s, FinishReason::kStop);
  } else if (!keep) {
    finish(s, FinishReason::kCancelled);
  } else if ((s->req.max_tokens >= 0 && s->n_generated >= s->req.max_tokens) || pos + 1 >= max_seq_tokens) {
    // (pos + 1: the prompt and generated tokens so far, at most the sequence's max_seq_tokens,
    // as with a max_tokens given: what /v1/models' max_model_len promises.)
    finish(s, FinishReason::kLength);
  } else {
    s->keep_limit = INT64_MAX;
    if (pos == static_cast<int64_t>(sched->seq(s->id).tokens.size())) sched->append(s->id, t);
  }
}

// Queue statistics of the sequences this step admitted or preempted.
void Engine::Impl::note_admissions(const SchedulerOutput& out) {
  const double t0 = now_seconds();
  std::lock_guard<std::mutex> lk(mu);
  for (RequestId id : out.admitted) {
    Seq* s = seqs.at(id).get();
    if (s->t_scheduled > 0) continue;  // readmitted after a preemption
    s->t_scheduled = t0;
    const SeqState& q = sched->seq(id);
    --queued;
    stats.prompt_tokens += q.n_prompt;
    stats.prompt_tokens_cached += q.cached_tokens;
  }
  stats.preemptions += static_cast<int64_t>(out.preempted.size());
}

// The runner's view of the step, and which logits rows are sampled or score a prompt.
BatchPlan Engine::Impl::plan(const SchedulerOutput& out) {
  plan_seqs.clear();
  plan_seq_ptrs.clear();
  plan_rows.clear();
  to_sample.clear();
  prompt_rows.clear();
  hidden_rows.clear();
  hidden_runs.clear();
  step_prompt_tokens = 0;
  for (const ScheduledSeq& it : out.seqs) {
    SeqBatch sb;
    sb.n_past = static_cast<int32_t>(it.n_past);
    sb.token_begin = it.token_begin;
    sb.n_tokens = static_cast<int32_t>(it.n_tokens);
    sb.block_table = out.block_table(it);
    plan_seqs.push_back(sb);
    Seq* s = seqs.at(it.id).get();
    plan_seq_ptrs.push_back(s);
    const SeqState& q = sched->seq(it.id);
    if (s->req.pooling != Pooling::kNone) {  // an embedding: hidden rows, never logits (engine_embed.cpp)
      plan_hidden(s, it);
      step_prompt_tokens += it.n_tokens;
      continue;
    }
    if (it.all_logits) {
      // Every row: row i scores prompt token n_past + i + 1 (the last row of the prompt scores
      // none; it samples).
      for (int64_t i = 0; i < it.n_tokens; ++i) {
        const int64_t pos = it.n_past + i;
        if (pos + 1 < q.n_prompt) prompt_rows.push_back({s, pos, static_cast<int32_t>(plan_rows.size())});
        if (i + 1 < it.n_tokens) plan_rows.push_back(sb.token_begin + static_cast<int32_t>(i));
      }
    }
    const int32_t last = sb.token_begin + sb.n_tokens - 1;
    if (it.logits && it.n_draft > 0) {
      // The last known token and each guess: a row each.
      to_sample.push_back({s, &q.tokens, static_cast<int32_t>(plan_rows.size()), it.n_draft});
      for (int32_t r = last - it.n_draft; r <= last; ++r) plan_rows.push_back(r);
    } else {
      if (it.logits || it.all_logits) plan_rows.push_back(last);
      if (it.logits) to_sample.push_back({s, &q.tokens, static_cast<int32_t>(plan_rows.size() - 1), 0});
    }
    step_prompt_tokens += std::max<int64_t>(0, std::min(it.n_past + it.n_tokens, q.n_prompt) - it.n_past);
  }
  BatchPlan p;
  p.tokens = out.tokens;
  p.seqs = plan_seqs;
  p.logit_rows = plan_rows;
  p.hidden_rows = hidden_rows;
  plan_loras(&p);
  return p;
}

// Step statistics: counts and the histograms of tokens and sequences per step.
void Engine::Impl::count_step(const SchedulerOutput& out) {
  auto bucket = [](int64_t n) {
    size_t b = 0;
    while (b < kStepBucketBounds.size() && static_cast<double>(n) > kStepBucketBounds[b]) ++b;
    return b;
  };
  const int64_t n_seqs = static_cast<int64_t>(out.seqs.size());
  std::lock_guard<std::mutex> lk(mu);
  ++stats.steps;
  stats.prompt_tokens_computed += step_prompt_tokens;
  ++stats.step_tokens[bucket(out.n_tokens)];
  ++stats.step_seqs[bucket(n_seqs)];
  stats.step_tokens_sum += out.n_tokens;
  stats.step_seqs_sum += n_seqs;
}

// Hands each sampled token to its request (after the prompt's log-probabilities, if asked).
void Engine::Impl::deliver() {
  for (const SampleRow& sr : to_sample) {
    Seq* s = sr.seq;
    if (s->done) continue;
    if (sched->seq(s->id).all_logits) {
      // The prompt is scored: hand it over before the first token (and use the cache again if
      // the sequence is ever recomputed).
      sched->prompt_scored(s->id);
      if (s->req.on_prompt) s->req.on_prompt(s->prompt_lps);
    }
    // The accepted guesses (in the token list already), then the token the model chose.
    const int64_t base = static_cast<int64_t>(sched->seq(s->id).tokens.size()) - s->n_accepted;
    for (int64_t j = 0; j < s->n_accepted && !s->done; ++j) {
      handle_token(s, sched->seq(s->id).tokens[static_cast<size_t>(base + j)], base + j, s->lps[static_cast<size_t>(j)]);
    }
    if (!s->done) handle_token(s, s->sampled, base + s->n_accepted, s->lps[static_cast<size_t>(s->n_accepted)]);
  }
}

void Engine::Impl::step() {
  propose();
  const SchedulerOutput& out = sched->schedule();
  note_admissions(out);
  if (out.seqs.empty()) {
    rollback_draft();
    // Nothing fits even with every cached block evicted and every session unpinned: the
    // oldest waiting request cannot run (submit's checks make this unreachable).
    if (sched->n_running() == 0 && sched->n_waiting() > 0) {
      finish(seqs.at(sched->next_waiting()).get(), FinishReason::kError, "the request does not fit the KV pool");
    }
    return;
  }
  // Copy on write of partly matching cached blocks, before anything writes the pool.
  for (const BlockCopy& c : out.copies) kv->copy_positions(c.src, c.dst, c.n_tokens);
  const BatchPlan batch = plan(out);
  const double t_forward = now_seconds();
  Status st = runner->forward(batch, logits.data(), hidden.data());
  if (st.ok()) {
    step_cost->observe(out.shape, now_seconds() - t_forward);
    std::lock_guard<std::mutex> lk(mu);
    stats.step_cost = step_cost->coefficients();
    stats.itl_target_s = sched->itl_target();
  }
  if (!st.ok()) {
    for (const ScheduledSeq& it : out.seqs) finish(seqs.at(it.id).get(), FinishReason::kError, st.message());
    return;
  }
  sample_all();
  verify_guesses();
  sched->computed(out);
  count_step(out);
  score_prompts();
  deliver();
  pool_hidden();
  rollback_draft();
}

}  // namespace ll3
