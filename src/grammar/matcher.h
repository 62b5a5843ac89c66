// Where one request is in its grammar, and which tokens a vocabulary allows from there. This is
// the engine's interface to constrained sampling (ll3/grammar.h compiles the grammars):
//
//   Matcher m(grammar);                 // per request, cheap to copy
//   if (!filter.allows(m, token)) { filter.allowed(m, budget, mask); ...resample... }
//   m.accept(token bytes);
//
// accept / allows / allowed allocate nothing once their (per-thread) scratch buffers have
// grown to the largest state seen; Matcher copies allocate (two small vectors).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/grammar_impl.h"
#include "grammar/stacks.h"

namespace ll3::grammar {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Grammar> g);

  // Advance over these bytes; false (and unchanged) if the grammar cannot continue with them.
  bool accept(std::string_view bytes);
  // What was accepted so far is a complete match.
  bool can_end() const { return accept_; }
  // Complete, and no byte can follow.
  bool must_end() const { return accept_ && tops_.empty(); }
  // Fewest bytes that complete the match from here (0 when can_end; kInfLen when none can).
  int64_t min_bytes_to_end() const;

  // The state, for TokenFilter: stack nodes and the tops (ids into nodes()).
  const Grammar::Impl& impl() const { return *impl_; }
  const std::vector<StackNode>& nodes() const { return pool_; }
  const std::vector<int32_t>& tops() const { return tops_; }

 private:
  void compact();

  std::shared_ptr<const Grammar> grammar_;
  const Grammar::Impl* impl_;
  std::vector<StackNode> pool_;
  std::vector<int32_t> tops_;
  bool accept_ = false;
  size_t compact_at_ = 1024;  // pool size that triggers dropping unreachable nodes
};

}  // namespace ll3::grammar
