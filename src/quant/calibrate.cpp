#include "quant/calibrate.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "core/check.h"

namespace ll3::quant {

namespace {

// The mean squared rounding error of a value clipped at c is (c / 127)^2 / 12 per value.
constexpr double kRoundingFactor = 1.0 / (12.0 * kInt8Max * kInt8Max);

struct CalibratorName {
  Calibrator calibrator;
  const char* name;
};
constexpr CalibratorName kCalibratorNames[] = {
    {Calibrator::kMinMax, "minmax"},
    {Calibrator::kEmaMinMax, "ema"},
    {Calibrator::kPercentile, "percentile"},
    {Calibrator::kMse, "mse"},
};

// The smallest power of two strictly above v (v > 0, finite).
double power_of_two_above(double v) {
  int e = 0;
  std::frexp(v, &e);  // v = f 2^e, f in [0.5, 1): 2^e > v
  return std::ldexp(1.0, e);
}

// The exact minimiser of the mse objective over c in (0, n_bins * w], see the header.
double mse_clip(const std::vector<int64_t>& hist, double w) {
  const size_t n = hist.size();
  // Suffix sums over the clipped bins i >= j: count and sum of the centres m_i.
  double t0 = 0.0, t1 = 0.0, rounded = 0.0;
  for (size_t i = 0; i < n; ++i) {
    t0 += static_cast<double>(hist[i]);
    t1 += static_cast<double>(hist[i]) * (static_cast<double>(i) + 0.5) * w;
  }
  double t2 = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double m = (static_cast<double>(i) + 0.5) * w;
    t2 += static_cast<double>(hist[i]) * m * m;
  }
  double best_c = 0.0, best_e = HUGE_VAL;
  // Piece j: c in (m_{j-1}, m_j] (m_{-1} = 0; the last piece, j = n, ends at n w), where bins
  // i < j round and bins i >= j clip: E(c) = a c^2 - 2 t1 c + t2 with a = rounded k + t0.
  for (size_t j = 0; j <= n; ++j) {
    const double lo = j == 0 ? 0.0 : (static_cast<double>(j) - 0.5) * w;
    const double hi = j == n ? static_cast<double>(n) * w : (static_cast<double>(j) + 0.5) * w;
    const double a = rounded * kRoundingFactor + t0;
    if (a > 0.0) {
      // The vertex, clamped to the piece. c = lo belongs to the previous piece, whose value
      // there (bin j - 1 clipped at its centre: error 0) is no larger than this formula's, and
      // which came first: ties keep it, so best_e is always the objective at best_c.
      double c = std::clamp(t1 / a, lo, hi);
      if (c <= 0.0) c = hi;
      const double e = a * c * c - 2.0 * t1 * c + t2;
      if (e < best_e) {
        best_e = e;
        best_c = c;
      }
    }
    if (j < n) {  // bin j moves from the clipped to the rounded side
      const double cnt = static_cast<double>(hist[j]);
      const double m = (static_cast<double>(j) + 0.5) * w;
      rounded += cnt;
      t0 -= cnt;
      t1 -= cnt * m;
      t2 -= cnt * m * m;
    }
  }
  return best_c;
}

}  // namespace

Status ActivationStatsOptions::validate() const {
  if (n_bins < 2 || n_bins % 2 != 0 || n_bins > (int64_t{1} << 30)) {
    return Status::invalid(
        strprintf("calibrate: the histogram needs an even number of bins from 2 to 2^30, not %lld",
                  static_cast<long long>(n_bins)),
        "n_bins");
  }
  if (!(ema_decay >= 0.0 && ema_decay < 1.0)) {
    return Status::invalid(
        strprintf("calibrate: the EMA decay must be in [0, 1), not %g", ema_decay), "ema_decay");
  }
  return Status();
}

ActivationStats::ActivationStats(ActivationStatsOptions options) : options_(options) {
  LL3_CHECK(options_.validate().ok());
  hist_.assign(static_cast<size_t>(options_.n_bins), 0);
}

void ActivationStats::grow_range(double max_value) {
  if (range_ == 0.0) {
    // Zeros seen so far are all in bin 0, which stays bin 0 of any range.
    range_ = power_of_two_above(max_value);
  } else {
    const size_t half = hist_.size() / 2;
    while (range_ <= max_value) {
      // In place: bin i reads bins 2i and 2i + 1, which no earlier i wrote.
      for (size_t i = 0; i < half; ++i) hist_[i] = hist_[2 * i] + hist_[2 * i + 1];
      std::fill(hist_.begin() + static_cast<std::ptrdiff_t>(half), hist_.end(), 0);
      range_ *= 2.0;
    }
  }
  inv_width_ = static_cast<double>(options_.n_bins) / range_;
}

Status ActivationStats::observe(const float* x, int64_t n_rows, int64_t n_cols) {
  if (n_rows < 0 || n_cols <= 0) {
    return Status::invalid(
        strprintf("calibrate: a batch of %lld rows of %lld columns", static_cast<long long>(n_rows),
                  static_cast<long long>(n_cols)),
        "n_cols");
  }
  if (n_cols_ != 0 && n_cols != n_cols_) {
    return Status::invalid(
        strprintf("calibrate: a batch of %lld columns, but the first batch had %lld",
                  static_cast<long long>(n_cols), static_cast<long long>(n_cols_)),
        "n_cols");
  }
  if (n_rows == 0) return Status();
  if (x == nullptr) return Status::invalid("calibrate: a batch of rows without data", "x");

  // Pass 1: the batch's max |x| (the range must cover it before binning) and its validity,
  // so that a bad batch changes nothing.
  const int64_t n = n_rows * n_cols;
  float batch_max = 0.0f;
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    batch_max = std::max(batch_max, a);
    finite &= a <= FLT_MAX;  // false for NaN and infinity
  }
  if (!finite) {
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(x[i])) {
        return Status::invalid(
            strprintf("calibrate: value %g at row %lld, column %lld of the batch", x[i],
                      static_cast<long long>(i / n_cols), static_cast<long long>(i % n_cols)),
            "x");
      }
    }
  }

  if (n_cols_ == 0) {
    n_cols_ = n_cols;
    if (options_.per_channel) channel_max_.assign(static_cast<size_t>(n_cols), 0.0f);
  }
  if (batch_max > 0.0f && static_cast<double>(batch_max) >= range_) grow_range(batch_max);

  // Pass 2: the histogram (and the per-column maxima). |x| < range_, so the bin is in range;
  // inv_width_ is a power of two, so the bin is exactly floor(|x| / w).
  int64_t* h = hist_.data();
  const double inv_w = inv_width_;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n_cols;
    for (int64_t c = 0; c < n_cols; ++c) ++h[static_cast<int64_t>(std::fabs(xr[c]) * inv_w)];
    if (options_.per_channel) {
      float* cm = channel_max_.data();
      for (int64_t c = 0; c < n_cols; ++c) cm[c] = std::max(cm[c], std::fabs(xr[c]));
    }
  }

  count_ += n;
  max_abs_ = std::max(max_abs_, batch_max);
  const double d = options_.ema_decay;
  ema_max_ =
      n_batches_ == 0 ? static_cast<double>(batch_max) : d * ema_max_ + (1.0 - d) * batch_max;
  ++n_batches_;
  return Status();
}

Result<double> ActivationStats::percentile(double p) const {
  if (!(p > 0.0 && p <= 100.0)) {
    return Status::invalid(strprintf("calibrate: percentile %g is outside (0, 100]", p),
                           "percentile");
  }
  if (count_ == 0) return Status::invalid("calibrate: no activations observed", "stats");
  if (range_ == 0.0) return 0.0;  // all zeros
  const double target = p / 100.0 * static_cast<double>(count_);
  const double w = bin_width();
  double below = 0.0;  // values in the bins before i
  for (size_t i = 0; i < hist_.size(); ++i) {
    const double cnt = static_cast<double>(hist_[i]);
    if (cnt > 0.0 && below + cnt >= target) {
      const double frac = std::clamp((target - below) / cnt, 0.0, 1.0);
      return std::min((static_cast<double>(i) + frac) * w, static_cast<double>(max_abs_));
    }
    below += cnt;
  }
  return static_cast<double>(max_abs_);  // rounding of target at p = 100
}

std::string_view calibrator_name(Calibrator c) {
  for (const CalibratorName& n : kCalibratorNames) {
    if (n.calibrator == c) return n.name;
  }
  return "unknown";
}

Result<Calibrator> parse_calibrator(std::string_view name) {
  std::string valid;
  for (const CalibratorName& n : kCalibratorNames) {
    if (name == n.name) return n.calibrator;
    valid += valid.empty() ? "" : ", ";
    valid += n.name;
  }
  return Status::invalid(strprintf("calibrate: unknown calibrator '%.*s' (valid: %s)",
                                   static_cast<int>(name.size()), name.data(), valid.c_str()),
                         "calibrator");
}

Result<double> choose_clip(const ActivationStats& stats, Calibrator calibrator, double percentile) {
  if (stats.count() == 0) return Status::invalid("calibrate: no activations observed", "stats");
  if (stats.max_abs() == 0.0f) {
    return Status::invalid(
        strprintf("calibrate: all %lld observed activations are zero: no scale to choose",
                  static_cast<long long>(stats.count())),
        "stats");
  }
  double c = 0.0;
  switch (calibrator) {
    case Calibrator::kMinMax:
      c = stats.max_abs();
      break;
    case Calibrator::kEmaMinMax:
      c = stats.ema_max();
      break;
    case Calibrator::kPercentile: {
      Result<double> p = stats.percentile(percentile);
      if (!p.ok()) return p.status();
      c = *p;
      break;
    }
    case Calibrator::kMse:
      c = std::min(mse_clip(stats.histogram(), stats.bin_width()),
                   static_cast<double>(stats.max_abs()));
      break;
  }
  if (!(c > 0.0)) {
    const std::string_view name = calibrator_name(calibrator);
    return Status::errorf("calibrate: the %.*s calibrator chose a clip of %g",
                          static_cast<int>(name.size()), name.data(), c);
  }
  return c;
}

Result<float> choose_scale(const ActivationStats& stats, Calibrator calibrator, double percentile) {
  Result<double> c = choose_clip(stats, calibrator, percentile);
  if (!c.ok()) return c.status();
  return static_cast<float>(*c / kInt8Max);
}

double histogram_quant_mse(const ActivationStats& stats, double c) {
  if (stats.count() == 0) return 0.0;
  const std::vector<int64_t>& hist = stats.histogram();
  const double w = stats.bin_width();
  double e = 0.0;
  for (size_t i = 0; i < hist.size(); ++i) {
    if (hist[i] == 0) continue;
    const double m = (static_cast<double>(i) + 0.5) * w;
    e += static_cast<double>(hist[i]) * (m < c ? c * c * kRoundingFactor : (m - c) * (m - c));
  }
  return e / static_cast<double>(stats.count());
}

}  // namespace ll3::quant
