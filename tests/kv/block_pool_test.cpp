// The KV block pool and its prefix cache: exact block ids, reference counts, hash chains and
// eviction order.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <unordered_map>

namespace ll3 {
namespace {

std::vector<int32_t> iota_tokens(int n, int first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

TEST(FlatIndex, MatchesAMapUnderRandomInsertsAndErases) {
  FlatIndex idx(500);
  std::unordered_map<uint64_t, int32_t> ref;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t key = rng() % 700;  // many collisions of probe runs, keys reused
    if (rng() % 3 != 0 && ref.size() < 500) {
      const int32_t v = static_cast<int32_t>(rng() % 1000);
      idx.put(key, v);
      ref[key] = v;
    } else {
      idx.erase(key);
      ref.erase(key);
    }
    ASSERT_EQ(idx.size(), ref.size());
  }
  for (uint64_t k = 0; k < 700; ++k) {
    auto it = ref.find(k);
    EXPECT_EQ(idx.find(k), it == ref.end() ? -1 : it->second) << k;
  }
}

TEST(BlockPool, AllocatesLowIdsFirstAndCountsReferences) {
  BlockPool p(4, 4, 1);
  EXPECT_EQ(p.allocate(), 0);
  EXPECT_EQ(p.allocate(), 1);
  EXPECT_EQ(p.free_blocks(), 2);
  p.retain(1);
  EXPECT_EQ(p.ref_count(1), 2);
  p.release(1);
  EXPECT_EQ(p.ref_count(1), 1);
  p.release(1);  // unnamed: straight back to the free list, reused first
  EXPECT_EQ(p.free_blocks(), 3);
  EXPECT_EQ(p.cached_blocks(), 0);
  EXPECT_EQ(p.allocate(), 1);
  EXPECT_EQ(p.allocate(), 2);
  EXPECT_EQ(p.allocate(), 3);
  EXPECT_EQ(p.allocate(), -1);  // every block referenced
  EXPECT_EQ(p.used_blocks(), 4);
}

TEST(BlockPool, FindsNamedFullBlocksAlongTheHashChain) {
  BlockPool p(8, 4, 42);
  const std::vector<int32_t> t = iota_tokens(10, 100);  // 2 full blocks + 2 tokens
  const int32_t b0 = p.allocate(), b1 = p.allocate(), b2 = p.allocate();
  const uint64_t h0 = p.name(b0, p.root_hash(), std::span(t).subspan(0, 4));
  const uint64_t h1 = p.name(b1, h0, std::span(t).subspan(4, 4));
  EXPECT_EQ(h0, BlockPool::chain_hash(p.root_hash(), std::span(t).subspan(0, 4)));
  EXPECT_EQ(h1, BlockPool::chain_hash(h0, std::span(t).subspan(4, 4)));
  EXPECT_NE(h0, h1);
  p.name(b2, h1, std::span(t).subspan(8, 2));  // the partly filled tail
  for (int32_t b : {b2, b1, b0}) p.release(b);
  EXPECT_EQ(p.cached_blocks(), 3);
  EXPECT_EQ(p.lru_order(), (std::vector<int32_t>{b2, b1, b0}));  // tail first: evicted first

  BlockPool::Match m = p.lookup(t, 9);  // at most 9 tokens: the full blocks and 1 of the tail
  EXPECT_EQ(m.blocks, (std::vector<int32_t>{b0, b1}));
  EXPECT_EQ(m.hash, h1);
  EXPECT_EQ(m.partial, b2);
  EXPECT_EQ(m.partial_tokens, 1);
  EXPECT_EQ(m.matched, 9);
  EXPECT_EQ(p.ref_count(b0), 1);
  EXPECT_EQ(p.ref_count(b2), 1);
  EXPECT_EQ(p.cached_blocks(), 0);

  // Another prompt diverging inside the second block: one full block, then 2 tokens of b1.
  std::vector<int32_t> u = t;
  u[6] = 7;
  BlockPool::Match m2 = p.lookup(u, 10);
  EXPECT_EQ(m2.blocks, (std::vector<int32_t>{b0}));
  EXPECT_EQ(m2.partial, b1);
  EXPECT_EQ(m2.partial_tokens, 2);
  EXPECT_EQ(p.ref_count(b0), 2);
  EXPECT_EQ(p.ref_count(b1), 2);  // the first match's and this one's
}

TEST(BlockPool, AnotherModelOrAnotherPrefixNeverMatches) {
  const std::vector<int32_t> t = iota_tokens(8, 5);
  BlockPool p(4, 4, 1), q(4, 4, 2);
  EXPECT_NE(p.root_hash(), q.root_hash());
  const int32_t b = p.allocate();
  p.name(b, p.root_hash(), std::span(t).first(4));
  p.release(b);
  // The same 4 tokens after a different first block: not a hit.
  std::vector<int32_t> other = {9, 9, 9, 9, 5, 6, 7, 8};
  const int32_t c = p.allocate();
  p.name(c, BlockPool::chain_hash(p.root_hash(), std::span(other).first(4)), std::span(t).first(4));
  p.release(c);
  BlockPool::Match m = p.lookup(other, 8);
  EXPECT_TRUE(m.blocks.empty());
  EXPECT_EQ(m.partial, -1);
  EXPECT_EQ(m.matched, 0);
}

TEST(BlockPool, EvictsTheLeastRecentlyUsedCachedBlockAndForgetsItsName) {
  BlockPool p(3, 2, 7);
  const std::vector<int32_t> a = {1, 2}, b = {3, 4}, c = {5, 6};
  int32_t ba = p.allocate(), bb = p.allocate(), bc = p.allocate();
  p.name(ba, p.root_hash(), a);
  p.name(bb, p.root_hash(), b);
  p.name(bc, p.root_hash(), c);
  p.release(bb);
  p.release(ba);
  p.release(bc);
  EXPECT_EQ(p.lru_order(), (std::vector<int32_t>{bb, ba, bc}));
  // A hit moves a block out of the list; its release puts it at the recent end.
  BlockPool::Match m = p.lookup(b, 2);
  ASSERT_EQ(m.blocks, (std::vector<int32_t>{bb}));
  p.release(bb);
  EXPECT_EQ(p.lru_order(), (std::vector<int32_t>{ba, bc, bb}));
  EXPECT_EQ(p.free_blocks(), 0);
  EXPECT_EQ(p.allocate(), ba);  // the oldest cached block
  EXPECT_EQ(p.named_tokens(ba), 0);
  EXPECT_TRUE(p.lookup(a, 2).blocks.empty());
  BlockPool::Match mc = p.lookup(c, 2);
  EXPECT_EQ(mc.blocks, (std::vector<int32_t>{bc}));
}

TEST(BlockPool, ADuplicateFullBlockStaysOutOfTheIndex) {
  BlockPool p(4, 2, 3);
  const std::vector<int32_t> t = {8, 9};
  const int32_t x = p.allocate(), y = p.allocate();
  p.name(x, p.root_hash(), t);
  p.name(y, p.root_hash(), t);  // computed at the same time by another sequence
  p.release(y);
  p.release(x);
  BlockPool::Match m = p.lookup(t, 2);
  EXPECT_EQ(m.blocks, (std::vector<int32_t>{x}));
  // Evicting the duplicate does not disturb the indexed one.
  p.release(x);
  EXPECT_EQ(p.lru_order(), (std::vector<int32_t>{y, x}));
  EXPECT_EQ(p.allocate(), 2);
  EXPECT_EQ(p.allocate(), 3);
  EXPECT_EQ(p.allocate(), y);
  EXPECT_EQ(p.lookup(t, 2).blocks, (std::vector<int32_t>{x}));
}

}  // namespace
}  // namespace ll3
