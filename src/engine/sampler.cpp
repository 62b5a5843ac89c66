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

// The helpers below take the candidate type as a template parameter (Sampler::Candidate is
// private) and sit here, in this file, so the compiler inlines them into truncate(): each is
// called once per sample, and their loops are the same passes truncate() would make itself.

template <class C>
float max_logit_of(const C* c, size_t n) {
  float max_logit = kNegInf;
  for (size_t i = 0; i < n; ++i) max_logit = std::max(max_logit, c[i].logit);
  return max_logit;
}

// Moves the min-p set (every logit >= max_logit + log(min_p)) to the front of c[0, n) and
// returns its size: found by binary search when c is fully sorted, else by one partition pass.
// An empty set (min_p > 1) keeps the single best token instead (llama.cpp's min_keep = 1),
// which then also counts as sorted.
template <class C>
size_t min_p_prefix(C* c, size_t n, float max_logit, float min_p, size_t* sorted) {
  const float threshold = max_logit + std::log(min_p);
  auto kept = [&](const C& x) { return x.logit >= threshold; };
  size_t m = *sorted >= n ? size_t(std::partition_point(c, c + n, kept) - c)
                          : size_t(std::partition(c, c + n, kept) - c);
  if (m == 0) {
    std::nth_element(c, c, c + n, ByLogitDesc{});
    m = 1;
    *sorted = std::max<size_t>(*sorted, 1);
  }
  return m;
}

// Unnormalized probability mass of c[a, b).
template <class C>
double mass(const C* c, size_t a, size_t b, float max_logit) {
  double s = 0.0;
  for (size_t i = a; i < b; ++i) s += std::exp(c[i].logit - max_logit);
  return s;
}

// Narrows [lo, hi) (with acc, the mass of [0, lo)) around the end of the shortest best-first
// prefix holding `target` mass, by a selection that halves the range each step (expected O(m),
// never a full sort): after each step, [0, lo) is better than [lo, hi), which is better than
// [hi, m), and the end lies in [lo, hi]. Then sorts what is left of the range.
template <class C>
void narrow_to_top_p_end(C* c, double target, float max_logit, size_t* lo, size_t* hi, double* acc) {
  while (*hi - *lo > 256) {
    size_t mid = *lo + (*hi - *lo) / 2;
    std::nth_element(c + *lo, c + mid, c + *hi, ByLogitDesc{});
    double s = mass(c, *lo, mid, max_logit);
    if (*acc + s >= target) {
      *hi = mid;
    } else {
      *acc += s;
      *lo = mid;
    }
  }
  std::sort(c + *lo, c + *hi, ByLogitDesc{});
}

// top-p within the first m candidates (c[0, sorted) already in order): the length of the
// shortest best-first prefix of c[0, m) holding top_p of the mass of all n candidates.
template <class C>
size_t top_p_prefix(C* c, size_t n, size_t m, size_t sorted, float max_logit, float top_p) {
  const double target = double(top_p) * mass(c, 0, n, max_logit);
  size_t lo = 0, hi = m;
  double acc = 0.0;  // mass of [0, lo)
  if (sorted < m) narrow_to_top_p_end(c, target, max_logit, &lo, &hi, &acc);
  // Walk the sorted range [lo, hi) to the target; if rounding keeps the walk below it, the
  // whole range is the prefix.
  for (size_t i = lo; i < hi; ++i) {
    acc += std::exp(c[i].logit - max_logit);
    if (acc >= target) return i + 1;
  }
  return hi;
}

}  // namespace

int32_t argmax(const float* logits, int32_t n) {
  // Two passes: the maximum (eight independent lanes, so the loop is not one long dependency
  // chain; NaN fails every comparison and is skipped), then its first index.
  float lane[8];
  for (float& l : lane) l = kNegInf;
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      float v = logits[i + j];
      lane[j] = v > lane[j] ? v : lane[j];
    }
  }
  float m = kNegInf;
  for (; i < n; ++i) m = logits[i] > m ? logits[i] : m;
  for (float l : lane) m = l > m ? l : m;
  if (m == kNegInf) return 0;  // every logit -inf or NaN
  for (int32_t k = 0; k < n; ++k) {
    if (logits[k] == m) return k;
  }
  return 0;
}

Status validate(const SamplingParams& p, const SamplingFieldNames& n) {
  auto finite = [](float v) { return std::isfinite(v); };
  if (!finite(p.temperature) || p.temperature < 0) {
    return Status::invalid(strprintf("%s must be a finite number >= 0 (0: greedy), got %g", n.temperature, p.temperature), n.temperature);
  }
  if (!finite(p.top_p) || p.top_p <= 0 || p.top_p > 1) {
    return Status::invalid(strprintf("%s must be in (0, 1], got %g", n.top_p, p.top_p), n.top_p);
  }
  if (!finite(p.min_p) || p.min_p < 0 || p.min_p > 1) {
    return Status::invalid(strprintf("%s must be in [0, 1], got %g", n.min_p, p.min_p), n.min_p);
  }
  if (!finite(p.repeat_penalty) || p.repeat_penalty <= 0) {
    return Status::invalid(strprintf("%s must be a finite number > 0 (1: off), got %g", n.repeat_penalty, p.repeat_penalty), n.repeat_penalty);
  }
  if (p.repeat_last_n < -1) return Status::invalid(strprintf("%s must be >= -1 (-1: all), got %d", n.repeat_last_n, p.repeat_last_n), n.repeat_last_n);
  if (!finite(p.presence_penalty) || std::fabs(p.presence_penalty) > 2) {
    return Status::invalid(strprintf("%s must be in [-2, 2], got %g", n.presence_penalty, p.presence_penalty), n.presence_penalty);
  }
  if (!finite(p.frequency_penalty) || std::fabs(p.frequency_penalty) > 2) {
    return Status::invalid(strprintf("%s must be in [-2, 2], got %g", n.frequency_penalty, p.frequency_penalty), n.frequency_penalty);
  }
  return Status();
}

SamplerState::SamplerState(const SamplingParams& p) : params(p) { reset(p.seed); }

Sampler::Sampler(int32_t n_vocab) : Sampler(SamplingParams(), n_vocab) {}

Sampler::Sampler(const SamplingParams& p, int32_t n_vocab) : own_(p), n_vocab_(n_vocab) {
  LL3_CHECK(n_vocab > 0);
  work_.resize(static_cast<size_t>(n_vocab));
  cand_.resize(static_cast<size_t>(n_vocab));
  counts_.assign(static_cast<size_t>(n_vocab), 0);
  weights_.resize(static_cast<size_t>(n_vocab));
}

void SamplerState::reset(uint64_t seed) {
  if (seed == kRandomSeed) {
    std::random_device rd;
    seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  rng.seed(seed);
}

double Sampler::uniform01() {
  // 53 random bits -> [0, 1); written out so the stream is the same with any standard library.
  return static_cast<double>(st_->rng() >> 11) * 0x1.0p-53;
}

void Sampler::apply_penalties(std::span<const int32_t> history) {
  const SamplingParams& p = st_->params;
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
    float& l = work_[size_t(*t)];
    l = l <= 0.0f ? l * p.repeat_penalty : l / p.repeat_penalty;
    l -= float(c) * p.frequency_penalty + p.presence_penalty;
    // Odd parameters (a zero or infinite penalty) must not leak NaN / inf into the draw.
    if (!(l == l)) l = kNegInf;
    else if (l > FLT_MAX) l = FLT_MAX;
  }
}

size_t Sampler::select_top_k(size_t k) {
  // One pass over the logits with a k-heap whose top is the worst kept candidate: most tokens
  // cost one comparison, and the (n_vocab) candidate array is never filled.
  const float* w = work_.data();
  Candidate* c = cand_.data();
  for (size_t i = 0; i < k; ++i) c[i] = {w[i], int32_t(i)};
  std::make_heap(c, c + k, ByLogitDesc{});
  float worst = c[0].logit;
  for (size_t i = k; i < size_t(n_vocab_); ++i) {
    // Strictly greater: on a tie the kept token has the smaller id, as ByLogitDesc orders them.
    if (w[i] > worst) {
      std::pop_heap(c, c + k, ByLogitDesc{});
      c[k - 1] = {w[i], int32_t(i)};
      std::push_heap(c, c + k, ByLogitDesc{});
      worst = c[0].logit;
    }
  }
  std::sort_heap(c, c + k, ByLogitDesc{});  // best first
  return k;
}

size_t Sampler::truncate() {
  const SamplingParams& p = st_->params;
  Candidate* c = cand_.data();
  size_t n = size_t(n_vocab_);
  size_t sorted = 0;  // c[0, sorted) is in final descending order

  if (p.top_k > 0 && size_t(p.top_k) < n) {
    n = select_top_k(size_t(p.top_k));
    sorted = n;
  } else {
    const float* w = work_.data();
    for (size_t i = 0; i < n; ++i) c[i] = {w[i], int32_t(i)};
  }

  const bool use_top_p = p.top_p < 1.0f;
  const bool use_min_p = p.min_p > 0.0f;
  if (!use_top_p && !use_min_p) return n;

  const float max_logit = sorted > 0 ? c[0].logit : max_logit_of(c, n);
  if (max_logit == kNegInf) return n;  // everything masked; draw() handles it

  // min-p keeps a prefix of the sorted order (all logits >= max + log(min_p)), and top-p keeps
  // a prefix too, so the result is the shorter prefix. Finding the min-p set first lets top-p
  // search only among its members, while top-p's normalization still spans all n candidates.
  const size_t m = use_min_p ? min_p_prefix(c, n, max_logit, p.min_p, &sorted) : n;
  return use_top_p ? top_p_prefix(c, n, m, sorted, max_logit, p.top_p) : m;
}

int32_t Sampler::draw(size_t n, int32_t draft, bool* accepted) {
  Candidate* c = cand_.data();
  float max_logit = kNegInf;
  size_t best = 0;
  for (size_t i = 0; i < n; ++i) {
    if (c[i].logit > max_logit) {
      max_logit = c[i].logit;
      best = i;
    }
  }
  auto answer = [&](int32_t t) {
    if (accepted) *accepted = t == draft;
    return t;
  };
  if (max_logit == kNegInf) {
    // Every candidate masked: no distribution to draw from; answer deterministically.
    int32_t lowest = c[0].id;
    for (size_t i = 1; i < n; ++i) lowest = std::min(lowest, c[i].id);
    return answer(lowest);
  }
  if (n == 1) return answer(c[best].id);

  // Temperature is folded into the exponent rather than dividing the logits, so a huge logit
  // over a small temperature cannot overflow to inf.
  const float inv_t = 1.0f / st_->params.temperature;
  float* w = weights_.data();
  double sum = 0.0;
  size_t guess = n;  // the draft's candidate index, n when it is not a candidate
  for (size_t i = 0; i < n; ++i) {
    float x = c[i].logit == kNegInf ? kNegInf : (c[i].logit - max_logit) * inv_t;
    w[i] = std::exp(x);
    sum += w[i];
    if (c[i].id == draft) guess = i;
  }
  if (guess < n) {
    // Keep the guess with probability p(draft); else draw from the rest, renormalized.
    if (uniform01() * sum < w[guess]) return answer(draft);
    sum -= w[guess];
    w[guess] = 0;
    if (!(sum > 0)) return answer(draft);  // rounding: the guess held all the mass
  }
  const double u = uniform01() * sum;
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cum += w[i];
    if (u < cum) return answer(c[i].id);
  }
  // Rounding left u at the very top of the range: the best candidate, unless it was the
  // rejected guess.
  if (w[best] > 0) return answer(c[best].id);
  for (size_t i = n; i-- > 0;) {
    if (w[i] > 0) return answer(c[i].id);
  }
  return answer(c[best].id);
}

int32_t Sampler::verify(SamplerState& state, const float* logits, std::span<const int32_t> history, int32_t draft,
                        bool* accepted) {
  return pick(state, logits, history, nullptr, draft, accepted);
}

int32_t Sampler::sample_allowed(SamplerState& state, const float* logits, std::span<const int32_t> history,
                                const uint8_t* allowed) {
  return pick(state, logits, history, allowed, -1, nullptr);
}

int32_t Sampler::pick(SamplerState& state, const float* logits, std::span<const int32_t> history, const uint8_t* allowed,
                      int32_t draft, bool* accepted) {
  st_ = &state;
  const size_t n = size_t(n_vocab_);
  float* w = work_.data();
  for (size_t i = 0; i < n; ++i) {
    // NaN -> -inf; +inf -> FLT_MAX so that (logit - max) stays finite. Branch-free: vectorizes.
    float v = logits[i];
    v = v == v ? v : kNegInf;
    w[i] = v < FLT_MAX ? v : FLT_MAX;
  }
  if (allowed) {
    for (size_t i = 0; i < n; ++i) w[i] = allowed[i] ? w[i] : kNegInf;
  }
  apply_penalties(history);

  if (state.params.temperature <= 0.0f) {
    const int32_t t = argmax(w, n_vocab_);
    if (accepted) *accepted = t == draft;
    return t;
  }
  return draw(truncate(), draft, accepted);
}

}  // namespace ll3
