#include "engine/scheduler.h"

#include <algorithm>

namespace ll3 {

Scheduler::Scheduler(BlockPool& pool, const SchedulerOptions& options) : pool_(pool), opt_(options) {
  running_.reserve(static_cast<size_t>(opt_.max_seqs));
  step_.items.reserve(static_cast<size_t>(opt_.max_seqs));
}

void Scheduler::enqueue(SeqState* s) {
  s->running = false;
  if (s->blocks.empty()) {
    s->chain = pool_.root_hash();
    s->named_blocks = 0;
  }
  // Before the first waiting sequence of lower priority, or of equal priority that arrived later.
  auto pos = std::find_if(waiting_.begin(), waiting_.end(), [&](const SeqState* w) {
    return w->priority < s->priority || (w->priority == s->priority && w->arrival > s->arrival);
  });
  waiting_.insert(pos, s);
}

void Scheduler::name_tail(SeqState* s) {
  if (!opt_.prefix_cache) return;
  const int64_t bs = pool_.block_size();
  const int64_t full = s->n_computed / bs;
  const int64_t tail = s->n_computed % bs;
  if (tail == 0 || s->named_blocks != full || static_cast<int64_t>(s->blocks.size()) <= full) return;
  pool_.name(s->blocks[full], s->chain,
             std::span<const int32_t>(s->tokens).subspan(static_cast<size_t>(full * bs), static_cast<size_t>(tail)));
}

void Scheduler::release_blocks(SeqState* s) {
  name_tail(s);
  // Last block first: it reaches the cache list's old end, so eviction takes a chain's tail
  // before its head (the head is what other prompts share).
  for (auto it = s->blocks.rbegin(); it != s->blocks.rend(); ++it) pool_.release(*it);
  s->blocks.clear();
  s->n_computed = 0;
  s->named_blocks = 0;
  s->chain = pool_.root_hash();
}

void Scheduler::remove(SeqState* s) {
  auto drop = [&](std::vector<SeqState*>& v) {
    auto it = std::find(v.begin(), v.end(), s);
    if (it != v.end()) v.erase(it);
  };
  drop(running_);
  drop(waiting_);
  release_blocks(s);
  s->running = false;
}

void Scheduler::preempt(SeqState* s) {
  running_.erase(std::find(running_.begin(), running_.end(), s));
  release_blocks(s);
  ++s->preemptions;
  step_.preempted.push_back(s);
  enqueue(s);
}

bool Scheduler::grow(SeqState* s, int64_t end) {
  const int64_t bs = pool_.block_size();
  const size_t need = static_cast<size_t>((end + bs - 1) / bs);
  const size_t had = s->blocks.size();
  while (s->blocks.size() < need) {
    const int32_t b = pool_.allocate();
    if (b < 0) {
      for (size_t i = had; i < s->blocks.size(); ++i) pool_.release(s->blocks[i]);
      s->blocks.resize(had);
      return false;
    }
    s->blocks.push_back(b);
  }
  return true;
}

bool Scheduler::grow_or_reclaim(SeqState* s, int64_t end) {
  while (!grow(s, end)) {
    if (!reclaim_ || !reclaim_()) return false;
  }
  return true;
}

bool Scheduler::admit(SeqState* s, int64_t budget, int64_t* n_tokens) {
  const int64_t bs = pool_.block_size();
  const size_t copies_before = step_.copies.size();
  if (opt_.prefix_cache && s->blocks.empty() && !s->all_logits) {
    // At least the last known token is computed: its logits give the next token.
    BlockPool::Match m = pool_.lookup(s->tokens, static_cast<int64_t>(s->tokens.size()) - 1);
    s->blocks.assign(m.blocks.begin(), m.blocks.end());  // keeps the table's reserved room
    s->n_computed = static_cast<int64_t>(s->blocks.size()) * bs;
    s->named_blocks = static_cast<int64_t>(s->blocks.size());
    s->chain = m.hash;
    if (m.partial >= 0) {
      // Copy on write: the matching rows into a block of our own.
      const int32_t dst = pool_.allocate();
      if (dst >= 0) {
        step_.copies.push_back({m.partial, dst, m.partial_tokens});
        s->blocks.push_back(dst);
        s->n_computed += m.partial_tokens;
      }
      pool_.release(m.partial);
    }
  }
  const int64_t n = chunk(s, budget);
  // Headroom: a new sequence must leave a block for each running one to grow into, or the next
  // steps would preempt one for it again and again (thrashing).
  const int64_t need = (s->n_computed + n + bs - 1) / bs - static_cast<int64_t>(s->blocks.size());
  const bool room = running_.empty() || pool_.available() >= need + static_cast<int64_t>(running_.size());
  if (!room || !grow_or_reclaim(s, s->n_computed + n)) {
    // Drop the copy planned for it and give everything back: it waits for room.
    step_.copies.resize(copies_before);
    for (auto it = s->blocks.rbegin(); it != s->blocks.rend(); ++it) pool_.release(*it);
    s->blocks.clear();
    s->n_computed = 0;
    s->named_blocks = 0;
    s->chain = pool_.root_hash();
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
  const int64_t n = std::min(s->pending(), budget);
  if (!s->all_logits || s->n_computed >= s->n_prompt) return n;
  return std::min(n, extra_rows_ + 1);  // one row is every sequence's own
}

Scheduler::Item Scheduler::item(SeqState* s, int64_t n) {
  Item it{s, n, s->n_computed + n == static_cast<int64_t>(s->tokens.size())};
  it.all_logits = s->all_logits && s->n_computed < s->n_prompt;
  if (it.all_logits) extra_rows_ -= n - 1;
  return it;
}

const Scheduler::Step& Scheduler::schedule() {
  Step& st = step_;
  st.items.clear();
  st.copies.clear();
  st.preempted.clear();
  st.admitted.clear();
  st.n_tokens = 0;
  int64_t budget = opt_.batch_tokens;
  extra_rows_ = opt_.prompt_logit_rows;

  // Running sequences, oldest first. One that cannot grow preempts the newest (itself last).
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    SeqState* s = running_[i];
    const int64_t n = chunk(s, budget);
    if (n <= 0) {
      ++i;
      continue;
    }
    if (!grow_or_reclaim(s, s->n_computed + n)) {
      SeqState* victim = running_.back();
      preempt(victim);
      if (victim == s) break;  // it was the newest: everything older is scheduled
      continue;                // retry s with the victim's blocks
    }
    st.items.push_back(item(s, n));
    budget -= n;
    st.n_tokens += n;
    ++i;
  }

  // Then waiting ones, while there is room. A sequence preempted in this step waits a step.
  while (!waiting_.empty() && budget > 0 && static_cast<int64_t>(running_.size()) < opt_.max_seqs) {
    SeqState* s = waiting_.front();
    if (std::find(st.preempted.begin(), st.preempted.end(), s) != st.preempted.end()) break;
    int64_t n = 0;
    if (!admit(s, budget, &n)) break;
    st.admitted.push_back(s);
    st.items.push_back(item(s, n));
    budget -= n;
    st.n_tokens += n;
  }
  return st;
}

void Scheduler::computed(const Step& step) {
  const int64_t bs = pool_.block_size();
  for (const Item& it : step.items) {
    SeqState* s = it.seq;
    s->n_computed += it.n_tokens;
    if (!opt_.prefix_cache) continue;
    while ((s->named_blocks + 1) * bs <= s->n_computed) {
      const size_t b = static_cast<size_t>(s->named_blocks);
      s->chain = pool_.name(s->blocks[b], s->chain, std::span<const int32_t>(s->tokens).subspan(b * bs, bs));
      ++s->named_blocks;
    }
  }
}

}  // namespace ll3
