// What a step costs on this machine and model, learned from the steps themselves, so that the
// scheduler can size prompt chunks to an inter-token latency target.
//
//   seconds = base + a * decode_rows + b * prompt_tokens + c * attention
//
// base is what every step pays (reading the weights once, the logits head, the pool's
// dispatch); a and b are the cost of one row through the matrices, for a sequence past its
// prompt and for a prompt token (they differ: decode rows may take the decode kernels); c is the
// cost of one query attending to one cached position. The fit is a least-squares fit of every
// forward pass timed, by relative error, with exponential forgetting, non-negative coefficients
// and a prior (a ridge toward the prior's coefficients, worth a tenth of a step) that holds
// where the data say nothing (before the first step; base against a while the row count never
// changes).
//
// Steps with prompt tokens and steps without are kept in two accumulators, each forgotten only
// when a step of its own kind arrives: an hour of pure decoding would otherwise erase what a
// prompt token costs, and the next long prompt would be sized by the prior again.
//
// Fixed size: neither predict() nor observe() allocates.
#pragma once

#include <array>
#include <cstdint>

#include "io/llama_config.h"

namespace ll3 {

// The features of one step, as the scheduler plans it.
struct StepShape {
  int64_t decode_rows = 0;    // tokens of sequences past their prompt (a decode step: one each)
  int64_t prompt_tokens = 0;  // tokens at prompt positions (prefill chunks, recomputes)
  // Query-position pairs attention computes: for each sequence of the step, sum over its new
  // tokens of the positions each attends to (n_past + i + 1), i.e. n * n_past + n (n + 1) / 2.
  int64_t attention = 0;

  // Adds a sequence's n new tokens after n_past computed positions; `decoding`: past its prompt.
  void add(int64_t n_past, int64_t n, bool decoding) {
    (decoding ? decode_rows : prompt_tokens) += n;
    attention += n * n_past + n * (n + 1) / 2;
  }
};

class StepCostModel {
 public:
  static constexpr int kTerms = 4;  // base, decode rows, prompt tokens, attention
  using Coefficients = std::array<double, kTerms>;

  // prior: the coefficients before any step is observed (seconds, seconds per row, per token,
  // per query-position pair). forgetting: the weight each older step of the same kind keeps
  // per new one (0.98: about the last 50 steps of each kind count).
  explicit StepCostModel(const Coefficients& prior, double forgetting = 0.98);

  // A prior for model c whose weights take weight_bytes: deliberately pessimistic (a slow
  // machine), so that the first prompt chunks among running streams are small until real steps
  // are timed.
  static Coefficients prior_for(const LlamaConfig& c, double weight_bytes);

  double predict(const StepShape& s) const;
  // predict(), corrected by how far the fit has recently been off on steps of the same kind (with
  // and without prompt tokens): one fit serves both kinds and missed each by 10-25% in
  // measurements, which a latency bound cannot afford.
  double predict_corrected(const StepShape& s) const;
  // A forward pass of shape s took `seconds`: refits the coefficients.
  void observe(const StepShape& s, double seconds);

  const Coefficients& coefficients() const { return coef_; }
  int64_t observations() const { return n_obs_; }
  // Steps of several decode rows and no prompt tokens seen: what the decode-row term is learned
  // from (a single stream's steps all have one row, and leave it to the prior).
  int64_t multi_row_decode_steps() const { return multi_row_; }

 private:
  using Matrix = std::array<std::array<double, kTerms>, kTerms>;
  struct Accumulator {
    Matrix xx{};                 // sum of w x x^T (features scaled)
    std::array<double, kTerms> xy{};  // sum of w x y
    int64_t n = 0;
  };
  void fit();

  Coefficients prior_;
  Coefficients coef_;
  double forgetting_;
  Accumulator decode_, prompt_;  // steps without and with prompt tokens
  int64_t n_obs_ = 0;
  int64_t multi_row_ = 0;
  struct Bias {
    double ratio = 1;  // measured / predicted seconds (a running average)
    int64_t n = 0;
  };
  Bias decode_bias_, prompt_bias_;
};

}  // namespace ll3
