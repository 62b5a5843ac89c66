// The KV manager between the scheduler and the block pool: exact block ids through lookup,
// allocation, naming and release, and the reclaim callback before an allocation fails.
#include "kv/kv_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace ll3 {
namespace {

std::vector<int32_t> iota_tokens(int n, int first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<int32_t> table(const KvManager& kv, uint64_t id) {
  return std::vector<int32_t>(kv.blocks(id).begin(), kv.blocks(id).end());
}

TEST(KvManager, NamedBlocksAreFoundByTheNextSequenceAndItsTailIsCopied) {
  BlockPool pool(16, 4, 7);
  KvManager kv(pool, true);
  const std::vector<int32_t> t = iota_tokens(10, 100);
  kv.open(1, 4);
  ASSERT_TRUE(kv.allocate(1, 10));
  EXPECT_EQ(table(kv, 1), (std::vector<int32_t>{0, 1, 2}));
  kv.name_full(1, t, 10);  // blocks 0 and 1 are full
  kv.free(1, t, 10);       // block 2's two tokens are named on the way out
  EXPECT_TRUE(kv.blocks(1).empty());
  EXPECT_EQ(pool.cached_blocks(), 3);
  kv.close(1);

  kv.open(2, 4);
  std::vector<BlockCopy> copies;
  EXPECT_EQ(kv.lookup(2, t, 10, &copies), 10);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, 2);
  EXPECT_EQ(copies[0].n_tokens, 2);
  EXPECT_EQ(table(kv, 2), (std::vector<int32_t>{0, 1, copies[0].dst}));
  EXPECT_EQ(pool.ref_count(0), 1);
  kv.drop(2);  // nothing named: the copy goes back to the free list, the shared blocks to the cache
  EXPECT_EQ(pool.used_blocks(), 0);
}

TEST(KvManager, WithoutThePrefixCacheNothingIsFoundOrNamed) {
  BlockPool pool(8, 4, 7);
  KvManager kv(pool, false);
  const std::vector<int32_t> t = iota_tokens(8, 1);
  kv.open(1, 2);
  ASSERT_TRUE(kv.allocate(1, 8));
  kv.name_full(1, t, 8);
  kv.free(1, t, 8);
  EXPECT_EQ(pool.cached_blocks(), 0);
  kv.open(2, 2);
  std::vector<BlockCopy> copies;
  EXPECT_EQ(kv.lookup(2, t, 8, &copies), 0);
  EXPECT_TRUE(copies.empty());
}

TEST(KvManager, ReclaimRunsBeforeAnAllocationFailsAndItsBlocksAreUsed) {
  BlockPool pool(4, 4, 7);
  KvManager kv(pool, true);
  // A holder (a session's pin, say) keeps two blocks referenced.
  const int32_t held[2] = {pool.allocate(), pool.allocate()};
  int calls = 0;
  kv.set_reclaim([&] {
    ++calls;
    if (calls > 1) return false;
    pool.release(held[1]);
    pool.release(held[0]);
    return true;
  });
  kv.open(1, 4);
  ASSERT_TRUE(kv.allocate(1, 8));  // two free blocks: no reclaim
  EXPECT_EQ(calls, 0);
  ASSERT_TRUE(kv.allocate(1, 16));  // two more: only after the reclaim
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(kv.blocks(1).size(), 4u);
  EXPECT_FALSE(kv.allocate(1, 20));  // nothing left, and the reclaim says so
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(kv.blocks(1).size(), 4u);  // the table is as it was
}

}  // namespace
}  // namespace ll3
