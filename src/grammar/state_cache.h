// The parse states one TokenFilter::allowed() call meets, as a lazily built DFA. Nodes are
// interned (one id per (position, parent)), so equal states have equal, sorted top lists and
// are interned too; each state's transitions are computed once per byte. Inside a JSON string
// nearly every trie edge then costs one table lookup: the state after most characters is the
// state before them.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/matcher.h"

namespace ll3::grammar {

class StateCache {
 public:
  // Starts over from the matcher's state; returns the start state.
  int32_t reset(const Matcher& m);
  // The state after byte b from state s; -1 when no stack takes b (or on overflow).
  int32_t next(int32_t s, uint8_t b);
  // Bytes that some top of s takes (a superset of the bytes with a next state).
  const ByteSet& any(int32_t s) const { return states_[size_t(s)].any; }
  // Fewest bytes that complete the match from state s (0 when it is complete).
  int32_t min_end(int32_t s) const { return states_[size_t(s)].min_end; }
  // The caps on nodes and states were hit: the answers since are unreliable, and the caller
  // must fall back to the uncached walk.
  bool too_big() const { return too_big_; }

 private:
  struct State {
    uint32_t tops_begin, tops_end;  // in state_tops_
    int32_t min_end;
    bool accept;
    ByteSet any;
  };
  struct Slot {
    uint32_t gen;
    int32_t id;
  };
  friend struct InternNodes;
  int32_t intern_node(uint32_t pos, int32_t parent);
  int32_t intern_state(bool accept);  // the state of tmp_ (sorted, unique)
  void grow(std::vector<Slot>& table, bool nodes);

  const Grammar::Impl* g_ = nullptr;
  uint32_t gen_ = 0;  // slots of older calls are empty
  std::vector<StackNode> pool_;
  std::vector<Slot> node_table_;
  size_t n_nodes_in_table_ = 0;
  std::vector<State> states_;
  std::vector<int32_t> state_tops_;
  std::vector<Slot> state_table_;
  std::vector<int32_t> trans_;  // [state * 256 + byte] for the first kDenseStates states
  std::vector<int32_t> tmp_;
  std::vector<int32_t> canon_;  // the matcher's node ids -> interned ids
  std::vector<WorkItem> work_;
  bool too_big_ = false;
};

}  // namespace ll3::grammar
