#include "engine/sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace ll3 {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Descending by logit; ties broken by id so the order (and so a seeded run) never depends on
// how the standard library's partial sort happens to visit equal elements.
struct ByLogitDesc {
  template <class C>
  bool operator()(const C& a, const C& b) const {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
};

}  // namespace

int32_t argmax(const float* logits, int32_t n) {
  int32_t best = 0;
  float best_v = kNegInf;
  bool found = false;
  for (int32_t i = 0; i < n; ++i) {
    float v = logits[i];
    if (!(v == v)) continue;  // NaN
    if (!found || v > best_v) {
      best = i;
      best_v = v;
      found = true;
    }
  }
  return best;
}

Sampler::Sampler(const SamplingParams& p, int32_t n_vocab) : params_(p), n_vocab_(n_vocab) {
  LL3_CHECK(n_vocab > 0);
  cand_.resize(static_cast<size_t>(n_vocab));
  counts_.assign(static_cast<size_t>(n_vocab), 0);
  weights_.resize(static_cast<size_t>(n_vocab));
  reset(p.seed);
}

void Sampler::reset(uint64_t seed) {
  if (seed == kRandomSeed) {
    std::random_device rd;
    seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  rng_.seed(seed);
}

double Sampler::uniform01() {
  // 53 random bits -> [0, 1); written out so the stream is the same with any standard library.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

void Sampler::apply_penalties(const std::vector<int32_t>& history) {
  const SamplingParams& p = params_;
  if (p.repeat_last_n == 0 || history.empty()) return;
  if (p.repeat_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) {
    return;
  }
  size_t window = p.repeat_last_n < 0 ? history.size()
                                      : std::min(history.size(), size_t(p.repeat_last_n));
  const int32_t* first = history.data() + (history.size() - window);
  const int32_t* last = history.data() + history.size();
  for (const int32_t* t = first; t != last; ++t) {
    if (*t >= 0 && *t < n_vocab_) ++counts_[size_t(*t)];
  }
  // Second pass: penalize each distinct token once, and zero its count for the next call.
  for (const int32_t* t = first; t != last; ++t) {
    if (*t < 0 || *t >= n_vocab_) continue;
    int32_t c = counts_[size_t(*t)];
    if (c == 0) continue;
    counts_[size_t(*t)] = 0;
    float& l = cand_[size_t(*t)].logit;
    l = l <= 0.0f ? l * p.repeat_penalty : l / p.repeat_penalty;
    l -= float(c) * p.frequency_penalty + p.presence_penalty;
    // Odd parameters (a zero or infinite penalty) must not leak NaN / inf into the draw.
    if (!(l == l)) l = kNegInf;
    else if (l > FLT_MAX) l = FLT_MAX;
  }
}

size_t Sampler::truncate(size_t n) {
  const SamplingParams& p = params_;
  Candidate* c = cand_.data();
  size_t sorted = 0;  // c[0, sorted) is in final descending order

  if (p.top_k > 0 && size_t(p.top_k) < n) {
    // A k-heap pass: ~n comparisons when k is small, never a full sort.
    std::partial_sort(c, c + p.top_k, c + n, ByLogitDesc{});
    n = size_t(p.top_k);
    sorted = n;
  }

  const bool use_top_p = p.top_p < 1.0f;
  const bool use_min_p = p.min_p > 0.0f;
  if (!use_top_p && !use_min_p) return n;

  float max_logit = kNegInf;
  if (sorted > 0) {
    max_logit = c[0].logit;
  } else {
    for (size_t i = 0; i < n; ++i) max_logit = std::max(max_logit, c[i].logit);
  }
  if (max_logit == kNegInf) return n;  // everything masked; draw() handles it

  // min-p keeps a prefix of the sorted order (all logits >= max + log(min_p)), and top-p keeps
  // a prefix too, so the result is the shorter prefix. Finding the min-p set first lets top-p
  // sort only among its members, while top-p's normalization still spans all n candidates.
  size_t m = n;
  if (use_min_p) {
    const float threshold = max_logit + std::log(p.min_p);
    if (sorted >= n) {
      m = size_t(std::partition_point(c, c + n, [&](const Candidate& x) {
                   return x.logit >= threshold;
                 }) - c);
    } else {
      m = size_t(std::partition(c, c + n, [&](const Candidate& x) {
                   return x.logit >= threshold;
                 }) - c);
    }
    if (m == 0) {  // min_p > 1: keep the single best token (llama.cpp's min_keep = 1)
      std::nth_element(c, c, c + n, ByLogitDesc{});
      m = 1;
      sorted = std::max<size_t>(sorted, 1);
    }
  }

  if (use_top_p) {
    double z = 0.0;
    for (size_t i = 0; i < n; ++i) z += std::exp(c[i].logit - max_logit);
    const double target = double(p.top_p) * z;
    double cum = 0.0;
    for (size_t i = 0; i < m; ++i) {
      if (i == sorted) {
        // Extend the sorted prefix in doubling chunks: a peaked distribution needs only a few
        // hundred tokens sorted, a flat one pays n log n once.
        size_t end = std::min(m, sorted + std::max<size_t>(256, sorted));
        if (end < m) std::nth_element(c + sorted, c + end, c + m, ByLogitDesc{});
        std::sort(c + sorted, c + end, ByLogitDesc{});
        sorted = end;
      }
      cum += std::exp(c[i].logit - max_logit);
      if (cum >= target) {
        m = i + 1;
        break;
      }
    }
  }
  return m;
}

int32_t Sampler::draw(size_t n) {
  Candidate* c = cand_.data();
  float max_logit = kNegInf;
  size_t best = 0;
  for (size_t i = 0; i < n; ++i) {
    if (c[i].logit > max_logit) {
      max_logit = c[i].logit;
      best = i;
    }
  }
  if (max_logit == kNegInf) {
    // Every candidate masked: no distribution to draw from; answer deterministically.
    int32_t lowest = c[0].id;
    for (size_t i = 1; i < n; ++i) lowest = std::min(lowest, c[i].id);
    return lowest;
  }
  if (n == 1) return c[best].id;

  // Temperature is folded into the exponent rather than dividing the logits, so a huge logit
  // over a small temperature cannot overflow to inf.
  const float inv_t = 1.0f / params_.temperature;
  float* w = weights_.data();
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    float x = c[i].logit == kNegInf ? kNegInf : (c[i].logit - max_logit) * inv_t;
    w[i] = std::exp(x);
    sum += w[i];
  }
  const double u = uniform01() * sum;
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cum += w[i];
    if (u < cum) return c[i].id;
  }
  return c[best].id;  // rounding left u at the very top of the range
}

int32_t Sampler::sample(const float* logits, const std::vector<int32_t>& history) {
  const size_t n = size_t(n_vocab_);
  Candidate* c = cand_.data();
  for (size_t i = 0; i < n; ++i) {
    float v = logits[i];
    // NaN -> -inf; +inf -> FLT_MAX so that (logit - max) stays finite.
    if (!(v == v)) v = kNegInf;
    else if (v > FLT_MAX) v = FLT_MAX;
    c[i] = {v, int32_t(i)};
  }
  apply_penalties(history);

  if (params_.temperature <= 0.0f) {
    size_t best = 0;
    for (size_t i = 1; i < n; ++i) {
      if (c[i].logit > c[best].logit) best = i;
    }
    return c[best].id;
  }
  return draw(truncate(n));
}

}  // namespace ll3
