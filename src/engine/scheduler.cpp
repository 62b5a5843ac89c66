#include "engine/scheduler.h"

#include <algorithm>

namespace ll3 {

Scheduler::Scheduler(KvManager& kv, const SchedulerOptions& options) : kv_(kv), opt_(options) {
  const size_t seqs = static_cast<size_t>(opt_.max_seqs);
  running_.reserve(seqs);
  out_.seqs.reserve(seqs);
  out_.tokens.reserve(static_cast<size_t>(opt_.batch_tokens));
  out_.block_ids.reserve(seqs * static_cast<size_t>(opt_.max_seq_blocks));
  out_.copies.reserve(seqs);
  out_.admitted.reserve(seqs);
  out_.preempted.reserve(seqs);
  prefills_.reserve(seqs);
}

void Scheduler::add(uint64_t id, std::vector<int32_t> tokens, int64_t max_len, int priority, bool all_logits,
                    bool embedding, uint64_t kv_salt) {
  SeqState& s = seqs_[id];
  s.id = id;
  s.priority = priority;
  s.arrival = ++arrivals_;
  s.n_prompt = static_cast<int64_t>(tokens.size());
  s.tokens = std::move(tokens);
  // The token list and the block table reach their longest here: reserved now, so that
  // generating never reallocates them.
  s.tokens.reserve(static_cast<size_t>(std::max(max_len, s.n_prompt)));
  s.all_logits = all_logits;
  s.embedding = embedding;
  kv_.open(id, (max_len + kv_.block_size() - 1) / kv_.block_size(), kv_salt);
  enqueue(&s);
}

void Scheduler::enqueue(SeqState* s) {
  s->running = false;
  // Before the first waiting sequence of lower priority, or of equal priority that arrived later.
  auto pos = std::find_if(waiting_.begin(), waiting_.end(), [&](const SeqState* w) {
    return w->priority < s->priority || (w->priority == s->priority && w->arrival > s->arrival);
  });
  waiting_.insert(pos, s);
}

void Scheduler::release(SeqState* s) {
  kv_.free(s->id, s->tokens, s->n_computed);
  s->n_computed = 0;
}

void Scheduler::remove(uint64_t id) {
  auto found = seqs_.find(id);
  if (found == seqs_.end()) return;
  SeqState* s = &found->second;
  auto drop = [&](std::vector<SeqState*>& v) {
    auto it = std::find(v.begin(), v.end(), s);
    if (it != v.end()) v.erase(it);
  };
  drop(running_);
  drop(waiting_);
  release(s);
  kv_.close(id);
  seqs_.erase(found);
}

void Scheduler::draft(uint64_t id, std::span<const int32_t> guesses) {
  SeqState& s = seqs_.at(id);
  if (!s.running || s.pending() != 1 || s.all_logits || s.n_draft > 0) return;
  s.tokens.insert(s.tokens.end(), guesses.begin(), guesses.end());
  s.n_draft = static_cast<int64_t>(guesses.size());
}

void Scheduler::drop_drafts(SeqState* s, int64_t keep) {
  if (s->n_draft <= keep) return;
  s->tokens.resize(s->tokens.size() - static_cast<size_t>(s->n_draft - keep));
  s->n_draft = keep;
}

void Scheduler::verified(uint64_t id, int64_t n_accepted) {
  SeqState& s = seqs_.at(id);
  s.n_rejected = s.n_draft - n_accepted;
  drop_drafts(&s, n_accepted);
  s.n_draft = 0;
}

void Scheduler::preempt(SeqState* s) {
  drop_drafts(s);
  running_.erase(std::find(running_.begin(), running_.end(), s));
  release(s);
  ++s->preemptions;
  out_.preempted.push_back(s->id);
  enqueue(s);
}

bool Scheduler::admit(SeqState* s, int64_t budget, int64_t* n_tokens) {
  const int64_t bs = kv_.block_size();
  const size_t copies_before = out_.copies.size();
  if (!s->all_logits && !s->embedding) {
    // At least the last known token is computed: its logits give the next token.
    s->n_computed = kv_.lookup(s->id, s->tokens, static_cast<int64_t>(s->tokens.size()) - 1, &out_.copies);
  }
  const int64_t n = chunk(s, budget);
  // Headroom: a new sequence must leave a block for each running one to grow into, or the next
  // steps would preempt one for it again and again (thrashing). Pinned sessions give way to it
  // (reclaim) before it is made to wait.
  const int64_t held = static_cast<int64_t>(kv_.blocks(s->id).size());
  const int64_t need = (s->n_computed + n + bs - 1) / bs - held;
  auto room = [&] { return running_.empty() || kv_.available() >= need + static_cast<int64_t>(running_.size()); };
  while (!room() && kv_.reclaim()) {
  }
  if (n <= 0 || !room() || !kv_.allocate(s->id, s->n_computed + n)) {
    // Drop the copy planned for it and give everything back: it waits for room (in the KV pool,
    // or in a latency-bounded step).
    out_.copies.resize(copies_before);
    kv_.drop(s->id);
    s->n_computed = 0;
    return false;
  }
  if (!s->admitted_once) {
    s->admitted_once = true;
    s->cached_tokens = std::min(s->n_computed, s->n_prompt);
  }
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), s));
  running_.push_back(s);
  s->running = true;
  *n_tokens = n;
  return true;
}

int64_t Scheduler::chunk(const SeqState* s, int64_t budget) const {
  int64_t n = std::min(s->pending(), budget);
  if (s->n_computed >= s->n_prompt) return n;
  if (s->all_logits) n = std::min(n, extra_rows_ + 1);  // one row is every sequence's own
  return fit_latency(s, n);
}

int64_t Scheduler::fit_latency(const SeqState* s, int64_t n) const {
  if (!bounded_ || n <= 0) return n;
  auto fits = [&](int64_t m) {
    StepShape t = out_.shape;
    t.add(s->n_computed, m, false);
    return opt_.cost->predict_corrected(t) <= target_;
  };
  // The prediction grows with m (non-negative coefficients): the largest m that fits, by bisection.
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  // The step's first prompt chunk is never less than the minimum: prompts always progress.
  const int64_t floor = out_.shape.prompt_tokens == 0 ? std::min(n, opt_.min_prompt_chunk) : 0;
  return std::max(lo, floor);
}

void Scheduler::add_to_step(SeqState* s, int64_t n) {
  ScheduledSeq it;
  it.id = s->id;
  it.n_past = s->n_computed;
  it.n_tokens = n;
  it.logits = s->n_computed + n == static_cast<int64_t>(s->tokens.size());
  it.all_logits = s->all_logits && s->n_computed < s->n_prompt;
  it.n_draft = static_cast<int32_t>(s->n_draft);
  s->last_step = steps_;
  draft_rows_ -= s->n_draft;
  if (it.all_logits) extra_rows_ -= n - 1;
  it.token_begin = static_cast<int32_t>(out_.tokens.size());
  const auto first = s->tokens.begin() + s->n_computed;
  out_.tokens.insert(out_.tokens.end(), first, first + n);
  const std::span<const int32_t> table = kv_.blocks(s->id);
  it.block_begin = static_cast<int32_t>(out_.block_ids.size());
  it.n_blocks = static_cast<int32_t>(table.size());
  out_.block_ids.insert(out_.block_ids.end(), table.begin(), table.end());
  out_.seqs.push_back(it);
  out_.n_tokens += n;
  out_.shape.add(s->n_computed, n, s->n_computed >= s->n_prompt);
}

const SchedulerOutput& Scheduler::schedule() {
  out_.seqs.clear();
  out_.tokens.clear();
  out_.block_ids.clear();
  out_.copies.clear();
  out_.preempted.clear();
  out_.admitted.clear();
  out_.n_tokens = 0;
  out_.shape = StepShape();
  bounded_ = false;
  // With a cost model, prompt chunks wait until the decode rows are in (schedule_prompts).
  const bool latency = opt_.cost != nullptr && opt_.itl_target_s >= 0;
  int64_t budget = opt_.batch_tokens;
  extra_rows_ = opt_.prompt_logit_rows;
  draft_rows_ = opt_.draft_rows;
  ++steps_;

  // Running sequences, oldest first. One that cannot grow preempts the newest (itself last).
  // Only sequences after it can be the victim, so nothing already in the step is preempted.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    SeqState* s = running_[i];
    if (latency && s->n_computed < s->n_prompt) {
      ++i;
      continue;
    }
    drop_drafts(s, std::min(budget - 1, draft_rows_));  // the guesses the step has room for
    const int64_t n = chunk(s, budget);
    if (n <= 0) {
      ++i;
      continue;
    }
    if (!kv_.allocate(s->id, s->n_computed + n)) {
      if (s->n_draft > 0) {  // guesses give way before anyone is preempted
        drop_drafts(s);
        continue;
      }
      SeqState* victim = running_.back();
      preempt(victim);
      if (victim == s) break;  // it was the newest: everything older is scheduled
      continue;                // retry s with the victim's blocks
    }
    add_to_step(s, n);
    budget -= n;
    ++i;
  }
  // Guesses of sequences that found no room in this step wait for none: they are dropped.
  for (SeqState* s : running_) {
    if (s->n_draft > 0 && s->last_step != steps_) drop_drafts(s);
  }
  if (latency) {
    schedule_prompts(&budget);
    return out_;
  }

  // Then waiting ones, while there is room. A sequence preempted in this step waits a step.
  while (!waiting_.empty() && budget > 0 && static_cast<int64_t>(running_.size()) < opt_.max_seqs) {
    SeqState* s = waiting_.front();
    if (std::find(out_.preempted.begin(), out_.preempted.end(), s->id) != out_.preempted.end()) break;
    int64_t n = 0;
    if (!admit(s, budget, &n)) break;
    out_.admitted.push_back(s->id);
    add_to_step(s, n);
    budget -= n;
  }
  return out_;
}

void Scheduler::schedule_prompts(int64_t* budget) {
  // Bounded while decode rows run; the target is fixed for the step before any prompt is in.
  bounded_ = out_.shape.decode_rows > 0;
  if (bounded_) target_ = opt_.itl_target_s > 0 ? opt_.itl_target_s : kDefaultItlFactor * opt_.cost->predict_corrected(out_.shape);
  auto before = [](const SeqState* a, const SeqState* b) {
    return a->priority > b->priority || (a->priority == b->priority && a->arrival < b->arrival);
  };
  prefills_.clear();
  for (SeqState* s : running_) {
    if (s->n_computed < s->n_prompt) prefills_.push_back(s);
  }
  std::sort(prefills_.begin(), prefills_.end(), before);
  // Merged with the waiting queue (already in that order). Admissions stop at the first that
  // cannot run, as without a cost model; a sequence preempted in this step waits a step.
  size_t next = 0;
  bool admitting = true;
  while (*budget > 0) {
    if (admitting && (waiting_.empty() || static_cast<int64_t>(running_.size()) >= opt_.max_seqs ||
                      std::find(out_.preempted.begin(), out_.preempted.end(), waiting_.front()->id) != out_.preempted.end())) {
      admitting = false;
    }
    SeqState* r = next < prefills_.size() ? prefills_[next] : nullptr;
    SeqState* w = admitting ? waiting_.front() : nullptr;
    if (!r && !w) break;
    if (w && (!r || before(w, r))) {
      int64_t n = 0;
      if (!admit(w, *budget, &n)) {
        admitting = false;
        continue;
      }
      out_.admitted.push_back(w->id);
      add_to_step(w, n);
      *budget -= n;
      continue;
    }
    ++next;
    if (!r->running) continue;  // preempted for an earlier one in this step
    const int64_t n = chunk(r, *budget);
    if (n <= 0) break;  // the step is full
    // Short of blocks, the newest sequence not in the step gives way (r itself at worst).
    while (!kv_.allocate(r->id, r->n_computed + n)) {
      SeqState* victim = nullptr;
      for (auto it = running_.rbegin(); it != running_.rend() && !victim; ++it) {
        if ((*it)->last_step != steps_) victim = *it;
      }
      preempt(victim);
      if (victim == r) break;
    }
    if (!r->running) continue;
    add_to_step(r, n);
    *budget -= n;
  }
}

void Scheduler::computed(const SchedulerOutput& out) {
  for (const ScheduledSeq& it : out.seqs) {
    SeqState& s = seqs_.at(it.id);
    s.n_computed += it.n_tokens - s.n_rejected;
    if (s.n_rejected > 0) kv_.trim(it.id, s.n_computed);
    s.n_rejected = 0;
    kv_.name_full(it.id, s.tokens, s.n_computed);
  }
}

}  // namespace ll3
