// Builds a Grammar::Impl rule by rule: the GBNF parser drives it. Repetition becomes helper
// rules (x* is `r ::= x r | ε`: right recursion, which the matcher runs in constant stack depth),
// codepoint classes become UTF-8 byte-sequence rules, and finish() checks the whole grammar
// (undefined rules, left recursion, a root that can never finish) and computes shortest lengths.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "grammar/grammar_impl.h"
#include "grammar/utf8_ranges.h"

namespace ll3::grammar {

using Seq = std::vector<uint32_t>;  // encoded elements (make_set / make_rule)

class GrammarBuilder {
 public:
  // The rule called `name`, created (undefined) on first use. `offset`: where in the source it
  // was first mentioned, for errors.
  uint32_t rule(const std::string& name, size_t offset);
  // A fresh helper rule named after `base` ("base~3"), already defined.
  uint32_t helper_rule(const std::string& base);
  bool is_defined(uint32_t r) const { return rules_[r].defined; }
  void mark_defined(uint32_t r, size_t offset);
  Status add_alt(uint32_t r, Seq seq);

  uint32_t set_elem(const ByteSet& s);
  Seq literal(std::string_view bytes);
  // One codepoint out of `ranges` (sorted, disjoint), as valid UTF-8: one byte-set element
  // for ASCII-only classes, else a reference to a helper rule.
  Result<Seq> codepoint_class(const CodepointRanges& ranges, const std::string& base);
  // `x` repeated min..max times (max < 0: unbounded). `x` is one element.
  Result<Seq> repeat(uint32_t x, int64_t min, int64_t max, const std::string& base);

  // The finished grammar with `root` as its start rule. Errors name the rule; `where(offset)`
  // turns a source offset into a location text ("line 3 column 7").
  template <class Where>
  Result<std::unique_ptr<Grammar::Impl>> finish(const std::string& root, Where where) {
    auto it = names_.find(root);
    if (it == names_.end()) return Status::error("grammar has no rule '" + root + "' (the start rule)");
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (!rules_[r].defined)
        return Status::error("undefined rule '" + rules_[r].name + "' at " + where(rules_[r].offset));
    }
    return finish_checked(it->second, [&](uint32_t r) { return where(rules_[r].offset); });
  }

  size_t n_elems() const { return n_elems_; }

 private:
  struct Rule {
    std::string name;
    std::vector<Seq> alts;
    size_t offset = 0;
    bool defined = false;
  };
  Status check_size() const;
  Result<std::unique_ptr<Grammar::Impl>> finish_checked(
      uint32_t root, const std::function<std::string(uint32_t)>& where);

  std::vector<Rule> rules_;
  std::unordered_map<std::string, uint32_t> names_;
  std::vector<ByteSet> sets_;
  std::unordered_map<std::string, uint32_t> set_index_;  // ByteSet bytes -> index
  std::unordered_map<std::string, uint32_t> class_rules_;  // codepoint class -> helper rule
  size_t n_elems_ = 0;
  uint32_t n_helpers_ = 0;
};

// Fewest bytes each rule can produce (kInfLen if it never finishes), then min_rest and the
// left-recursion check; shared by finish() (grammar_builder.cpp).
Status analyze_grammar(Grammar::Impl& g, const std::function<std::string(uint32_t)>& where);

}  // namespace ll3::grammar
