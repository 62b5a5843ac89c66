// Scheduler decisions without a model: token budget, chunked prefill, admission order, prefix
// reuse with copy on write, preemption of the newest sequence.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>
#include <span>
#include <vector>

namespace ll3 {
namespace {

struct Fixture {
  Fixture(int32_t n_blocks, int32_t bs, int64_t budget, int64_t max_seqs, int64_t prompt_logit_rows = 32)
      : pool(n_blocks, bs, 11), kv(pool, true), sched(kv, SchedulerOptions{budget, max_seqs, prompt_logit_rows}) {}
  // Queues a prompt of n tokens first_token, first_token + 1, ...; returns its id.
  uint64_t add(int n_prompt, int first_token, int priority = 0, bool all_logits = false) {
    std::vector<int32_t> tokens(static_cast<size_t>(n_prompt));
    std::iota(tokens.begin(), tokens.end(), first_token);
    const uint64_t id = ++next_id;
    sched.add(id, std::move(tokens), n_prompt + 64, priority, all_logits);
    return id;
  }
  // Runs a step as the engine would: computed, then a sampled token for each logits row.
  const SchedulerOutput& step() {
    const SchedulerOutput& out = sched.schedule();
    sched.computed(out);
    for (const ScheduledSeq& it : out.seqs) {
      if (it.logits) sched.append(it.id, 7);
    }
    return out;
  }
  const SeqState& q(uint64_t id) const { return sched.seq(id); }
  std::span<const int32_t> blocks(uint64_t id) const { return kv.blocks(id); }
  BlockPool pool;
  KvManager kv;
  Scheduler sched;
  uint64_t next_id = 0;
};

std::vector<std::pair<uint64_t, int64_t>> items(const SchedulerOutput& out) {
  std::vector<std::pair<uint64_t, int64_t>> v;
  for (const ScheduledSeq& it : out.seqs) v.push_back({it.id, it.n_tokens});
  return v;
}

TEST(Scheduler, ChunksLongPromptsWithinTheBudgetAndDecodesFirst) {
  Fixture f(64, 4, 8, 8);
  const uint64_t a = f.add(3, 100);
  const uint64_t b = f.add(20, 200);
  const SchedulerOutput& s1 = f.step();
  EXPECT_EQ(items(s1), (std::vector<std::pair<uint64_t, int64_t>>{{1, 3}, {2, 5}}));
  EXPECT_TRUE(s1.seqs[0].logits);
  EXPECT_FALSE(s1.seqs[1].logits);
  // a decodes one token per step; b's prompt comes in chunks of what is left of the budget.
  const SchedulerOutput& s2 = f.step();
  EXPECT_EQ(items(s2), (std::vector<std::pair<uint64_t, int64_t>>{{1, 1}, {2, 7}}));
  const SchedulerOutput& s3 = f.step();
  EXPECT_EQ(items(s3), (std::vector<std::pair<uint64_t, int64_t>>{{1, 1}, {2, 7}}));
  const SchedulerOutput& s4 = f.step();
  EXPECT_EQ(items(s4), (std::vector<std::pair<uint64_t, int64_t>>{{1, 1}, {2, 1}}));
  EXPECT_TRUE(s4.seqs[1].logits);
  EXPECT_EQ(f.q(b).n_computed, 20);
  EXPECT_EQ(f.q(a).n_computed, 6);
  EXPECT_EQ(f.blocks(a).size(), 2u);  // 6 positions in blocks of 4
  EXPECT_EQ(f.blocks(b).size(), 5u);
}

TEST(Scheduler, AdmitsByPriorityThenArrivalWithinMaxSeqs) {
  Fixture f(64, 4, 100, 2);
  f.add(4, 0);
  f.add(4, 10);
  f.add(4, 20, /*priority=*/5);
  const SchedulerOutput& s1 = f.step();
  EXPECT_EQ(items(s1), (std::vector<std::pair<uint64_t, int64_t>>{{3, 4}, {1, 4}}));
  EXPECT_EQ(f.sched.n_waiting(), 1u);
  EXPECT_EQ(f.sched.next_waiting(), 2u);
  // The third waits until one finishes.
  f.sched.remove(1);
  const SchedulerOutput& s2 = f.step();
  EXPECT_EQ(items(s2), (std::vector<std::pair<uint64_t, int64_t>>{{3, 1}, {2, 4}}));
}

TEST(Scheduler, ReusesACachedPrefixAndCopiesThePartialBlock) {
  Fixture f(64, 4, 100, 4);
  const uint64_t a = f.add(10, 500);
  f.step();
  f.sched.remove(a);  // its 2 full blocks and the 2-token tail stay cached
  EXPECT_EQ(f.pool.cached_blocks(), 3);
  const uint64_t b = f.add(13, 500);  // the same 10 tokens, then 3 more
  const SchedulerOutput& st = f.step();
  EXPECT_EQ(f.q(b).cached_tokens, 10);
  ASSERT_EQ(st.copies.size(), 1u);
  EXPECT_EQ(st.copies[0].n_tokens, 2);
  EXPECT_EQ(st.copies[0].src, 2);  // a's tail block
  EXPECT_EQ(f.blocks(b)[0], 0);
  EXPECT_EQ(f.blocks(b)[1], 1);
  EXPECT_EQ(f.blocks(b)[2], st.copies[0].dst);
  // The step hands out the same table as plain data.
  const std::span<const int32_t> table = st.block_table(st.seqs[0]);
  EXPECT_EQ(std::vector<int32_t>(table.begin(), table.end()), std::vector<int32_t>(f.blocks(b).begin(), f.blocks(b).end()));
  EXPECT_NE(st.copies[0].dst, 2);
  EXPECT_EQ(items(st), (std::vector<std::pair<uint64_t, int64_t>>{{b, 3}}));
  // A prompt equal to a cached one still computes its last token (for its logits).
  const uint64_t c = f.add(8, 500);
  const SchedulerOutput& s2 = f.step();
  EXPECT_EQ(f.q(c).cached_tokens, 7);
  EXPECT_EQ(s2.seqs.back().n_tokens, 1);
}

TEST(Scheduler, PreemptsTheNewestWhenThePoolIsFullAndRecomputesIt) {
  // 6 blocks of 2: two sequences of 4-token prompts growing until the pool runs out.
  Fixture f(6, 2, 100, 4);
  const uint64_t a = f.add(4, 0);
  const uint64_t b = f.add(4, 100);
  f.step();  // both prefill: 4 blocks
  EXPECT_EQ(f.pool.used_blocks(), 4);
  f.step();  // decode: positions 4 -> 2 more blocks, the pool is full
  EXPECT_EQ(f.pool.used_blocks(), 6);
  EXPECT_TRUE(f.step().preempted.empty());  // position 5 fits the 3rd blocks
  // Position 6 needs a 4th block for each: a, the oldest, grows into b's, and b (the newest)
  // is preempted, in this step and no other.
  const SchedulerOutput& st6 = f.step();
  EXPECT_EQ(st6.preempted, std::vector<uint64_t>{b});
  EXPECT_EQ(items(st6), (std::vector<std::pair<uint64_t, int64_t>>{{a, 1}}));
  EXPECT_EQ(f.blocks(a).size(), 4u);
  EXPECT_EQ(f.q(b).preemptions, 1);
  EXPECT_EQ(f.q(a).preemptions, 0);
  EXPECT_FALSE(f.q(b).running);
  EXPECT_EQ(f.q(b).n_computed, 0);
  EXPECT_TRUE(f.blocks(b).empty());
  EXPECT_EQ(f.sched.next_waiting(), b);
  // Once a finishes, b is admitted again and recomputes from its cached full blocks.
  f.sched.remove(a);
  const SchedulerOutput& st = f.step();
  ASSERT_EQ(st.seqs.size(), 1u);
  EXPECT_EQ(st.seqs[0].id, b);
  EXPECT_TRUE(st.seqs[0].logits);
  EXPECT_EQ(f.q(b).n_computed, static_cast<int64_t>(f.q(b).tokens.size()) - 1);
}

TEST(Scheduler, RemoveFreesEveryBlockWhateverTheState) {
  Fixture f(32, 4, 6, 4);
  const uint64_t a = f.add(20, 0);  // mid-prefill after one step
  const uint64_t b = f.add(3, 50);
  f.step();
  f.step();
  const uint64_t c = f.add(5, 90);  // still queued
  EXPECT_GT(f.pool.used_blocks(), 0);
  f.sched.remove(a);
  f.sched.remove(b);
  f.sched.remove(c);
  EXPECT_EQ(f.pool.used_blocks(), 0);
  EXPECT_EQ(f.sched.n_running(), 0u);
  EXPECT_EQ(f.sched.n_waiting(), 0u);
}

TEST(Scheduler, ScoredPromptsShareTheExtraLogitRowsAndSkipThePrefixCache) {
  Fixture f(64, 4, 64, 8, /*prompt_logit_rows=*/5);
  const uint64_t plain = f.add(12, 300);  // the same tokens as a's: a cacheable prefix
  const SchedulerOutput& s1 = f.sched.schedule();
  ASSERT_EQ(s1.seqs.size(), 1u);
  f.sched.computed(s1);
  f.sched.remove(plain);  // its blocks stay cached
  const uint64_t a = f.add(12, 300, 0, true);
  const uint64_t b = f.add(9, 300, 0, true);
  // a takes 1 + 5 rows (no cached prefix for it), b only its own row; then a's rest and b's.
  const SchedulerOutput& s2 = f.sched.schedule();
  EXPECT_EQ(items(s2), (std::vector<std::pair<uint64_t, int64_t>>{{a, 6}, {b, 1}}));
  EXPECT_TRUE(s2.seqs[0].all_logits);
  EXPECT_TRUE(s2.copies.empty());
  EXPECT_EQ(f.q(a).cached_tokens, 0);
  f.sched.computed(s2);
  const SchedulerOutput& s3 = f.sched.schedule();
  EXPECT_EQ(items(s3), (std::vector<std::pair<uint64_t, int64_t>>{{a, 6}, {b, 1}}));
  EXPECT_TRUE(s3.seqs[0].logits);
  f.sched.computed(s3);
}

}  // namespace
}  // namespace ll3
