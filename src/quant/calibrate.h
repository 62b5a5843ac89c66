// Activation-scale calibration for static INT8 (W8A8) matrix products: each product's input
// gets one fixed scale s chosen offline from calibration activations, and at run time
// x_q = clamp(round(x / s), -127, 127). A calibrator picks the clip value c; s = c / 127.
//
// ActivationStats streams one tensor's activations batch by batch (running max |x|, an EMA of
// the batch maxima, a histogram of |x|, optionally the per-column max |x| that SmoothQuant
// needs); choose_scale() turns them into a scale with one of four rules:
//
//   minmax      c = max |x| over everything observed
//   ema         c = EMA of the batch maxima: e_1 = m_1, e_k = d e_{k-1} + (1 - d) m_k
//   percentile  c = the p-th percentile of |x| from the histogram, linear inside its bin
//               (never above max |x|)
//   mse         c minimising the histogram's estimate of the int8 quantization error,
//               E(c) = sum over bins i of n_i * ( c^2 / (12 * 127^2)   if m_i <  c   (rounding)
//                                                  (m_i - c)^2          if m_i >= c   (clipping) )
//               with m_i the bin's centre (all its mass there) and c^2 / (12 * 127^2) = s^2 / 12
//               the mean squared rounding error of a uniform step s. E is quadratic in c
//               between consecutive centres (which bins round and which clip is fixed there),
//               so the minimum is found exactly: on each piece (m_{j-1}, m_j] the quadratic's
//               vertex c* = T1 / (T0 + R / (12 * 127^2)) (R: count of bins i < j, T0 / T1:
//               count and sum of m_i of bins i >= j), clamped to the piece; the best of all
//               pieces wins (O(bins) with suffix sums), then c is capped at max |x|.
//
// The histogram: n_bins equal bins of |x| over [0, R), R always a power of two, the smallest
// strictly above every value seen. When a batch brings a larger value R doubles (as often as
// needed) and the counts merge pairwise, bins 2i and 2i+1 into bin i (TensorRT's entropy
// calibrator's re-binning): no count is lost or smeared. Because R depends only on the largest
// value, the histogram is the same whatever order or batching the data came in. Its bin width
// R / n_bins is at most 2 max|x| / n_bins, the resolution of the percentile and mse rules.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ll3::quant {

constexpr int kInt8Max = 127;  // symmetric int8: codes -127..127 (-128 unused)

struct ActivationStatsOptions {
  int64_t n_bins = 2048;     // even, >= 2 (pairs merge when the range doubles)
  double ema_decay = 0.9;    // d in [0, 1): weight of the previous EMA
  bool per_channel = false;  // keep max |x| per column too

  // Says what is wrong with the options (for a CLI flag), else OK.
  Status validate() const;
};

// Streaming statistics of one tensor's activations. observe() allocates nothing after the
// first non-empty batch (the histogram is allocated by the constructor, the per-column maxima
// on the first batch).
class ActivationStats {
 public:
  // The options must be valid (validate()); invalid ones are a bug in the caller.
  explicit ActivationStats(ActivationStatsOptions options = {});

  // Adds a batch of n_rows rows of n_cols activations (x: (n_rows, n_cols), row-major). Every
  // batch must have the first batch's column count; a batch with a NaN or an infinity, or of a
  // different width, is an error and leaves the statistics unchanged. A batch of zero rows is
  // ignored (it is not a batch for the EMA).
  Status observe(const float* x, int64_t n_rows, int64_t n_cols);

  const ActivationStatsOptions& options() const { return options_; }
  int64_t count() const { return count_; }          // values observed
  int64_t n_batches() const { return n_batches_; }  // non-empty batches observed
  int64_t n_cols() const { return n_cols_; }        // 0 before the first batch
  float max_abs() const { return max_abs_; }        // max |x| (exact)
  double ema_max() const { return ema_max_; }       // EMA of the batch maxima
  // The histogram of |x|: bin i counts values in [i w, (i + 1) w), w = bin_width().
  const std::vector<int64_t>& histogram() const { return hist_; }
  double range() const { return range_; }  // R: 0 until a non-zero value arrives
  double bin_width() const { return range_ / static_cast<double>(options_.n_bins); }
  // max |x| per column (n_cols); empty unless options().per_channel.
  const std::vector<float>& channel_max_abs() const { return channel_max_; }

  // The p-th percentile (0 < p <= 100) of |x| from the histogram: the bin where the
  // cumulative count reaches p/100 * count(), linearly interpolated inside it, capped at
  // max_abs(). Errors: no data, p out of range.
  Result<double> percentile(double p) const;

 private:
  void grow_range(double max_value);

  ActivationStatsOptions options_;
  int64_t count_ = 0;
  int64_t n_batches_ = 0;
  int64_t n_cols_ = 0;
  float max_abs_ = 0.0f;
  double ema_max_ = 0.0;
  double range_ = 0.0;
  double inv_width_ = 0.0;     // n_bins / range_, a power of two: bin = floor(|x| * inv_width_)
  std::vector<int64_t> hist_;  // (n_bins)
  std::vector<float> channel_max_;  // (n_cols) when per_channel
};

enum class Calibrator { kMinMax, kEmaMinMax, kPercentile, kMse };

// "minmax", "ema", "percentile", "mse".
std::string_view calibrator_name(Calibrator c);
// The inverse; an unknown name is an error listing the valid ones.
Result<Calibrator> parse_calibrator(std::string_view name);

// The clip value c the calibrator picks (see the top of this file); `percentile` is used by
// kPercentile only. Errors: no data observed; every value zero (no scale is meaningful: the
// caller decides what a dead input gets); a percentile outside (0, 100]. The percentile
// clip is never 0 when some value is non-zero: interpolation inside bin 0 gives a positive c.
Result<double> choose_clip(const ActivationStats& stats, Calibrator calibrator,
                           double percentile = 99.99);
// s = c / 127, the scale x is divided by before rounding.
Result<float> choose_scale(const ActivationStats& stats, Calibrator calibrator,
                           double percentile = 99.99);

// E(c) / count(): the mse rule's estimate of the mean squared quantization error per value
// when clipping at c (c > 0), on the histogram as described at the top. For tests and reports.
double histogram_quant_mse(const ActivationStats& stats, double c);

}  // namespace ll3::quant
