#include "grammar/stacks.h"

namespace ll3::grammar {

namespace {

// Nodes of a Matcher's own pool. Stacks that converge within one step share their new nodes
// (found among those made since the step began), so equal stacks have equal tops, which are
// kept once.
struct StepNodes {
  const Grammar::Impl& g;
  std::vector<StackNode>& nodes;
  std::vector<int32_t>& tops;
  size_t out_begin;
  size_t node_mark;

  const std::vector<StackNode>& pool() const { return nodes; }
  int32_t cont(uint32_t pos, int32_t parent) {
    for (size_t k = nodes.size(); k-- > node_mark;) {
      if (nodes[k].pos == pos && nodes[k].parent == parent) return int32_t(k);
    }
    nodes.push_back(make_node(g, nodes, pos, parent));
    return int32_t(nodes.size() - 1);
  }
  bool add_top(uint32_t pos, int32_t parent, int32_t existing) {
    for (size_t k = out_begin; k < tops.size(); ++k) {
      const StackNode& n = nodes[size_t(tops[k])];
      if (n.pos == pos && n.parent == parent) return true;
    }
    if (tops.size() - out_begin >= kMaxTops) return false;
    if (existing < 0) {
      nodes.push_back(make_node(g, nodes, pos, parent));
      existing = int32_t(nodes.size() - 1);
    }
    tops.push_back(existing);
    return true;
  }
};

}  // namespace

bool step(const Grammar::Impl& g, const StepBuffers& buf, size_t in_begin, size_t in_end, uint8_t b,
          bool* accept) {
  StepNodes nodes{g, *buf.pool, *buf.tops, buf.tops->size(), buf.pool->size()};
  *accept = false;
  for (size_t k = in_begin; k < in_end; ++k) {
    const StackNode n = (*buf.pool)[size_t((*buf.tops)[k])];
    if (!g.sets[elem_index(g.elems[n.pos])].test(b)) continue;
    if (!expand(g, nodes, *buf.work, n.pos + 1, n.parent, accept)) {
      buf.tops->resize(nodes.out_begin);
      *accept = false;
      return false;
    }
  }
  return buf.tops->size() > nodes.out_begin || *accept;
}

void start_state(const Grammar::Impl& g, const StepBuffers& buf, bool* accept) {
  buf.pool->clear();
  buf.tops->clear();
  *accept = false;
  StepNodes nodes{g, *buf.pool, *buf.tops, 0, 0};
  for (uint32_t a = g.alt_off[g.root]; a < g.alt_off[g.root + 1]; ++a) {
    if (!expand(g, nodes, *buf.work, g.alt_start[a], -1, accept)) break;
  }
}

}  // namespace ll3::grammar
