#include "kv/block_pool.h"

#include <algorithm>

#include "core/check.h"

namespace ll3 {

namespace {

// splitmix64's finalizer: every input bit affects every output bit.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

size_t pow2_at_least(size_t n) {
  size_t c = 16;
  while (c < n) c *= 2;
  return c;
}

}  // namespace

FlatIndex::FlatIndex(size_t max_entries) {
  const size_t cap = pow2_at_least(2 * max_entries + 1);
  keys_.assign(cap, 0);
  values_.assign(cap, -1);
  mask_ = cap - 1;
}

size_t FlatIndex::slot_of(uint64_t key) const {
  size_t i = static_cast<size_t>(mix(key)) & mask_;
  while (values_[i] >= 0 && keys_[i] != key) i = (i + 1) & mask_;
  return i;
}

int32_t FlatIndex::find(uint64_t key) const { return values_[slot_of(key)]; }

void FlatIndex::put(uint64_t key, int32_t value) {
  const size_t i = slot_of(key);
  if (values_[i] < 0) {
    LL3_CHECK(2 * (size_ + 1) <= keys_.size());
    ++size_;
  }
  keys_[i] = key;
  values_[i] = value;
}

void FlatIndex::erase(uint64_t key) {
  size_t i = slot_of(key);
  if (values_[i] < 0) return;
  --size_;
  // Backward-shift deletion: move later entries of the probe run into the hole, so lookups
  // never need tombstones.
  for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
    if (values_[j] < 0) break;
    const size_t home = static_cast<size_t>(mix(keys_[j])) & mask_;
    // Entry j may fill hole i unless its home lies cyclically in (i, j].
    const bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (stays) continue;
    keys_[i] = keys_[j];
    values_[i] = values_[j];
    i = j;
  }
  values_[i] = -1;
}

BlockPool::BlockPool(int32_t n_blocks, int32_t block_size, uint64_t model_id)
    : n_blocks_(n_blocks),
      block_size_(block_size),
      root_(mix(model_id ^ 0x6c6c332d6b762d31ull)),
      blocks_(static_cast<size_t>(n_blocks)),
      tokens_(static_cast<size_t>(n_blocks) * block_size),
      full_(static_cast<size_t>(n_blocks)),
      children_(static_cast<size_t>(n_blocks)) {
  LL3_CHECK(n_blocks > 0 && block_size > 0);
  free_.resize(static_cast<size_t>(n_blocks));
  for (int32_t i = 0; i < n_blocks; ++i) free_[i] = n_blocks - 1 - i;  // block 0 on top
  n_free_ = n_blocks;
}

uint64_t BlockPool::chain_hash(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = mix(parent + 0x9e3779b97f4a7c15ull);
  for (int32_t t : tokens) h = mix(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) + 0x9e3779b97f4a7c15ull));
  return mix(h ^ tokens.size());
}

int32_t BlockPool::allocate() {
  int32_t b;
  if (n_free_ > 0) {
    b = free_[--n_free_];
  } else if (lru_head_ != kNone) {
    b = lru_head_;  // evict the least recently used cached block
    lru_remove(b);
    --n_cached_;
    unname(b);
  } else {
    return kNone;
  }
  blocks_[b].ref = 1;
  return b;
}

void BlockPool::retain(int32_t b) {
  Block& k = blocks_[b];
  if (k.ref == 0) {  // a cached block back in use
    LL3_CHECK(k.n_tokens > 0);
    lru_remove(b);
    --n_cached_;
  }
  ++k.ref;
}

void BlockPool::release(int32_t b) {
  Block& k = blocks_[b];
  LL3_CHECK(k.ref > 0);
  if (--k.ref > 0) return;
  if (k.n_tokens > 0) {
    lru_push_back(b);
    ++n_cached_;
  } else {
    free_[n_free_++] = b;
  }
}

uint64_t BlockPool::name(int32_t b, uint64_t parent, std::span<const int32_t> tokens) {
  LL3_CHECK(!tokens.empty() && static_cast<int64_t>(tokens.size()) <= block_size_ && blocks_[b].ref > 0);
  const uint64_t h = chain_hash(parent, tokens);
  Block& k = blocks_[b];
  if (k.n_tokens > 0) {
    if (k.parent == parent && k.hash == h && tokens_equal(b, tokens)) return h;
    unname(b);
  }
  k.parent = parent;
  k.hash = h;
  k.n_tokens = static_cast<int32_t>(tokens.size());
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<ptrdiff_t>(b) * block_size_);
  // Link into the list of blocks after `parent`, at the front.
  const int32_t head = children_.find(parent);
  k.sib_prev = kNone;
  k.sib_next = head;
  if (head != kNone) blocks_[head].sib_prev = b;
  children_.put(parent, b);
  if (k.n_tokens == block_size_ && full_.find(h) == kNone) {
    full_.put(h, b);
    k.indexed = true;
  }
  return h;
}

void BlockPool::unname(int32_t b) {
  Block& k = blocks_[b];
  if (k.n_tokens == 0) return;
  if (k.indexed) {
    full_.erase(k.hash);
    k.indexed = false;
  }
  if (k.sib_prev != kNone) {
    blocks_[k.sib_prev].sib_next = k.sib_next;
  } else if (k.sib_next != kNone) {
    children_.put(k.parent, k.sib_next);
  } else {
    children_.erase(k.parent);
  }
  if (k.sib_next != kNone) blocks_[k.sib_next].sib_prev = k.sib_prev;
  k.sib_prev = k.sib_next = kNone;
  k.n_tokens = 0;
}

void BlockPool::lru_remove(int32_t b) {
  Block& k = blocks_[b];
  (k.lru_prev != kNone ? blocks_[k.lru_prev].lru_next : lru_head_) = k.lru_next;
  (k.lru_next != kNone ? blocks_[k.lru_next].lru_prev : lru_tail_) = k.lru_prev;
  k.lru_prev = k.lru_next = kNone;
}

void BlockPool::lru_push_back(int32_t b) {
  Block& k = blocks_[b];
  k.lru_prev = lru_tail_;
  k.lru_next = kNone;
  (lru_tail_ != kNone ? blocks_[lru_tail_].lru_next : lru_head_) = b;
  lru_tail_ = b;
}

bool BlockPool::tokens_equal(int32_t b, std::span<const int32_t> t) const {
  std::span<const int32_t> mine = tokens_of(b);
  return mine.size() == t.size() && std::equal(mine.begin(), mine.end(), t.begin());
}

int32_t BlockPool::common_prefix(int32_t b, std::span<const int32_t> t) const {
  std::span<const int32_t> mine = tokens_of(b);
  const size_t n = std::min(mine.size(), t.size());
  size_t i = 0;
  while (i < n && mine[i] == t[i]) ++i;
  return static_cast<int32_t>(i);
}

uint64_t BlockPool::root_hash(uint64_t salt) const { return salt == 0 ? root_ : mix(root_ ^ mix(salt)); }

BlockPool::Match BlockPool::lookup(std::span<const int32_t> tokens, int64_t max_tokens, uint64_t root) {
  Match m;
  m.hash = root;
  const int64_t limit = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size()));
  const int64_t bs = block_size_;
  // Whole blocks through the hash index, verifying the tokens (a 64-bit hash can collide).
  while (m.matched + bs <= limit) {
    std::span<const int32_t> next = tokens.subspan(static_cast<size_t>(m.matched), static_cast<size_t>(bs));
    const uint64_t h = chain_hash(m.hash, next);
    const int32_t b = full_.find(h);
    if (b == kNone || blocks_[b].parent != m.hash || !tokens_equal(b, next)) break;
    retain(b);
    m.blocks.push_back(b);
    m.hash = h;
    m.matched += bs;
  }
  // Then the best partial match among the blocks named after this chain.
  if (m.matched < limit) {
    std::span<const int32_t> rest = tokens.subspan(static_cast<size_t>(m.matched), static_cast<size_t>(limit - m.matched));
    int32_t best = kNone, best_n = 0;
    for (int32_t b = children_.find(m.hash); b != kNone; b = blocks_[b].sib_next) {
      if (blocks_[b].parent != m.hash) continue;
      const int32_t n = common_prefix(b, rest);
      if (n > best_n) {
        best = b;
        best_n = n;
      }
    }
    if (best != kNone) {
      retain(best);
      m.partial = best;
      m.partial_tokens = best_n;
      m.matched += best_n;
    }
  }
  return m;
}

std::vector<int32_t> BlockPool::lru_order() const {
  std::vector<int32_t> out;
  for (int32_t b = lru_head_; b != kNone; b = blocks_[b].lru_next) out.push_back(b);
  return out;
}

}  // namespace ll3
