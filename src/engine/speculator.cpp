#include "engine/speculator.h"

#include <algorithm>
#include <cmath>

namespace ll3 {

int64_t ngram_guess(std::span<const int32_t> tokens, int min_n, int max_n, std::span<int32_t> out) {
  const int64_t L = static_cast<int64_t>(tokens.size());
  if (out.empty()) return 0;
  for (int n = std::min<int64_t>(max_n, L - 1); n >= min_n; --n) {
    const int32_t* suffix = tokens.data() + (L - n);
    // The latest earlier match: start positions from L - n - 1 down to 0.
    for (int64_t i = L - n - 1; i >= 0; --i) {
      if (!std::equal(suffix, suffix + n, tokens.data() + i)) continue;
      const int64_t from = i + n;  // what followed the match (< L)
      const int64_t k = std::min<int64_t>(static_cast<int64_t>(out.size()), L - from);
      std::copy_n(tokens.data() + from, k, out.data());
      return k;
    }
  }
  return 0;
}

void AcceptanceRate::add(int64_t m, int64_t k) {
  // Decay by 0.8 a step: about the last five steps count.
  accepted = 0.8 * accepted + static_cast<double>(m);
  tried = 0.8 * tried + static_cast<double>(std::min(m + 1, k));
}

void AcceptanceRate::idle() {
  accepted *= 0.9;
  tried *= 0.9;
}

double AcceptanceRate::rate(double prior) const {
  // One pseudo-observation of the prior keeps an early miss from switching guessing off.
  return (accepted + prior) / (tried + 1.0);
}

int draft_length(double accept, int max_k, int64_t rows, double step_s, double row_s) {
  if (max_k <= 0 || rows < 1 || !(step_s > 0)) return 0;
  const double a = std::clamp(accept, 0.0, 0.999);
  // Expected tokens from k guesses: 1 + a + a^2 + ... + a^k (the first wrong guess is replaced
  // by the verified token, and all k right add one more).
  double best_rate = static_cast<double>(rows) / step_s;
  int best = 0;
  double expected = 1, term = 1;
  for (int k = 1; k <= max_k; ++k) {
    term *= a;
    expected += term;
    const double rate = (static_cast<double>(rows) - 1 + expected) / (step_s + row_s * k);
    if (rate > best_rate * 1.02) {  // 2%: not worth a guess that is in the noise
      best_rate = rate;
      best = k;
    }
  }
  return best;
}

}  // namespace ll3
