// Scheduler decisions without a model: token budget, chunked prefill, admission order, prefix
// reuse with copy on write, preemption of the newest sequence.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>

namespace ll3 {
namespace {

struct Fixture {
  Fixture(int32_t n_blocks, int32_t bs, int64_t budget, int64_t max_seqs)
      : pool(n_blocks, bs, 11), sched(pool, SchedulerOptions{budget, max_seqs, true}) {}
  SeqState* add(int n_prompt, int first_token, int priority = 0) {
    auto s = std::make_unique<SeqState>();
    s->id = s->arrival = seqs.size() + 1;
    s->priority = priority;
    s->tokens.resize(static_cast<size_t>(n_prompt));
    std::iota(s->tokens.begin(), s->tokens.end(), first_token);
    s->n_prompt = n_prompt;
    sched.enqueue(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }
  // Runs a step as the engine would: computed, then a sampled token for each logits row.
  const Scheduler::Step& step() {
    const Scheduler::Step& st = sched.schedule();
    sched.computed(st);
    for (const Scheduler::Item& it : st.items) {
      if (it.logits) it.seq->tokens.push_back(7);
    }
    return st;
  }
  BlockPool pool;
  Scheduler sched;
  std::vector<std::unique_ptr<SeqState>> seqs;
};

std::vector<std::pair<uint64_t, int64_t>> items(const Scheduler::Step& st) {
  std::vector<std::pair<uint64_t, int64_t>> out;
  for (const Scheduler::Item& it : st.items) out.push_back({it.seq->id, it.n_tokens});
  return out;
}

TEST(Scheduler, ChunksLongPromptsWithinTheBudgetAndDecodesFirst) {
  Fixture f(64, 4, 8, 8);
  SeqState* a = f.add(3, 100);
  SeqState* b = f.add(20, 200);
  const Scheduler::Step& s1 = f.step();
  EXPECT_EQ(items(s1), (std::vector<std::pair<uint64_t, int64_t>>{{1, 3}, {2, 5}}));
  EXPECT_TRUE(s1.items[0].logits);
  EXPECT_FALSE(s1.items[1].logits);
  // a decodes one token per step; b's prompt comes in chunks of what is left of the budget.
  const Scheduler::Step& s2 = f.step();
  EXPECT_EQ(items(s2), (std::vector<std::pair<uint64_t, int64_t>>{{1, 1}, {2, 7}}));
  const Scheduler::Step& s3 = f.step();
  EXPECT_EQ(items(s3), (std::vector<std::pair<uint64_t, int64_t>>{{1, 1}, {2, 7}}));
  const Scheduler::Step& s4 = f.step();
  EXPECT_EQ(items(s4), (std::vector<std::pair<uint64_t, int64_t>>{{1, 1}, {2, 1}}));
  EXPECT_TRUE(s4.items[1].logits);
  EXPECT_EQ(b->n_computed, 20);
  EXPECT_EQ(a->n_computed, 6);
  EXPECT_EQ(a->blocks.size(), 2u);  // 6 positions in blocks of 4
  EXPECT_EQ(b->blocks.size(), 5u);
}

TEST(Scheduler, AdmitsByPriorityThenArrivalWithinMaxSeqs) {
  Fixture f(64, 4, 100, 2);
  f.add(4, 0);
  f.add(4, 10);
  f.add(4, 20, /*priority=*/5);
  const Scheduler::Step& s1 = f.step();
  EXPECT_EQ(items(s1), (std::vector<std::pair<uint64_t, int64_t>>{{3, 4}, {1, 4}}));
  EXPECT_EQ(f.sched.waiting().size(), 1u);
  EXPECT_EQ(f.sched.waiting()[0]->id, 2u);
  // The third waits until one finishes.
  f.sched.remove(f.seqs[0].get());
  const Scheduler::Step& s2 = f.step();
  EXPECT_EQ(items(s2), (std::vector<std::pair<uint64_t, int64_t>>{{3, 1}, {2, 4}}));
}

TEST(Scheduler, ReusesACachedPrefixAndCopiesThePartialBlock) {
  Fixture f(64, 4, 100, 4);
  SeqState* a = f.add(10, 500);
  f.step();
  f.sched.remove(a);  // its 2 full blocks and the 2-token tail stay cached
  EXPECT_EQ(f.pool.cached_blocks(), 3);
  SeqState* b = f.add(13, 500);  // the same 10 tokens, then 3 more
  const Scheduler::Step& st = f.step();
  EXPECT_EQ(b->cached_tokens, 10);
  ASSERT_EQ(st.copies.size(), 1u);
  EXPECT_EQ(st.copies[0].n_tokens, 2);
  EXPECT_EQ(st.copies[0].src, 2);  // a's tail block
  EXPECT_EQ(b->blocks[0], 0);
  EXPECT_EQ(b->blocks[1], 1);
  EXPECT_EQ(b->blocks[2], st.copies[0].dst);
  EXPECT_NE(st.copies[0].dst, 2);
  EXPECT_EQ(items(st), (std::vector<std::pair<uint64_t, int64_t>>{{2, 3}}));
  // A prompt equal to a cached one still computes its last token (for its logits).
  SeqState* c = f.add(8, 500);
  const Scheduler::Step& s2 = f.step();
  EXPECT_EQ(c->cached_tokens, 7);
  EXPECT_EQ(s2.items.back().n_tokens, 1);
}

TEST(Scheduler, PreemptsTheNewestWhenThePoolIsFullAndRecomputesIt) {
  // 6 blocks of 2: two sequences of 4-token prompts growing until the pool runs out.
  Fixture f(6, 2, 100, 4);
  SeqState* a = f.add(4, 0);
  SeqState* b = f.add(4, 100);
  f.step();  // both prefill: 4 blocks
  EXPECT_EQ(f.pool.used_blocks(), 4);
  f.step();  // decode: positions 4 -> 2 more blocks, the pool is full
  EXPECT_EQ(f.pool.used_blocks(), 6);
  f.step();
  // Position 6 needs a 4th block for each: b (the newest) is preempted in this very step, and
  // a runs alone with a 4th block.
  const Scheduler::Step& s4 = f.step();
  EXPECT_EQ(s4.preempted, std::vector<SeqState*>{b});
  EXPECT_EQ(items(s4), (std::vector<std::pair<uint64_t, int64_t>>{{1, 1}}));
  EXPECT_EQ(a->blocks.size(), 4u);
  EXPECT_EQ(b->preemptions, 1);
  EXPECT_EQ(a->preemptions, 0);
  EXPECT_FALSE(b->running);
  EXPECT_EQ(b->n_computed, 0);
  EXPECT_TRUE(b->blocks.empty());
  EXPECT_EQ(f.sched.waiting().front(), b);
  // Once a finishes, b is admitted again and recomputes from its cached full blocks.
  f.sched.remove(a);
  const Scheduler::Step& st = f.step();
  ASSERT_EQ(st.items.size(), 1u);
  EXPECT_EQ(st.items[0].seq, b);
  EXPECT_TRUE(st.items[0].logits);
  EXPECT_EQ(b->n_computed, static_cast<int64_t>(b->tokens.size()) - 1);
}

TEST(Scheduler, RemoveFreesEveryBlockWhateverTheState) {
  Fixture f(32, 4, 6, 4);
  SeqState* a = f.add(20, 0);  // mid-prefill after one step
  SeqState* b = f.add(3, 50);
  f.step();
  f.step();
  SeqState* c = f.add(5, 90);  // still queued
  EXPECT_GT(f.pool.used_blocks(), 0);
  f.sched.remove(a);
  f.sched.remove(b);
  f.sched.remove(c);
  EXPECT_EQ(f.pool.used_blocks(), 0);
  EXPECT_TRUE(f.sched.running().empty());
  EXPECT_TRUE(f.sched.waiting().empty());
}

TEST(Scheduler, ScoredPromptsShareTheExtraLogitRowsAndSkipThePrefixCache) {
  BlockPool pool(64, 4, 11);
  Scheduler sched(pool, SchedulerOptions{64, 8, true, 5});
  std::vector<std::unique_ptr<SeqState>> seqs;
  auto add = [&](int n, bool all) {
    auto s = std::make_unique<SeqState>();
    s->id = s->arrival = seqs.size() + 1;
    s->tokens.resize(static_cast<size_t>(n));
    std::iota(s->tokens.begin(), s->tokens.end(), 300);  // the same tokens: a cacheable prefix
    s->n_prompt = n;
    s->all_logits = all;
    sched.enqueue(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  };
  SeqState* plain = add(12, false);
  const Scheduler::Step& s1 = sched.schedule();
  ASSERT_EQ(s1.items.size(), 1u);
  sched.computed(s1);
  sched.remove(plain);  // its blocks stay cached
  SeqState* a = add(12, true);
  SeqState* b = add(9, true);
  // a takes 1 + 5 rows (no cached prefix for it), b only its own row; then a's rest and b's.
  const Scheduler::Step& s2 = sched.schedule();
  EXPECT_EQ(items(s2), (std::vector<std::pair<uint64_t, int64_t>>{{a->id, 6}, {b->id, 1}}));
  EXPECT_TRUE(s2.items[0].all_logits);
  EXPECT_TRUE(s2.copies.empty());
  EXPECT_EQ(a->cached_tokens, 0);
  sched.computed(s2);
  const Scheduler::Step& s3 = sched.schedule();
  EXPECT_EQ(items(s3), (std::vector<std::pair<uint64_t, int64_t>>{{a->id, 6}, {b->id, 1}}));
  EXPECT_TRUE(s3.items[0].logits);
  sched.computed(s3);
}

}  // namespace
}  // namespace ll3
