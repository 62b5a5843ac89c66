#include "grammar/token_filter.h"

#include "grammar/state_cache.h"

#include <algorithm>
#include <numeric>

namespace ll3::grammar {

namespace {

// Per-thread scratch of allows / allowed: a copy of the matcher's nodes that the walk extends
// and truncates again, the tops of every trie depth, one after the other, and the expansion
// stack.
struct FilterScratch {
  std::vector<StackNode> pool;
  std::vector<int32_t> tops;
  std::vector<WorkItem> work;
};

FilterScratch& filter_scratch(const Matcher& m) {
  thread_local FilterScratch s;
  s.pool.assign(m.nodes().begin(), m.nodes().end());
  s.tops.assign(m.tops().begin(), m.tops().end());
  s.work.clear();
  return s;
}

}  // namespace

TokenFilter::TokenFilter(std::vector<std::string> token_bytes, std::vector<int32_t> end_tokens)
    : n_vocab_(int32_t(token_bytes.size())), bytes_(std::move(token_bytes)), end_tokens_(std::move(end_tokens)) {
  is_end_.assign(size_t(n_vocab_), 0);
  for (int32_t t : end_tokens_)
    if (t >= 0 && t < n_vocab_) is_end_[size_t(t)] = 1;
  // Tokens sorted by bytes: each trie node is a contiguous range of them, built breadth-first
  // so that a node's children are contiguous too.
  std::vector<int32_t> order;
  for (int32_t t = 0; t < n_vocab_; ++t)
    if (!bytes_[size_t(t)].empty() && !is_end_[size_t(t)]) order.push_back(t);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes_[size_t(a)] < bytes_[size_t(b)]; });
  struct Pending {
    uint32_t node, lo, hi, depth;
  };
  std::vector<Pending> queue{{0, 0, uint32_t(order.size()), 0}};
  nodes_.push_back(TrieNode{0, 0, 0, 0, 0});
  for (size_t q = 0; q < queue.size(); ++q) {
    Pending p = queue[q];
    uint32_t i = p.lo;
    nodes_[p.node].tok_begin = uint32_t(tok_ids_.size());
    while (i < p.hi && bytes_[size_t(order[i])].size() == p.depth) tok_ids_.push_back(order[i++]);
    nodes_[p.node].tok_end = uint32_t(tok_ids_.size());
    nodes_[p.node].child_begin = uint32_t(nodes_.size());
    while (i < p.hi) {
      uint8_t b = uint8_t(bytes_[size_t(order[i])][p.depth]);
      uint32_t j = i;
      while (j < p.hi && uint8_t(bytes_[size_t(order[j])][p.depth]) == b) ++j;
      queue.push_back(Pending{uint32_t(nodes_.size()), i, j, p.depth + 1});
      nodes_.push_back(TrieNode{0, 0, 0, 0, b});
      i = j;
    }
    nodes_[p.node].child_end = uint32_t(nodes_.size());
  }
}

bool TokenFilter::allows(const Matcher& m, int32_t token) const {
  if (token < 0 || token >= n_vocab_) return false;
  if (is_end_[size_t(token)]) return m.can_end();
  const std::string& bytes = bytes_[size_t(token)];
  if (bytes.empty()) return false;
  // The first byte needs no copy of the state: most refused tokens are refused right there.
  const Grammar::Impl& g = m.impl();
  uint8_t b0 = uint8_t(bytes[0]);
  bool any = false;
  for (int32_t t : m.tops()) any = any || g.sets[elem_index(g.elems[m.nodes()[size_t(t)].pos])].test(b0);
  if (!any) return false;
  FilterScratch& s = filter_scratch(m);
  StepBuffers buf{&s.pool, &s.tops, &s.work};
  size_t begin = 0, end = s.tops.size();
  bool acc = false;
  for (char c : bytes) {
    if (!step(g, buf, begin, end, uint8_t(c), &acc)) return false;
    begin = end;
    end = s.tops.size();
  }
  return true;
}

struct TokenFilter::Walk {
  const Grammar::Impl& g;
  FilterScratch& s;
  StepBuffers buf;
  int64_t budget;
  uint8_t* out;
};

// At trie node `node`, whose prefix led to the tops s.tops[in_begin, in_end).
void TokenFilter::walk(Walk& w, uint32_t node, size_t in_begin, size_t in_end) const {
  const Grammar::Impl& g = w.g;
  ByteSet any;  // bytes some top takes: children outside it are dropped unvisited
  for (size_t k = in_begin; k < in_end; ++k) any |= g.sets[elem_index(g.elems[w.s.pool[size_t(w.s.tops[k])].pos])];
  const TrieNode& n = nodes_[node];
  for (uint32_t c = n.child_begin; c < n.child_end; ++c) {
    const TrieNode& child = nodes_[c];
    uint8_t b = child.byte;
    if (!any.test(b)) continue;
    if (child.tok_begin != child.tok_end) {
      bool ok = w.budget < 0;
      // Taking b from a top leaves exactly its min_end - 1 bytes to go (min_rest counts b).
      for (size_t k = in_begin; k < in_end && !ok; ++k) {
        const StackNode& sn = w.s.pool[size_t(w.s.tops[k])];
        ok = g.sets[elem_index(g.elems[sn.pos])].test(b) && sn.min_end - 1 <= w.budget - 1;
      }
      if (ok)
        for (uint32_t t = child.tok_begin; t < child.tok_end; ++t) w.out[tok_ids_[t]] = 1;
    }
    if (child.child_begin == child.child_end) continue;
    size_t pool_mark = w.s.pool.size();
    size_t out_begin = w.s.tops.size();
    bool acc = false;
    if (step(g, w.buf, in_begin, in_end, b, &acc) && w.s.tops.size() > out_begin) {
      walk(w, c, out_begin, w.s.tops.size());
    }
    w.s.tops.resize(out_begin);
    w.s.pool.resize(pool_mark);
  }
}

// The same walk over the cached DFA of states: per trie edge one transition lookup.
void TokenFilter::walk_cached(StateCache& c, int64_t budget, uint8_t* out, uint32_t node, int32_t state) const {
  const ByteSet any = c.any(state);
  const TrieNode& n = nodes_[node];
  for (uint32_t ch = n.child_begin; ch < n.child_end && !c.too_big(); ++ch) {
    const TrieNode& child = nodes_[ch];
    if (!any.test(child.byte)) continue;
    int32_t next = c.next(state, child.byte);
    if (next < 0) continue;
    if (child.tok_begin != child.tok_end && (budget < 0 || c.min_end(next) <= budget - 1))
      for (uint32_t t = child.tok_begin; t < child.tok_end; ++t) out[tok_ids_[t]] = 1;
    if (child.child_begin != child.child_end) walk_cached(c, budget, out, ch, next);
  }
}

void TokenFilter::allowed(const Matcher& m, int64_t budget, std::vector<uint8_t>& allowed) const {
  allowed.assign(size_t(n_vocab_), 0);
  if (m.can_end())
    for (int32_t t : end_tokens_)
      if (t >= 0 && t < n_vocab_) allowed[size_t(t)] = 1;
  if (m.tops().empty() || budget == 0) return;
  thread_local StateCache cache;
  walk_cached(cache, budget, allowed.data(), 0, cache.reset(m));
  if (!cache.too_big()) return;
  // A grammar whose states do not repeat (the cache outgrew its caps): walk again, keeping only
  // the states of the current trie path.
  std::fill(allowed.begin(), allowed.end(), 0);
  if (m.can_end())
    for (int32_t t : end_tokens_)
      if (t >= 0 && t < n_vocab_) allowed[size_t(t)] = 1;
  FilterScratch& s = filter_scratch(m);
  Walk w{m.impl(), s, StepBuffers{&s.pool, &s.tops, &s.work}, budget, allowed.data()};
  walk(w, 0, 0, s.tops.size());
}

}  // namespace ll3::grammar
