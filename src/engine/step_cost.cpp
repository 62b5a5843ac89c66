#include "engine/step_cost.h"

#include <algorithm>
#include <cmath>

namespace ll3 {

namespace {

// Features are fitted as multiples of a typical step's (16 decode rows, 256 prompt tokens, a
// 256-token chunk after 2,048 positions), so that the normal equations are well conditioned and
// the prior's weight means "one typical step" for every term alike.
constexpr std::array<double, StepCostModel::kTerms> kScale = {1.0, 16.0, 256.0, 256.0 * 2048.0};
// The prior counts as this many observations, each pinning every coefficient to within its own
// size (100%): a fraction of one, so that a handful of steps outweigh it where they say something.
constexpr double kPriorWeight = 0.1;
// A coefficient the prior puts at 0 is pinned to within this much (seconds at a typical step).
constexpr double kPriorFloor = 1e-3;
// Steps are fitted by relative error (each weighted by 1 / seconds^2): a 50 ms decode step
// matters as much as a 1 s prefill step, since the target is a multiple of the former.
constexpr double kMinSeconds = 1e-5;
// After this many steps of a kind, a step the fit misses by more than kOutlier times its
// prediction (a page fault storm, another process) counts for less, in proportion.
constexpr int64_t kTrustAfter = 16;
constexpr double kOutlier = 2.0;

std::array<double, StepCostModel::kTerms> scaled(const StepShape& s) {
  return {1.0, static_cast<double>(s.decode_rows) / kScale[1], static_cast<double>(s.prompt_tokens) / kScale[2],
          static_cast<double>(s.attention) / kScale[3]};
}

}  // namespace

StepCostModel::StepCostModel(const Coefficients& prior, double forgetting)
    : prior_(prior), coef_(prior), forgetting_(forgetting) {
  for (double& p : prior_) p = std::max(p, 0.0);
  coef_ = prior_;
}

StepCostModel::Coefficients StepCostModel::prior_for(const LlamaConfig& c, double weight_bytes) {
  // 100 GFLOP/s and 20 GB/s: below what two current cores give, far below any GPU.
  constexpr double kFlops = 100e9, kBandwidth = 20e9;
  const double d = static_cast<double>(c.dim), hd = static_cast<double>(c.head_dim);
  const double per_layer = d * hd * static_cast<double>(2 * c.n_heads + 2 * c.n_kv_heads) + 3.0 * d * static_cast<double>(c.ffn_dim);
  const double params = static_cast<double>(c.n_layers) * per_layer + d * static_cast<double>(c.n_vocab);
  const double row = 2.0 * params / kFlops;
  // Q.K and P.V: 2 flops each per head dimension, per head, per layer.
  const double pair = 4.0 * static_cast<double>(c.n_layers * c.n_heads) * hd / kFlops;
  return {weight_bytes / kBandwidth, row, row, pair};
}

double StepCostModel::predict_corrected(const StepShape& s) const {
  const Bias& b = s.prompt_tokens > 0 ? prompt_bias_ : decode_bias_;
  return predict(s) * std::clamp(b.ratio, 0.5, 2.0);
}

double StepCostModel::predict(const StepShape& s) const {
  return coef_[0] + coef_[1] * static_cast<double>(s.decode_rows) + coef_[2] * static_cast<double>(s.prompt_tokens) +
         coef_[3] * static_cast<double>(s.attention);
}

void StepCostModel::observe(const StepShape& s, double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return;
  Accumulator& acc = s.prompt_tokens > 0 ? prompt_ : decode_;
  const double y = std::max(seconds, kMinSeconds);
  double w = 1.0 / (y * y);
  const double pred = predict(s);
  if (pred > 0) {
    // How far the shared fit is off on each kind of step lately: the default target multiplies
    // a decode-only prediction, and a prompt chunk is cut by a mixed one.
    Bias& b = s.prompt_tokens > 0 ? prompt_bias_ : decode_bias_;
    b.ratio = b.n == 0 ? seconds / pred : 0.9 * b.ratio + 0.1 * (seconds / pred);
    ++b.n;
  }
  if (acc.n >= kTrustAfter && pred > 0) {
    const double miss = std::abs(seconds - pred);
    if (miss > kOutlier * pred) w *= kOutlier * pred / miss;
  }
  const std::array<double, kTerms> x = scaled(s);
  for (int i = 0; i < kTerms; ++i) {
    for (int j = 0; j < kTerms; ++j) acc.xx[i][j] = forgetting_ * acc.xx[i][j] + w * x[i] * x[j];
    acc.xy[i] = forgetting_ * acc.xy[i] + w * x[i] * seconds;
  }
  ++acc.n;
  ++n_obs_;
  multi_row_ += s.prompt_tokens == 0 && s.decode_rows > 1;
  fit();
}

// Non-negative least squares by enumeration: the constrained minimum is the unconstrained
// minimum over its own support, so every support (16 of them) is solved and the best one whose
// coefficients are all non-negative wins. The prior's ridge keeps every subsystem positive
// definite, so plain elimination without pivoting is exact enough.
void StepCostModel::fit() {
  Matrix a{};
  std::array<double, kTerms> r{}, p{};
  for (int i = 0; i < kTerms; ++i) {
    p[i] = prior_[i] * kScale[i];
    for (int j = 0; j < kTerms; ++j) a[i][j] = decode_.xx[i][j] + prompt_.xx[i][j];
    const double pin = std::max(p[i], kPriorFloor);
    const double d = kPriorWeight / (pin * pin);
    a[i][i] += d;
    r[i] = decode_.xy[i] + prompt_.xy[i] + d * p[i];
  }
  double best = INFINITY;
  std::array<double, kTerms> best_beta{};
  for (unsigned mask = 0; mask < (1u << kTerms); ++mask) {
    int idx[kTerms], n = 0;
    for (int i = 0; i < kTerms; ++i) {
      if (mask & (1u << i)) idx[n++] = i;
    }
    double m[kTerms][kTerms + 1];
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) m[i][j] = a[idx[i]][idx[j]];
      m[i][n] = r[idx[i]];
    }
    for (int k = 0; k < n; ++k) {
      for (int i = k + 1; i < n; ++i) {
        const double f = m[i][k] / m[k][k];
        for (int j = k; j <= n; ++j) m[i][j] -= f * m[k][j];
      }
    }
    double sol[kTerms] = {};
    bool feasible = true;
    for (int i = n - 1; i >= 0; --i) {
      double v = m[i][n];
      for (int j = i + 1; j < n; ++j) v -= m[i][j] * sol[j];
      sol[i] = v / m[i][i];
      feasible = feasible && sol[i] >= 0;
    }
    if (!feasible) continue;
    // At a subsystem's solution, beta^T A beta - 2 r^T beta = -r_S^T beta_S.
    double j = 0;
    std::array<double, kTerms> beta{};
    for (int i = 0; i < n; ++i) {
      beta[idx[i]] = sol[i];
      j -= r[idx[i]] * sol[i];
    }
    if (j < best) {
      best = j;
      best_beta = beta;
    }
  }
  for (int i = 0; i < kTerms; ++i) coef_[i] = best_beta[i] / kScale[i];
}

}  // namespace ll3
