// Speculative decoding's guessing side: where guesses come from and how many to make.
//
// A step verifies a sequence's guesses together with its last known token, one logits row each
// (engine/scheduler.h draft(), engine/sampler.h verify()). ll3's logits of a token are the same
// bits whether the token runs alone or among others, so verified greedy output is the output
// without speculation, token for token; sampled output keeps the target distribution.
//
// Guesses are deterministic (a point-mass draft distribution): the n-gram lookup's continuation
// or a draft model's argmax. That keeps the rejection rule exact without storing a draft
// distribution per guess, at some acceptance a sampled draft could have had.
#pragma once

#include <cstdint>
#include <span>

namespace ll3 {

// Prompt lookup: finds the latest earlier occurrence of the longest suffix n-gram of `tokens`
// (n from max_n down to min_n) and copies what followed it into `out` (at most out.size()
// tokens). Returns how many it copied (0: no match). Linear in tokens.size() per n; no
// allocation.
int64_t ngram_guess(std::span<const int32_t> tokens, int min_n, int max_n, std::span<int32_t> out);

// How often a sequence's guesses are right, as a decaying count (recent steps weigh more).
struct AcceptanceRate {
  double accepted = 0, tried = 0;
  // m of k guesses accepted: the first m were tried and right, guess m + 1 (if any) tried and wrong.
  void add(int64_t m, int64_t k);
  // A step without guesses: the history fades towards the prior, so that a sequence which
  // stopped guessing tries again later (its text may have turned repetitive).
  void idle();
  // Estimated chance that a guess is right, given the ones before it were. prior: the estimate
  // with no history yet.
  double rate(double prior) const;
};

// The number of guesses (0 .. max_k) that maximizes a step's expected tokens per second.
// accept: AcceptanceRate::rate; rows: the step's rows without this sequence's guesses (its own
// last token included); step_s: that step's predicted seconds; row_s: what one more row adds.
// With many rows a step turns compute-bound and guesses stop paying: speculation yields to
// batching by this rule alone.
int draft_length(double accept, int max_k, int64_t rows, double step_s, double row_s);

}  // namespace ll3
