// Whole-grammar checks and the shortest-completion table the matcher's budget relies on.
#include <algorithm>
#include <queue>

#include "grammar/grammar_builder.h"

namespace ll3::grammar {

namespace {

// Fewest bytes each rule derives. Knuth's generalization of Dijkstra: an alternative's length
// is known once all the rules it references are; the smallest known candidate is final. Linear
// passes to a fixpoint would be quadratic on the long helper chains of {m,n}.
std::vector<int32_t> rule_min_lengths(const Grammar::Impl& g) {
  uint32_t n_rules = g.n_rules();
  size_t n_alts = g.alt_start.size();
  std::vector<uint32_t> alt_rule(n_alts);
  for (uint32_t r = 0; r < n_rules; ++r)
    for (uint32_t a = g.alt_off[r]; a < g.alt_off[r + 1]; ++a) alt_rule[a] = r;
  std::vector<int32_t> pending(n_alts, 0), partial(n_alts, 0);
  std::vector<std::vector<uint32_t>> uses(n_rules);  // rule -> alternatives (once per occurrence)
  using Item = std::pair<int32_t, uint32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
  for (size_t a = 0; a < n_alts; ++a) {
    for (uint32_t p = g.alt_start[a]; !is_end(g.elems[p]); ++p) {
      uint32_t e = g.elems[p];
      if (is_set(e)) {
        partial[a] = sat_add(partial[a], 1);
      } else {
        ++pending[a];
        uses[elem_index(e)].push_back(uint32_t(a));
      }
    }
    if (pending[a] == 0) queue.emplace(partial[a], alt_rule[a]);
  }
  std::vector<int32_t> len(n_rules, kInfLen);
  std::vector<bool> done(n_rules, false);
  while (!queue.empty()) {
    auto [l, r] = queue.top();
    queue.pop();
    if (done[r]) continue;
    done[r] = true;
    len[r] = l;
    for (uint32_t a : uses[r]) {
      partial[a] = sat_add(partial[a], l);
      if (--pending[a] == 0) queue.emplace(partial[a], alt_rule[a]);
    }
  }
  return len;
}

// Rule r "begins with" s when s can come first in one of r's alternatives (after rules that
// can be empty). A cycle is left recursion: the matcher would expand it forever.
Status check_left_recursion(const Grammar::Impl& g, const std::vector<int32_t>& len,
                            const std::function<std::string(uint32_t)>& where) {
  uint32_t n_rules = g.n_rules();
  std::vector<std::vector<uint32_t>> first(n_rules);
  for (uint32_t r = 0; r < n_rules; ++r) {
    for (uint32_t a = g.alt_off[r]; a < g.alt_off[r + 1]; ++a) {
      for (uint32_t p = g.alt_start[a]; is_rule(g.elems[p]); ++p) {
        uint32_t s = elem_index(g.elems[p]);
        first[r].push_back(s);
        if (len[s] != 0) break;
      }
    }
  }
  // Iterative DFS (grammars can be deep): 0 = unseen, 1 = on the path, 2 = done.
  std::vector<uint8_t> color(n_rules, 0);
  std::vector<std::pair<uint32_t, size_t>> path;
  for (uint32_t start = 0; start < n_rules; ++start) {
    if (color[start]) continue;
    path.emplace_back(start, 0);
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i == first[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      uint32_t s = first[r][i++];
      if (color[s] == 1) {
        std::string cycle;
        bool on = false;
        for (auto& [q, unused] : path) {
          if (q == s) on = true;
          if (on) cycle += g.rule_names[q] + " -> ";
        }
        cycle += g.rule_names[s];
        return Status::error("left recursion: rule '" + g.rule_names[s] + "' (" + where(s) +
                             ") can begin with itself (" + cycle + ")");
      }
      if (color[s] == 0) {
        color[s] = 1;
        path.emplace_back(s, 0);
      }
    }
  }
  return Status();
}

}  // namespace

Status analyze_grammar(Grammar::Impl& g, const std::function<std::string(uint32_t)>& where) {
  std::vector<int32_t> len = rule_min_lengths(g);
  LL3_RETURN_IF_ERROR(check_left_recursion(g, len, where));
  if (len[g.root] >= kInfLen) {
    return Status::error("rule '" + g.rule_names[g.root] + "' can never finish (every alternative recurses forever, or needs over 2^29 bytes)");
  }
  g.min_rest.assign(g.elems.size(), 0);
  for (size_t a = 0; a < g.alt_start.size(); ++a) {
    uint32_t p = g.alt_start[a];
    while (!is_end(g.elems[p])) ++p;
    int32_t rest = 0;
    for (;;) {
      g.min_rest[p] = rest;
      if (p == g.alt_start[a]) break;
      --p;
      uint32_t e = g.elems[p];
      rest = sat_add(rest, is_set(e) ? 1 : len[elem_index(e)]);
    }
  }
  return Status();
}

}  // namespace ll3::grammar
