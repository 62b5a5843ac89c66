// Activation-scale calibrators for static INT8 (quant/calibrate.h) on synthetic activations
// whose quantiles are known: uniform, Gaussian and Laplace, 2^20 values each, fed in batches of
// random sizes. (The module lives here because tests/ has no quant executable.)
#include "quant/calibrate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace ll3::quant {
namespace {

constexpr int64_t kCols = 64;
constexpr int64_t kRows = 16384;  // kRows * kCols = 2^20 values
constexpr int64_t kN = kRows * kCols;

enum class Dist { kUniform, kGaussian, kLaplace };
const char* dist_name(Dist d) {
  return d == Dist::kUniform ? "uniform" : d == Dist::kGaussian ? "gaussian" : "laplace";
}
// The distributions' parameters: uniform on [-a, a], N(0, sigma^2), Laplace of scale b.
constexpr double kA = 3.0, kSigma = 0.7, kB = 0.4;

std::vector<float> samples(Dist d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(static_cast<size_t>(kN));
  std::uniform_real_distribution<float> u(static_cast<float>(-kA), static_cast<float>(kA));
  std::normal_distribution<float> g(0.0f, static_cast<float>(kSigma));
  std::exponential_distribution<float> e(static_cast<float>(1.0 / kB));
  for (float& v : x) {
    switch (d) {
      case Dist::kUniform:
        v = u(rng);
        break;
      case Dist::kGaussian:
        v = g(rng);
        break;
      case Dist::kLaplace:
        v = (rng() & 1) != 0 ? e(rng) : -e(rng);
        break;
    }
  }
  return x;
}

// The p-quantile (0 < q < 1) of |x| and the density of |x| there.
double known_quantile(Dist d, double q) {
  switch (d) {
    case Dist::kUniform:
      return kA * q;
    case Dist::kGaussian:
      return kSigma * std::sqrt(2.0) * [&] {  // erf^-1(q) by Newton
        double y = 1.0;
        for (int i = 0; i < 60; ++i)
          y -= (std::erf(y) - q) / (2.0 / std::sqrt(M_PI) * std::exp(-y * y));
        return y;
      }();
    case Dist::kLaplace:
      return -kB * std::log(1.0 - q);
  }
  return 0.0;
}
double density_abs(Dist d, double x) {
  switch (d) {
    case Dist::kUniform:
      return 1.0 / kA;
    case Dist::kGaussian:
      return 2.0 * std::exp(-0.5 * x * x / (kSigma * kSigma)) / (kSigma * std::sqrt(2.0 * M_PI));
    case Dist::kLaplace:
      return std::exp(-x / kB) / kB;
  }
  return 0.0;
}

// Feeds x as rows of kCols in batches of 1..400 rows.
ActivationStats observe_in_batches(const std::vector<float>& x, uint32_t seed,
                                   ActivationStatsOptions o = {}) {
  ActivationStats st(o);
  std::mt19937 rng(seed);
  const int64_t rows = static_cast<int64_t>(x.size()) / kCols;
  for (int64_t r = 0; r < rows;) {
    const int64_t n = std::min<int64_t>(rows - r, 1 + static_cast<int64_t>(rng() % 400));
    EXPECT_TRUE(st.observe(x.data() + r * kCols, n, kCols).ok());
    r += n;
  }
  return st;
}

// The (ceil(q N))-th smallest |x|: the value whose bin the histogram percentile interpolates in.
double empirical_quantile(const std::vector<float>& x, double q) {
  std::vector<float> a(x.size());
  for (size_t i = 0; i < x.size(); ++i) a[i] = std::fabs(x[i]);
  const size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(a.size()))) - 1;
  std::nth_element(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(k), a.end());
  return a[k];
}

// Mean squared error of x_q = clamp(round(x / s), -127, 127) on the samples themselves.
double sample_quant_mse(const std::vector<float>& x, float s) {
  double e = 0.0;
  for (float v : x) {
    const float q = std::clamp(std::nearbyint(v / s), -127.0f, 127.0f);
    const double d = static_cast<double>(v) - static_cast<double>(q) * s;
    e += d * d;
  }
  return e / static_cast<double>(x.size());
}

// The mse calibrator's objective, written again from its definition (calibrate.h), per value.
double objective(const ActivationStats& st, double c) {
  const double w = st.bin_width(), s = c / 127.0;
  double e = 0.0;
  for (size_t i = 0; i < st.histogram().size(); ++i) {
    const double m = (static_cast<double>(i) + 0.5) * w;
    e += static_cast<double>(st.histogram()[i]) * (m < c ? s * s / 12.0 : (m - c) * (m - c));
  }
  return e / static_cast<double>(st.count());
}

// Percentile p of |x| within bin width + 4 sampling standard deviations of the known quantile.
// The histogram percentile lies in the same bin as the empirical quantile of the same samples
// (so within one bin width w of it); the empirical p-quantile of N draws has standard deviation
// sqrt(q (1 - q) / N) / f(x_q), f the density of |x| at the quantile.
TEST(Calibrate, PercentileMatchesKnownQuantiles) {
  struct Case {
    Dist dist;
    std::vector<double> ps;
  };
  const Case cases[] = {{Dist::kUniform, {50, 90, 99, 99.9, 99.99}},
                        {Dist::kGaussian, {99, 99.9, 99.99}},
                        {Dist::kLaplace, {99, 99.9}}};
  uint32_t seed = 1;
  for (const Case& cs : cases) {
    const std::vector<float> x = samples(cs.dist, seed);
    const ActivationStats st = observe_in_batches(x, seed + 100);
    ++seed;
    ASSERT_EQ(st.count(), kN);
    const double w = st.bin_width();
    for (double p : cs.ps) {
      const double q = p / 100.0;
      const double truth = known_quantile(cs.dist, q);
      const double sd = std::sqrt(q * (1.0 - q) / kN) / density_abs(cs.dist, truth);
      Result<double> got = st.percentile(p);
      ASSERT_TRUE(got.ok()) << got.message();
      Result<float> scale = choose_scale(st, Calibrator::kPercentile, p);
      ASSERT_TRUE(scale.ok()) << scale.message();
      EXPECT_EQ(*scale, static_cast<float>(*got / 127.0));
      const double emp = empirical_quantile(x, q);
      std::printf(
          "  %-8s p=%-6g known %.5f hist %.5f (err %+.5f, tol %.5f = w %.5f + 4 sd %.5f); "
          "vs empirical %+.6f\n",
          dist_name(cs.dist), p, truth, *got, *got - truth, w + 4 * sd, w, sd, *got - emp);
      EXPECT_NEAR(*got, truth, w + 4.0 * sd) << dist_name(cs.dist) << " p=" << p;
      EXPECT_NEAR(*got, emp, w * (1.0 + 1e-9)) << dist_name(cs.dist) << " p=" << p;
    }
  }
  // Well-known values of the Gaussian's |x|: 99th 2.5758 sigma, 99.9th 3.2905 sigma.
  EXPECT_NEAR(known_quantile(Dist::kGaussian, 0.99), 2.5758 * kSigma, 1e-4);
  EXPECT_NEAR(known_quantile(Dist::kGaussian, 0.999), 3.2905 * kSigma, 1e-4);
}

TEST(Calibrate, MinMaxIsTheTrueMax) {
  const std::vector<float> x = samples(Dist::kGaussian, 7);
  ActivationStatsOptions o;
  o.per_channel = true;
  const ActivationStats st = observe_in_batches(x, 8, o);
  float max_abs = 0.0f;
  std::vector<float> col_max(kCols, 0.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(x[i]));
    col_max[i % kCols] = std::max(col_max[i % kCols], std::fabs(x[i]));
  }
  EXPECT_EQ(st.max_abs(), max_abs);
  Result<double> c = choose_clip(st, Calibrator::kMinMax);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(*c, static_cast<double>(max_abs));
  Result<float> s = choose_scale(st, Calibrator::kMinMax);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(*s, static_cast<float>(static_cast<double>(max_abs) / 127.0));
  EXPECT_EQ(st.channel_max_abs(), col_max);
  // p = 100 is the max too (the histogram's answer is capped there).
  EXPECT_EQ(st.percentile(100.0).value(), static_cast<double>(max_abs));
}

TEST(Calibrate, EmaFollowsHandComputedAverage) {
  // Four batches of 3 x 5 with known maxima (the max sits anywhere, either sign).
  const float maxima[] = {2.5f, 0.75f, 4.0f, 1.25f};
  for (double d : {0.9, 0.5, 0.0}) {
    ActivationStatsOptions o;
    o.ema_decay = d;
    ActivationStats st(o);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    double ema = 0.0;
    for (int b = 0; b < 4; ++b) {
      std::vector<float> x(15);
      for (float& v : x) v = u(rng) * maxima[b];
      x[static_cast<size_t>(rng() % 15)] = (b % 2 != 0 ? -1.0f : 1.0f) * maxima[b];
      ASSERT_TRUE(st.observe(x.data(), 3, 5).ok());
      ASSERT_TRUE(st.observe(x.data(), 0, 5).ok());  // empty: not a batch
      ema = b == 0 ? maxima[0] : d * ema + (1.0 - d) * maxima[b];
      EXPECT_EQ(st.ema_max(), ema) << "decay " << d << " batch " << b;
    }
    EXPECT_EQ(st.n_batches(), 4);
    Result<double> c = choose_clip(st, Calibrator::kEmaMinMax);
    ASSERT_TRUE(c.ok()) << c.message();
    EXPECT_EQ(*c, ema);
    EXPECT_EQ(choose_scale(st, Calibrator::kEmaMinMax).value(), static_cast<float>(ema / 127.0));
  }
}

// The mse clip: near the max on uniform data (the optimum of the continuous objective is
// a / (1 + 1/254) = 0.9961 a), well below it on the Gaussian and Laplace tails; equal to a
// brute-force scan of the same objective (8 points per bin) within one bin and no worse; and a
// lower quantization error than min-max on the samples themselves where there are tails.
TEST(Calibrate, MseClipMinimisesTheObjective) {
  uint32_t seed = 20;
  for (Dist d : {Dist::kUniform, Dist::kGaussian, Dist::kLaplace}) {
    const std::vector<float> x = samples(d, seed);
    const ActivationStats st = observe_in_batches(x, seed + 1);
    seed += 2;
    Result<double> c = choose_clip(st, Calibrator::kMse);
    ASSERT_TRUE(c.ok()) << c.message();
    const double w = st.bin_width(), max = st.max_abs();

    double best_c = 0.0, best_e = HUGE_VAL;
    const int64_t steps = 8 * static_cast<int64_t>(st.histogram().size());
    for (int64_t k = 1; k <= steps; ++k) {
      const double cand = std::min(static_cast<double>(k) * w / 8.0, max);
      const double e = objective(st, cand);
      if (e < best_e) {
        best_e = e;
        best_c = cand;
      }
    }
    const double e_mse = objective(st, *c);
    EXPECT_NEAR(histogram_quant_mse(st, *c), e_mse, 1e-12 * e_mse);
    EXPECT_NEAR(*c, best_c, w) << dist_name(d);
    EXPECT_LE(e_mse, best_e * (1.0 + 1e-9)) << dist_name(d);

    const float s_mse = choose_scale(st, Calibrator::kMse).value(),
                s_max = choose_scale(st, Calibrator::kMinMax).value();
    const double q_mse = sample_quant_mse(x, s_mse), q_max = sample_quant_mse(x, s_max);
    std::printf(
        "  %-8s max %.4f mse clip %.4f (%.3f max; brute force %.4f, w %.5f); sample MSE %.3e vs "
        "min-max %.3e (objective %.3e)\n",
        dist_name(d), max, *c, *c / max, best_c, w, q_mse, q_max, e_mse);
    if (d == Dist::kUniform) {
      EXPECT_GE(*c, 0.97 * max);
      EXPECT_LE(q_mse, 1.05 * q_max);
    } else {
      EXPECT_LE(*c, 0.85 * max) << dist_name(d);
      EXPECT_LT(q_mse, q_max) << dist_name(d);
    }
    // The objective estimates the real error (measured: within 0.3%).
    EXPECT_NEAR(e_mse, q_mse, 0.05 * q_mse) << dist_name(d);
    // Banner et al.'s analytic 8-bit optimum of the same objective (ACIQ, "Post training 4-bit
    // quantization", 2019): 3.92 sigma for a Gaussian, 9.89 b for a Laplace; the sample's
    // finite tail and the histogram move it a little (measured: 3.92 sigma, 10.1 b).
    if (d == Dist::kGaussian) {
      EXPECT_NEAR(*c / kSigma, 3.92, 0.05 * 3.92);
    }
    if (d == Dist::kLaplace) {
      EXPECT_NEAR(*c / kB, 9.89, 0.05 * 9.89);
    }
  }
}

// Data arriving in increasing range (sorted by |x|, so nearly every batch doubles the range,
// from 2^-10 to 4: a dozen merges) gives the same histogram as all of it at once, bin for bin,
// and both equal a direct binning of the data on the final grid.
TEST(Calibrate, RebinningLosesNothing) {
  std::vector<float> x = samples(Dist::kGaussian, 40);
  ActivationStats all;
  ASSERT_TRUE(all.observe(x.data(), kRows, kCols).ok());
  std::sort(x.begin(), x.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); });
  ActivationStats grown = observe_in_batches(x, 41);
  EXPECT_EQ(grown.count(), kN);
  EXPECT_EQ(grown.count(), all.count());
  EXPECT_EQ(grown.range(), all.range());
  EXPECT_EQ(grown.histogram(), all.histogram());
  std::vector<int64_t> direct(all.histogram().size(), 0);
  for (float v : x) ++direct[static_cast<size_t>(std::floor(std::fabs(v) / all.bin_width()))];
  EXPECT_EQ(grown.histogram(), direct);
  for (double p : {50.0, 99.0, 99.9, 99.99}) {
    EXPECT_NEAR(grown.percentile(p).value(), all.percentile(p).value(),
                std::max(grown.bin_width(), all.bin_width()));
  }
  // A tiny first batch set the grid; the rest doubled it.
  ActivationStats first;
  ASSERT_TRUE(first.observe(x.data(), 1, kCols).ok());
  std::printf("  range after the first batch %g, after all %g\n", first.range(), grown.range());
  EXPECT_LT(first.range(), grown.range() / 1000);
  EXPECT_EQ(grown.max_abs(), all.max_abs());
}

TEST(Calibrate, ObserveAllocatesOnlyOnce) {
  const std::vector<float> x = samples(Dist::kLaplace, 50);
  ActivationStatsOptions o;
  o.per_channel = true;
  ActivationStats st(o);
  ASSERT_TRUE(st.observe(x.data(), 1, kCols).ok());
  const int64_t* h = st.histogram().data();
  const float* cm = st.channel_max_abs().data();
  for (int64_t r = 1; r < 2000; r += 37)
    ASSERT_TRUE(st.observe(x.data() + r * kCols, 37, kCols).ok());
  EXPECT_EQ(st.histogram().data(), h);
  EXPECT_EQ(st.channel_max_abs().data(), cm);
}

TEST(Calibrate, Errors) {
  ActivationStats st;
  for (Calibrator c :
       {Calibrator::kMinMax, Calibrator::kEmaMinMax, Calibrator::kPercentile, Calibrator::kMse}) {
    Result<float> s = choose_scale(st, c);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("no activations observed"), std::string::npos) << s.message();
  }
  EXPECT_FALSE(st.percentile(99).ok());

  const std::vector<float> x = samples(Dist::kGaussian, 60);
  ASSERT_TRUE(st.observe(x.data(), 10, 64).ok());
  Status bad = st.observe(x.data(), 10, 32);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("32 columns, but the first batch had 64"), std::string::npos)
      << bad.message();
  EXPECT_EQ(bad.field(), "n_cols");
  EXPECT_EQ(st.count(), 640);
  EXPECT_EQ(st.n_cols(), 64);
  EXPECT_FALSE(st.observe(x.data(), -1, 64).ok());
  EXPECT_FALSE(st.observe(nullptr, 2, 64).ok());

  // A NaN or an infinity is named by position and changes nothing.
  std::vector<float> y(x.begin(), x.begin() + 128);
  y[70] = NAN;
  const std::vector<int64_t> before = st.histogram();
  Status nan = st.observe(y.data(), 2, 64);
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.message().find("nan at row 1, column 6"), std::string::npos) << nan.message();
  y[70] = 1.0f;
  y[3] = -INFINITY;
  Status inf = st.observe(y.data(), 2, 64);
  ASSERT_FALSE(inf.ok());
  EXPECT_NE(inf.message().find("-inf at row 0, column 3"), std::string::npos) << inf.message();
  EXPECT_EQ(st.count(), 640);
  EXPECT_EQ(st.n_batches(), 1);
  EXPECT_EQ(st.histogram(), before);

  for (double p : {0.0, -1.0, 100.5, std::nan("")}) {
    Result<float> s = choose_scale(st, Calibrator::kPercentile, p);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("outside (0, 100]"), std::string::npos) << s.message();
  }

  // All zeros: no scale, said so.
  ActivationStats zeros;
  const std::vector<float> z(256, 0.0f);
  ASSERT_TRUE(zeros.observe(z.data(), 4, 64).ok());
  Result<float> s = choose_scale(zeros, Calibrator::kMse);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("all 256 observed activations are zero"), std::string::npos)
      << s.message();
  // ... until something non-zero arrives; the zeros stay in bin 0.
  ASSERT_TRUE(zeros.observe(x.data(), 1, 64).ok());
  EXPECT_TRUE(choose_scale(zeros, Calibrator::kMse).ok());
  EXPECT_GE(zeros.histogram()[0], 256);

  ActivationStatsOptions o;
  o.n_bins = 7;
  EXPECT_NE(o.validate().message().find("even number of bins"), std::string::npos);
  o.n_bins = 2048;
  o.ema_decay = 1.0;
  EXPECT_EQ(o.validate().field(), "ema_decay");
}

TEST(Calibrate, Names) {
  for (Calibrator c :
       {Calibrator::kMinMax, Calibrator::kEmaMinMax, Calibrator::kPercentile, Calibrator::kMse}) {
    Result<Calibrator> back = parse_calibrator(calibrator_name(c));
    ASSERT_TRUE(back.ok()) << back.message();
    EXPECT_EQ(*back, c);
  }
  EXPECT_EQ(calibrator_name(Calibrator::kEmaMinMax), "ema");
  Result<Calibrator> bad = parse_calibrator("entropy");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(),
            "calibrate: unknown calibrator 'entropy' (valid: minmax, ema, percentile, mse)");
  EXPECT_EQ(bad.status().field(), "calibrator");
}

}  // namespace
}  // namespace ll3::quant
