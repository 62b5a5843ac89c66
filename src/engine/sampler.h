// Token sampling from a row of logits, in the order llama.cpp's default chain applies its
// samplers: penalties, top-k, top-p, min-p, temperature, then a seeded draw.
//
// All scratch is allocated by the constructor; sample() allocates nothing, so it can sit on the
// per-token path. Cost for a 128k vocabulary: one pass copying the logits, then top-k as a
// k-heap scan over them; without top-k, top-p finds its cut by selection (expected linear, no
// full sort) among the tokens min-p keeps.
#pragma once

#include <cstdint>

#include <random>
#include <span>
#include <vector>

#include "core/status.h"
#include "ll3/request.h"

namespace ll3 {

// Every field finite and in its range, or an error naming the field (`names`: how the caller's
// interface spells them, e.g. "--temp" or "temperature"). The one check the CLI and the server
// share: a NaN temperature or a negative top-p would otherwise sample silently wrong.
struct SamplingFieldNames {
  const char* temperature = "temperature";
  const char* top_p = "top_p";
  const char* min_p = "min_p";
  const char* repeat_penalty = "repeat_penalty";
  const char* repeat_last_n = "repeat_last_n";
  const char* presence_penalty = "presence_penalty";
  const char* frequency_penalty = "frequency_penalty";
};
Status validate(const SamplingParams& p, const SamplingFieldNames& names = {});

// One sequence's sampling parameters and random stream. Many sequences can share one Sampler's
// scratch (one per thread) by passing their own state.
struct SamplerState {
  explicit SamplerState(const SamplingParams& p);
  void reset(uint64_t seed);  // kRandomSeed => a fresh random seed
  SamplingParams params;
  std::mt19937_64 rng;
};

class Sampler {
 public:
  // Scratch for an n_vocab vocabulary (allocated here, once).
  explicit Sampler(int32_t n_vocab);
  // Scratch plus a state of its own, for sample(logits, history).
  Sampler(const SamplingParams& p, int32_t n_vocab);

  // Picks the next token from `logits` (n_vocab floats). `history` holds the tokens so far (the
  // caller decides whether the prompt counts); only its last repeat_last_n entries are read, and
  // ids outside [0, n_vocab) are ignored. NaN logits count as -inf. If every logit is -inf the
  // result is the first token.
  int32_t sample(SamplerState& state, const float* logits, const std::vector<int32_t>& history) {
    return verify(state, logits, history, -1, nullptr);
  }
  int32_t sample(const float* logits, const std::vector<int32_t>& history) { return sample(own_, logits, history); }

  // Speculative verification of a guessed token `draft` (-1: none, a plain sample). The guess
  // was made deterministically (n-gram lookup, a draft model's argmax), so the rejection rule of
  // Leviathan et al. with a point-mass draft distribution keeps the target distribution exactly:
  // the guess is kept with probability p(draft); otherwise the answer is drawn from p without
  // the guess, renormalized. Greedy (temperature 0) keeps it iff it is the argmax. *accepted
  // (may be null) says whether the answer is the guess.
  int32_t verify(SamplerState& state, const float* logits, std::span<const int32_t> history, int32_t draft, bool* accepted);

  // sample() among the tokens `allowed` marks (n_vocab flags, nonzero: allowed; what a grammar
  // can continue with): the others count as -inf before penalties and truncation, so greedy is
  // the best allowed token and a draw follows the model's distribution over the allowed ones.
  int32_t sample_allowed(SamplerState& state, const float* logits, std::span<const int32_t> history, const uint8_t* allowed);

  // Restart the own state's random stream (kRandomSeed => a fresh random seed).
  void reset(uint64_t seed) { own_.reset(seed); }

  const SamplingParams& params() const { return own_.params; }
  int32_t n_vocab() const { return n_vocab_; }

 private:
  struct Candidate {
    float logit;
    int32_t id;
  };

  void apply_penalties(std::span<const int32_t> history);
  // work_ = the logits, sanitized (NaN -> -inf, +inf -> FLT_MAX), -inf where `allowed` (if not
  // null) is 0, then penalized; then greedy or a draw.
  int32_t pick(SamplerState& state, const float* logits, std::span<const int32_t> history, const uint8_t* allowed, int32_t draft,
               bool* accepted);
  // Fills cand_[0, k) with the k best tokens of work_, best first; returns k.
  size_t select_top_k(size_t k);
  // Builds the candidates from work_ and truncates them by top-k, top-p and min-p; returns
  // how many remain in cand_.
  size_t truncate();
  // Draws among the n candidates; a draft among them is kept with its probability, else the
  // draw is among the others (see verify).
  int32_t draw(size_t n, int32_t draft, bool* accepted);
  double uniform01();

  SamplerState own_;
  SamplerState* st_ = nullptr;   // the state of the sample() call in progress
  int32_t n_vocab_;
  std::vector<float> work_;      // (n_vocab) sanitized, penalized logits, indexed by id
  std::vector<Candidate> cand_;  // (n_vocab) candidates; only the top k of them with top-k on
  std::vector<int32_t> counts_;  // (n_vocab) occurrences in the penalty window; all zero between calls
  std::vector<float> weights_;   // (n_vocab) unnormalized probabilities for the draw
};

// Index of the largest of n logits (the first one on ties). NaN logits are skipped; if every
// logit is -inf or NaN the answer is 0.
int32_t argmax(const float* logits, int32_t n);

}  // namespace ll3
