#include "grammar/state_cache.h"

#include <algorithm>

namespace ll3::grammar {

namespace {

constexpr size_t kDenseStates = 8192;       // states with a transition table (1 KiB each)
constexpr size_t kMaxNodes = 4u << 20;      // per call: beyond these the walk falls back
constexpr size_t kMaxStates = 1u << 20;
constexpr int32_t kUnknown = -2;

uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

uint64_t node_hash(uint32_t pos, int32_t parent) { return mix((uint64_t(pos) << 32) ^ uint32_t(parent)); }

}  // namespace

// The expand() policy of the cache: every node interned, tops collected into tmp_ (sorted and
// deduplicated afterwards).
struct InternNodes {
  StateCache& c;
  const std::vector<StackNode>& pool() const { return c.pool_; }
  int32_t cont(uint32_t pos, int32_t parent) { return c.intern_node(pos, parent); }
  bool add_top(uint32_t pos, int32_t parent, int32_t) {
    if (c.tmp_.size() >= 4 * kMaxTops) return false;
    c.tmp_.push_back(c.intern_node(pos, parent));
    return true;
  }
};

void StateCache::grow(std::vector<Slot>& table, bool nodes) {
  std::vector<Slot> old;
  old.swap(table);
  table.assign(std::max<size_t>(1024, old.size() * 2), Slot{0, 0});
  size_t mask = table.size() - 1;
  for (const Slot& s : old) {
    if (s.gen != gen_) continue;
    uint64_t h;
    if (nodes) {
      h = node_hash(pool_[size_t(s.id)].pos, pool_[size_t(s.id)].parent);
    } else {
      const State& st = states_[size_t(s.id)];
      h = st.accept;
      for (uint32_t k = st.tops_begin; k < st.tops_end; ++k) h = mix(h ^ uint32_t(state_tops_[k]));
    }
    size_t i = h & mask;
    while (table[i].gen == gen_) i = (i + 1) & mask;
    table[i] = s;
  }
}

int32_t StateCache::intern_node(uint32_t pos, int32_t parent) {
  if ((n_nodes_in_table_ + 1) * 2 > node_table_.size()) grow(node_table_, true);
  size_t mask = node_table_.size() - 1;
  for (size_t i = node_hash(pos, parent) & mask;; i = (i + 1) & mask) {
    Slot& s = node_table_[i];
    if (s.gen != gen_) {
      pool_.push_back(make_node(*g_, pool_, pos, parent));
      s = Slot{gen_, int32_t(pool_.size() - 1)};
      ++n_nodes_in_table_;
      if (pool_.size() > kMaxNodes) too_big_ = true;
      return s.id;
    }
    const StackNode& n = pool_[size_t(s.id)];
    if (n.pos == pos && n.parent == parent) return s.id;
  }
}

int32_t StateCache::intern_state(bool accept) {
  if ((states_.size() + 1) * 2 > state_table_.size()) grow(state_table_, false);
  uint64_t h = accept;
  for (int32_t t : tmp_) h = mix(h ^ uint32_t(t));
  size_t mask = state_table_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    Slot& s = state_table_[i];
    if (s.gen != gen_) {
      State st{uint32_t(state_tops_.size()), 0, accept ? 0 : kInfLen, accept, ByteSet{}};
      for (int32_t t : tmp_) {
        const StackNode& n = pool_[size_t(t)];
        st.min_end = std::min(st.min_end, n.min_end);
        st.any |= g_->sets[elem_index(g_->elems[n.pos])];
        state_tops_.push_back(t);
      }
      st.tops_end = uint32_t(state_tops_.size());
      states_.push_back(st);
      if (states_.size() <= kDenseStates) trans_.resize(states_.size() * 256, kUnknown);
      if (states_.size() > kMaxStates) too_big_ = true;
      s = Slot{gen_, int32_t(states_.size() - 1)};
      return s.id;
    }
    const State& st = states_[size_t(s.id)];
    if (st.accept == accept && st.tops_end - st.tops_begin == tmp_.size() &&
        std::equal(tmp_.begin(), tmp_.end(), state_tops_.begin() + st.tops_begin))
      return s.id;
  }
}

int32_t StateCache::reset(const Matcher& m) {
  g_ = &m.impl();
  if (++gen_ == 0) {  // after 2^32 calls: really clear the slots once
    std::fill(node_table_.begin(), node_table_.end(), Slot{0, 0});
    std::fill(state_table_.begin(), state_table_.end(), Slot{0, 0});
    gen_ = 1;
  }
  pool_.clear();
  states_.clear();
  state_tops_.clear();
  trans_.clear();
  n_nodes_in_table_ = 0;
  too_big_ = false;
  // The matcher's nodes keep their ids (its tops point at them); interning them lets equal
  // nodes made later resolve to them.
  canon_.clear();
  for (const StackNode& n : m.nodes()) canon_.push_back(intern_node(n.pos, n.parent < 0 ? -1 : canon_[size_t(n.parent)]));
  tmp_.clear();
  for (int32_t t : m.tops()) tmp_.push_back(canon_[size_t(t)]);
  std::sort(tmp_.begin(), tmp_.end());
  tmp_.erase(std::unique(tmp_.begin(), tmp_.end()), tmp_.end());
  return intern_state(m.can_end());
}

int32_t StateCache::next(int32_t s, uint8_t b) {
  if (size_t(s) < kDenseStates) {
    int32_t t = trans_[size_t(s) * 256 + b];
    if (t != kUnknown) return t;
  }
  tmp_.clear();
  bool acc = false, ok = true;
  InternNodes nodes{*this};
  const State st = states_[size_t(s)];
  for (uint32_t k = st.tops_begin; k < st.tops_end && ok; ++k) {
    const StackNode n = pool_[size_t(state_tops_[k])];
    if (g_->sets[elem_index(g_->elems[n.pos])].test(b)) ok = expand(*g_, nodes, work_, n.pos + 1, n.parent, &acc);
  }
  int32_t result = -1;
  if (ok) {
    std::sort(tmp_.begin(), tmp_.end());
    tmp_.erase(std::unique(tmp_.begin(), tmp_.end()), tmp_.end());
    if (tmp_.size() > kMaxTops) ok = false;
  }
  if (ok && (!tmp_.empty() || acc)) result = intern_state(acc);
  if (size_t(s) < kDenseStates) trans_[size_t(s) * 256 + b] = result;
  return result;
}

}  // namespace ll3::grammar
