#include "kv/kv_manager.h"

namespace ll3 {

KvManager::KvManager(BlockPool& pool, bool prefix_cache) : pool_(pool), prefix_cache_(prefix_cache) {}

void KvManager::open(uint64_t id, int64_t max_blocks, uint64_t salt) {
  SeqBlocks& s = seqs_[id];
  s.blocks.reserve(static_cast<size_t>(max_blocks));
  s.root = pool_.root_hash(salt);
  reset(s);
}

void KvManager::close(uint64_t id) { seqs_.erase(id); }

void KvManager::reset(SeqBlocks& s) {
  s.blocks.clear();
  s.named = 0;
  s.chain = s.root;
}

int64_t KvManager::lookup(uint64_t id, std::span<const int32_t> tokens, int64_t max_tokens,
                          std::vector<BlockCopy>* copies) {
  SeqBlocks& s = seqs_.at(id);
  if (!prefix_cache_ || !s.blocks.empty()) return 0;
  BlockPool::Match m = pool_.lookup(tokens, max_tokens, s.root);
  s.blocks.assign(m.blocks.begin(), m.blocks.end());  // keeps the table's reserved room
  s.named = static_cast<int64_t>(s.blocks.size());
  s.chain = m.hash;
  int64_t held = static_cast<int64_t>(s.blocks.size()) * pool_.block_size();
  if (m.partial >= 0) {
    // Copy on write: the matching rows into a block of our own.
    const int32_t dst = pool_.allocate();
    if (dst >= 0) {
      copies->push_back({m.partial, dst, m.partial_tokens});
      s.blocks.push_back(dst);
      held += m.partial_tokens;
    }
    pool_.release(m.partial);
  }
  return held;
}

bool KvManager::grow(SeqBlocks& s, int64_t end) {
  const int64_t bs = pool_.block_size();
  const size_t need = static_cast<size_t>((end + bs - 1) / bs);
  const size_t had = s.blocks.size();
  while (s.blocks.size() < need) {
    const int32_t b = pool_.allocate();
    if (b < 0) {
      for (size_t i = had; i < s.blocks.size(); ++i) pool_.release(s.blocks[i]);
      s.blocks.resize(had);
      return false;
    }
    s.blocks.push_back(b);
  }
  return true;
}

bool KvManager::allocate(uint64_t id, int64_t end) {
  SeqBlocks& s = seqs_.at(id);
  while (!grow(s, end)) {
    if (!reclaim()) return false;
  }
  return true;
}

void KvManager::name_full(uint64_t id, std::span<const int32_t> tokens, int64_t n_computed) {
  if (!prefix_cache_) return;
  SeqBlocks& s = seqs_.at(id);
  const int64_t bs = pool_.block_size();
  while ((s.named + 1) * bs <= n_computed) {
    const size_t b = static_cast<size_t>(s.named);
    s.chain = pool_.name(s.blocks[b], s.chain, tokens.subspan(b * bs, bs));
    ++s.named;
  }
}

void KvManager::name_tail(uint64_t id, std::span<const int32_t> tokens, int64_t n_computed) {
  if (!prefix_cache_) return;
  SeqBlocks& s = seqs_.at(id);
  const int64_t bs = pool_.block_size();
  const int64_t full = n_computed / bs;
  const int64_t tail = n_computed % bs;
  if (tail == 0 || s.named != full || static_cast<int64_t>(s.blocks.size()) <= full) return;
  pool_.name(s.blocks[full], s.chain, tokens.subspan(static_cast<size_t>(full * bs), static_cast<size_t>(tail)));
}

void KvManager::free(uint64_t id, std::span<const int32_t> tokens, int64_t n_computed) {
  name_tail(id, tokens, n_computed);
  drop(id);
}

void KvManager::drop(uint64_t id) {
  SeqBlocks& s = seqs_.at(id);
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) pool_.release(*it);
  reset(s);
}

void KvManager::trim(uint64_t id, int64_t end) {
  SeqBlocks& s = seqs_.at(id);
  const size_t keep = static_cast<size_t>((end + pool_.block_size() - 1) / pool_.block_size());
  while (s.blocks.size() > keep && static_cast<int64_t>(s.blocks.size()) > s.named) {
    pool_.release(s.blocks.back());
    s.blocks.pop_back();
  }
}

}  // namespace ll3
