#include "grammar/matcher.h"

#include <algorithm>

namespace ll3::grammar {

namespace {

// Per-thread scratch of Matcher::accept: the states being stepped and the expansion stack.
struct AcceptScratch {
  std::vector<int32_t> tops;
  std::vector<WorkItem> work;
  std::vector<int32_t> remap;
};

AcceptScratch& accept_scratch() {
  thread_local AcceptScratch s;
  return s;
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> g) : grammar_(std::move(g)), impl_(&grammar_->impl()) {
  AcceptScratch& s = accept_scratch();
  StepBuffers buf{&pool_, &tops_, &s.work};
  start_state(*impl_, buf, &accept_);
}

bool Matcher::accept(std::string_view bytes) {
  if (bytes.empty()) return true;
  AcceptScratch& s = accept_scratch();
  size_t mark = pool_.size();
  // s.tops holds the current state at [begin, end) and appends the next one after it; the
  // consumed prefix is dropped when it grows, so the buffer stays about two states long.
  s.tops.assign(tops_.begin(), tops_.end());
  size_t begin = 0, end = s.tops.size();
  bool acc = accept_;
  StepBuffers buf{&pool_, &s.tops, &s.work};
  for (char c : bytes) {
    if (!step(*impl_, buf, begin, end, uint8_t(c), &acc)) {
      pool_.resize(mark);
      return false;
    }
    begin = end;
    end = s.tops.size();
    if (begin > 4 * kMaxTops) {
      s.tops.erase(s.tops.begin(), s.tops.begin() + std::ptrdiff_t(begin));
      end -= begin;
      begin = 0;
    }
  }
  tops_.assign(s.tops.begin() + std::ptrdiff_t(begin), s.tops.begin() + std::ptrdiff_t(end));
  accept_ = acc;
  if (pool_.size() > compact_at_) compact();
  return true;
}

int64_t Matcher::min_bytes_to_end() const {
  if (accept_) return 0;
  int32_t best = kInfLen;
  for (int32_t t : tops_) best = std::min(best, pool_[size_t(t)].min_end);
  return best;
}

// Keeps only the nodes the tops can reach. Parents are older than their children, so one pass
// from the oldest renumbers every node before anything that points at it.
void Matcher::compact() {
  std::vector<int32_t>& remap = accept_scratch().remap;
  remap.assign(pool_.size(), -1);
  for (int32_t t : tops_) {
    for (int32_t n = t; n >= 0 && remap[size_t(n)] == -1; n = pool_[size_t(n)].parent) remap[size_t(n)] = 0;
  }
  size_t kept = 0;
  for (size_t n = 0; n < pool_.size(); ++n) {
    if (remap[n] < 0) continue;
    StackNode node = pool_[n];
    if (node.parent >= 0) node.parent = remap[size_t(node.parent)];
    remap[n] = int32_t(kept);
    pool_[kept++] = node;
  }
  pool_.resize(kept);
  for (int32_t& t : tops_) t = remap[size_t(t)];
  compact_at_ = std::max<size_t>(1024, 4 * kept);
}

}  // namespace ll3::grammar
