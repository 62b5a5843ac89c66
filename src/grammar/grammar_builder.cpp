#include "grammar/grammar_builder.h"

#include <algorithm>
#include <cstring>

namespace ll3::grammar {

uint32_t GrammarBuilder::rule(const std::string& name, size_t offset) {
  auto it = names_.find(name);
  if (it != names_.end()) return it->second;
  uint32_t r = uint32_t(rules_.size());
  rules_.push_back(Rule{name, {}, offset, false});
  names_.emplace(name, r);
  return r;
}

uint32_t GrammarBuilder::helper_rule(const std::string& base) {
  std::string name;
  do {
    name = base + "~" + std::to_string(++n_helpers_);  // "~": never a GBNF name, so no clash
  } while (names_.count(name));
  uint32_t r = rule(name, 0);
  rules_[r].defined = true;
  return r;
}

void GrammarBuilder::mark_defined(uint32_t r, size_t offset) {
  rules_[r].defined = true;
  rules_[r].offset = offset;
}

Status GrammarBuilder::check_size() const {
  if (n_elems_ > kMaxElems || rules_.size() > kMaxRules) {
    return Status::errorf("grammar too large (over %zu elements or %zu rules)", kMaxElems, kMaxRules);
  }
  return Status();
}

Status GrammarBuilder::add_alt(uint32_t r, Seq seq) {
  n_elems_ += seq.size() + 1;
  rules_[r].alts.push_back(std::move(seq));
  return check_size();
}

uint32_t GrammarBuilder::set_elem(const ByteSet& s) {
  std::string key(reinterpret_cast<const char*>(s.w.data()), sizeof(s.w));
  auto it = set_index_.find(key);
  if (it != set_index_.end()) return make_set(it->second);
  uint32_t i = uint32_t(sets_.size());
  sets_.push_back(s);
  set_index_.emplace(std::move(key), i);
  return make_set(i);
}

Seq GrammarBuilder::literal(std::string_view bytes) {
  Seq seq;
  for (char c : bytes) {
    ByteSet s;
    s.set(uint8_t(c));
    seq.push_back(set_elem(s));
  }
  return seq;
}

Result<Seq> GrammarBuilder::codepoint_class(const CodepointRanges& ranges, const std::string& base) {
  std::vector<ByteRangeSeq> shapes = utf8_sequences(ranges);
  // All one-byte shapes merge into one set; so does a class that is ASCII only.
  ByteSet ascii;
  std::vector<const ByteRangeSeq*> multi;
  for (const auto& sh : shapes) {
    if (sh.size() == 1) {
      ascii.set_range(sh[0].first, sh[0].second);
    } else {
      multi.push_back(&sh);
    }
  }
  if (multi.empty()) {
    if (ascii.empty()) return Status::error("empty character class (matches nothing)");
    return Seq{set_elem(ascii)};
  }
  std::string key;
  for (auto [lo, hi] : ranges) key += std::to_string(lo) + "-" + std::to_string(hi) + ",";
  auto it = class_rules_.find(key);
  if (it != class_rules_.end()) return Seq{make_rule(it->second)};
  uint32_t r = helper_rule(base);
  if (!ascii.empty()) LL3_RETURN_IF_ERROR(add_alt(r, Seq{set_elem(ascii)}));
  for (const ByteRangeSeq* sh : multi) {
    Seq seq;
    for (auto [lo, hi] : *sh) {
      ByteSet s;
      s.set_range(lo, hi);
      seq.push_back(set_elem(s));
    }
    LL3_RETURN_IF_ERROR(add_alt(r, std::move(seq)));
  }
  class_rules_.emplace(std::move(key), r);
  return Seq{make_rule(r)};
}

Result<Seq> GrammarBuilder::repeat(uint32_t x, int64_t min, int64_t max, const std::string& base) {
  if (max >= 0 && max < min) return Status::errorf("repetition {%lld,%lld}: max below min", (long long)min, (long long)max);
  int64_t copies = std::max(min, max) + 1;
  if (min < 0 || copies > int64_t(kMaxElems) || n_elems_ + size_t(copies) * 3 > kMaxElems) {
    return Status::errorf("repetition count %lld too large", (long long)std::max(min, max));
  }
  Seq out(size_t(min), x);
  if (max < 0) {  // r ::= x r | ε
    uint32_t r = helper_rule(base);
    LL3_RETURN_IF_ERROR(add_alt(r, Seq{x, make_rule(r)}));
    LL3_RETURN_IF_ERROR(add_alt(r, Seq{}));
    out.push_back(make_rule(r));
  } else if (max > min) {  // o1 ::= x | ε; ok ::= x o(k-1) | ε: up to max-min more
    uint32_t prev = 0;
    for (int64_t k = 1; k <= max - min; ++k) {
      uint32_t r = helper_rule(base);
      LL3_RETURN_IF_ERROR(add_alt(r, k == 1 ? Seq{x} : Seq{x, make_rule(prev)}));
      LL3_RETURN_IF_ERROR(add_alt(r, Seq{}));
      prev = r;
    }
    out.push_back(make_rule(prev));
  }
  n_elems_ += out.size();
  LL3_RETURN_IF_ERROR(check_size());
  return out;
}

Result<std::unique_ptr<Grammar::Impl>> GrammarBuilder::finish_checked(
    uint32_t root, const std::function<std::string(uint32_t)>& where) {
  auto g = std::make_unique<Grammar::Impl>();
  g->sets = sets_;
  g->root = root;
  g->alt_off.push_back(0);
  for (const Rule& r : rules_) {
    for (const Seq& alt : r.alts) {
      g->alt_start.push_back(uint32_t(g->elems.size()));
      g->elems.insert(g->elems.end(), alt.begin(), alt.end());
      g->elems.push_back(kEnd);
    }
    g->alt_off.push_back(uint32_t(g->alt_start.size()));
    g->rule_names.push_back(r.name);
  }
  LL3_RETURN_IF_ERROR(analyze_grammar(*g, where));
  return g;
}

}  // namespace ll3::grammar
