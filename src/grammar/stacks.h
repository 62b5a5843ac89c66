// The parse-stack machinery shared by Matcher and TokenFilter. A parse position is a stack of
// grammar positions, stored as linked nodes in a pool (node = position + parent node), so that
// the stacks of one state share their common tails and one byte step only creates the few nodes
// at the top. A state is the list of its stacks' top nodes, each at a byte-set element, plus
// whether the input so far is complete (the empty stack).
//
// Nodes only ever point at older nodes (lower ids): a pool can be truncated back to a mark to
// undo a step, and compacted in one forward pass.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/grammar_impl.h"

namespace ll3::grammar {

struct StackNode {
  uint32_t pos;     // index into elems: a byte set (a top), or where to go on (a parent)
  int32_t parent;   // the node below, -1 at the bottom
  int32_t min_end;  // fewest bytes that empty this stack (min_rest along the chain)
};

// Bounds against grammars whose ambiguity multiplies stacks: a step that would need more tops
// (or more expansion work) fails as if the byte did not match.
inline constexpr size_t kMaxTops = 2048;
inline constexpr size_t kMaxWork = 1 << 16;

struct WorkItem {
  uint32_t pos;
  int32_t parent;
};

inline StackNode make_node(const Grammar::Impl& g, const std::vector<StackNode>& pool, uint32_t pos, int32_t parent) {
  int32_t below = parent < 0 ? 0 : pool[size_t(parent)].min_end;
  return StackNode{pos, parent, sat_add(g.min_rest[pos], below)};
}

// Appends to `tops` the tops reached from position `pos` with continuation `parent`: rules are
// expanded into their alternatives, finished alternatives return to their parent. Sets *accept
// when a stack empties. False on overflow. `Nodes` decides how nodes are made and tops kept:
//   const std::vector<StackNode>& pool();
//   int32_t cont(uint32_t pos, int32_t parent);           // a parent node for a rule's return
//   bool add_top(uint32_t pos, int32_t parent, int32_t existing);  // existing: that node, or -1
template <class Nodes>
bool expand(const Grammar::Impl& g, Nodes& nodes, std::vector<WorkItem>& work, uint32_t pos, int32_t parent,
            bool* accept) {
  size_t work_base = work.size();
  size_t budget = kMaxWork;
  work.push_back(WorkItem{pos, parent});
  while (work.size() > work_base) {
    if (budget-- == 0) {
      work.resize(work_base);
      return false;
    }
    WorkItem w = work.back();
    work.pop_back();
    for (;;) {
      uint32_t e = g.elems[w.pos];
      if (is_end(e)) {  // this alternative is done: go on where the parent left off
        if (w.parent < 0) {
          *accept = true;
          break;
        }
        const StackNode pn = nodes.pool()[size_t(w.parent)];
        if (is_set(g.elems[pn.pos])) {  // the parent node itself is the next top
          if (!nodes.add_top(pn.pos, pn.parent, w.parent)) return false;
          break;
        }
        w = WorkItem{pn.pos, pn.parent};
        continue;
      }
      if (is_set(e)) {
        if (!nodes.add_top(w.pos, w.parent, -1)) return false;
        break;
      }
      // A rule: its alternatives, continuing after it. A rule last in its alternative needs no
      // node of its own (tail position), which keeps x* = `r ::= x r | ε` at constant depth.
      int32_t cont = is_end(g.elems[w.pos + 1]) ? w.parent : nodes.cont(w.pos + 1, w.parent);
      uint32_t r = elem_index(e);
      for (uint32_t a = g.alt_off[r + 1]; a-- > g.alt_off[r];) work.push_back(WorkItem{g.alt_start[a], cont});
      break;
    }
  }
  return true;
}

struct StepBuffers {
  std::vector<StackNode>* pool;
  std::vector<int32_t>* tops;  // appended to from `out_begin`; may also hold the input tops
  std::vector<WorkItem>* work;
};

// Consumes byte `b` from the tops (*buf.tops)[in_begin, in_end): the tops that follow are
// appended at the end of *buf.tops (out_begin = its size on entry). False when no stack could
// take the byte (or on overflow).
bool step(const Grammar::Impl& g, const StepBuffers& buf, size_t in_begin, size_t in_end, uint8_t b,
          bool* accept);

// The start state of the grammar into an empty pool/tops.
void start_state(const Grammar::Impl& g, const StepBuffers& buf, bool* accept);

}  // namespace ll3::grammar
