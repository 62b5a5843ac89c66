// The scheduler under memory pressure, through its public API only (add, schedule, computed,
// remove, and the KV manager's set_reclaim): when a step finds no free block it asks the reclaim callback
// (the engine's: unpin a session) before it preempts anything, preempts only when the callback
// frees nothing, and uses the blocks the callback freed; and a new sequence is admitted only
// while it leaves a block for each running sequence to grow into.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "engine/scheduler.h"

namespace ll3 {
namespace {

// A pool, a KV manager and a scheduler over it, and sequences of distinct tokens (no prefix is
// shared).
struct Sched {
  Sched(int32_t n_blocks, int32_t block_size)
      : pool(n_blocks, block_size, 7), kv(pool, true), sched(kv, SchedulerOptions{100, 8}) {}
  uint64_t add(int n_prompt) {
    const uint64_t id = ++next_id;
    std::vector<int32_t> tokens(static_cast<size_t>(n_prompt));
    std::iota(tokens.begin(), tokens.end(), static_cast<int32_t>(1000 * id));
    sched.add(id, std::move(tokens), n_prompt + 16, 0, false);
    return id;
  }
  // One step as the engine runs it: computed, then a sampled token wherever logits were made.
  const SchedulerOutput& step() {
    const SchedulerOutput& out = sched.schedule();
    sched.computed(out);
    for (const ScheduledSeq& it : out.seqs) {
      if (it.logits) sched.append(it.id, 1);
    }
    return out;
  }
  const SeqState& q(uint64_t id) const { return sched.seq(id); }
  std::vector<int32_t> blocks(uint64_t id) const { return {kv.blocks(id).begin(), kv.blocks(id).end()}; }
  BlockPool pool;
  KvManager kv;
  Scheduler sched;
  uint64_t next_id = 0;
};

std::vector<uint64_t> items_of(const SchedulerOutput& out) {
  std::vector<uint64_t> ids;
  for (const ScheduledSeq& it : out.seqs) ids.push_back(it.id);
  return ids;
}

// Stands for the engine's pinned sessions: blocks held outside any sequence, given back one per
// call of the reclaim callback (as SessionStore::evict_one unpins one session per call).
struct Pinned {
  explicit Pinned(BlockPool& p, int n) : pool(p) {
    for (int i = 0; i < n; ++i) held.push_back(pool.allocate());
  }
  bool reclaim() {
    ++calls;
    if (held.empty()) return false;
    freed.push_back(held.back());
    pool.release(held.back());
    held.pop_back();
    return true;
  }
  BlockPool& pool;
  std::vector<int32_t> held, freed;
  int calls = 0;
};

// 8 blocks of 2 positions, 2 of them pinned. a and b (4-token prompts) take 2 blocks each in
// the first step and a 3rd each in the second: the pool is full. After the third step (position
// 5) the next step needs a 4th block for each (position 6).
struct FullPool {
  FullPool() : s(8, 2), pinned(s.pool, 2) {
    a = s.add(4);
    b = s.add(4);
    s.step();
    s.step();
    EXPECT_EQ(s.pool.available(), 0);
    s.step();
  }
  Sched s;
  Pinned pinned;
  uint64_t a = 0;
  uint64_t b = 0;
};

TEST(SchedulerMemory, ReclaimsBeforePreemptingAndUsesTheFreedBlocks) {
  FullPool f;
  bool b_running_at_reclaim = true;
  f.s.kv.set_reclaim([&] {
    b_running_at_reclaim = b_running_at_reclaim && f.s.q(f.b).running && f.s.q(f.b).preemptions == 0;
    return f.pinned.reclaim();
  });
  const SchedulerOutput& st = f.s.step();
  EXPECT_EQ(f.pinned.calls, 2);  // once for a's 4th block, once for b's
  EXPECT_TRUE(b_running_at_reclaim);
  EXPECT_TRUE(st.preempted.empty());
  ASSERT_EQ(st.seqs.size(), 2u);
  EXPECT_EQ(st.seqs[0].id, f.a);
  EXPECT_EQ(st.seqs[1].id, f.b);
  // The 4th block of each is the one the callback freed for it.
  ASSERT_EQ(f.pinned.freed.size(), 2u);
  ASSERT_EQ(f.s.blocks(f.a).size(), 4u);
  ASSERT_EQ(f.s.blocks(f.b).size(), 4u);
  EXPECT_EQ(f.s.blocks(f.a)[3], f.pinned.freed[0]);
  EXPECT_EQ(f.s.blocks(f.b)[3], f.pinned.freed[1]);
  EXPECT_EQ(f.s.q(f.a).preemptions + f.s.q(f.b).preemptions, 0);
}

TEST(SchedulerMemory, PreemptsOnlyWhenReclaimFreesNothing) {
  FullPool f;
  f.pinned.held.clear();  // the pinned blocks stay referenced: nothing to reclaim
  bool b_running_at_reclaim = false;
  f.s.kv.set_reclaim([&] {
    b_running_at_reclaim = f.s.q(f.b).running && f.s.q(f.b).preemptions == 0;
    return f.pinned.reclaim();
  });
  const SchedulerOutput& st = f.s.step();
  EXPECT_EQ(f.pinned.calls, 1);  // a found no block: asked first, then b (the newest) went
  EXPECT_TRUE(b_running_at_reclaim);
  ASSERT_EQ(st.preempted.size(), 1u);
  EXPECT_EQ(st.preempted[0], f.b);
  EXPECT_EQ(f.s.q(f.b).preemptions, 1);
  EXPECT_EQ(f.s.q(f.a).preemptions, 0);
  ASSERT_EQ(st.seqs.size(), 1u);
  EXPECT_EQ(st.seqs[0].id, f.a);
  EXPECT_EQ(f.s.blocks(f.a).size(), 4u);
}

TEST(SchedulerMemory, AdmissionReclaimsWhenNothingRuns) {
  // Every block pinned, nothing running: a 3-token prompt (2 blocks of 2) is admitted on the
  // blocks the callback frees, one call per block.
  Sched s(4, 2);
  Pinned pinned(s.pool, 4);
  s.kv.set_reclaim([&] { return pinned.reclaim(); });
  const uint64_t a = s.add(3);
  const SchedulerOutput& st = s.step();
  ASSERT_EQ(st.seqs.size(), 1u);
  EXPECT_EQ(st.seqs[0].id, a);
  EXPECT_EQ(pinned.calls, 2);
  EXPECT_EQ(pinned.held.size(), 2u);
  std::vector<int32_t> got = s.blocks(a), freed = pinned.freed;
  std::sort(got.begin(), got.end());
  std::sort(freed.begin(), freed.end());
  EXPECT_EQ(got, freed);
}

TEST(SchedulerMemory, HeadroomReclaimsPinnedBlocksBeforeANewSequenceWaits) {
  // One sequence runs in 1 of 6 blocks of 4; 4 are pinned. A new 8-token prompt needs 2 blocks
  // plus 1 of headroom: the pool has 1, so two pinned blocks are given back and it is admitted.
  Sched s(6, 4);
  Pinned pinned(s.pool, 4);
  const uint64_t a = s.add(3);
  s.step();
  ASSERT_EQ(s.pool.available(), 1);
  s.kv.set_reclaim([&] { return pinned.reclaim(); });
  const uint64_t x = s.add(8);
  const SchedulerOutput& st = s.step();
  EXPECT_EQ(pinned.calls, 2);
  EXPECT_EQ(st.admitted, std::vector<uint64_t>{x});
  EXPECT_EQ(items_of(st), (std::vector<uint64_t>{a, x}));
  EXPECT_EQ(s.pool.available(), 1);  // the headroom block, left for a
}

// The headroom rule at its boundary. k running sequences hold one block each (3-token prompts
// in blocks of 4) and do not grow in the next step (position 3 is in their block); a new
// 8-token prompt needs 2 blocks. It is admitted when the pool has 2 + k available, not with
// 2 + k - 1, though its own 2 blocks would fit: with nothing running no headroom is needed.
struct HeadroomCase {
  int running;
  int32_t available;  // blocks available when the new sequence asks
  bool admitted;
};

void PrintTo(const HeadroomCase& c, std::ostream* os) {
  *os << c.running << " running, " << c.available << " available";
}

class SchedulerHeadroom : public ::testing::TestWithParam<HeadroomCase> {};

TEST_P(SchedulerHeadroom, AdmitsOnlyWithABlockLeftForEachRunningSequence) {
  const HeadroomCase c = GetParam();
  Sched s(c.running + c.available, 4);
  std::vector<uint64_t> running;
  for (int i = 0; i < c.running; ++i) running.push_back(s.add(3));
  s.step();
  ASSERT_EQ(s.sched.n_running(), static_cast<size_t>(c.running));
  ASSERT_EQ(s.pool.available(), c.available);
  const uint64_t x = s.add(8);
  const SchedulerOutput& st = s.step();
  ASSERT_TRUE(st.preempted.empty());
  ASSERT_EQ(s.pool.available(), c.admitted ? c.available - 2 : c.available)
      << "the running ones grew";
  EXPECT_EQ(s.q(x).running, c.admitted);
  EXPECT_EQ(st.seqs.size(), static_cast<size_t>(c.running + (c.admitted ? 1 : 0)));
  if (c.admitted) {
    EXPECT_EQ(st.admitted, std::vector<uint64_t>{x});
    EXPECT_EQ(s.blocks(x).size(), 2u);
  } else {
    EXPECT_TRUE(st.admitted.empty());
    EXPECT_TRUE(s.blocks(x).empty());
    EXPECT_EQ(s.sched.n_waiting(), 1u);
    EXPECT_EQ(s.sched.next_waiting(), x);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Boundary, SchedulerHeadroom,
    ::testing::Values(HeadroomCase{0, 2, true},  // nothing running: its own 2 suffice
                      HeadroomCase{1, 3, true}, HeadroomCase{1, 2, false}, HeadroomCase{2, 4, true},
                      HeadroomCase{2, 3, false}, HeadroomCase{3, 5, true},
                      HeadroomCase{3, 4, false}),
    [](const ::testing::TestParamInfo<HeadroomCase>& i) {
      return std::to_string(i.param.running) + "Running" + std::to_string(i.param.available) +
             "Available";
    });

}  // namespace
}  // namespace ll3
