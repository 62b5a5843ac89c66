// The AVX-512 exponentials (SwiGLU, softmax) against their std::exp references: random inputs
// over the whole float range of exp, odd lengths (masked tails), and the special values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/activation_kernels.h"
#include "kernels/exp_arm.h"

namespace ll3 {
namespace {

// Distance in units of the last place between two finite floats of the same sign.
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

using ExpSubFn = double (*)(float*, int64_t, float);
using SwigluFn = void (*)(float*, const float*, int64_t);

void check_exp_range(ExpSubFn exp_sub) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> ud(-110.0f, 95.0f);
  std::vector<float> x(100003);
  for (float& v : x) v = ud(rng);
  std::vector<float> want = x, got = x;
  const double sum_want = kernels::ref::exp_sub(want.data(), static_cast<int64_t>(want.size()), 3.0f);
  const double sum_got = exp_sub(got.data(), static_cast<int64_t>(got.size()), 3.0f);
  int64_t worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_TRUE(std::isinf(got[i])) << x[i];
    } else if (want[i] < std::numeric_limits<float>::min()) {
      EXPECT_NEAR(got[i], want[i], 3e-45f) << x[i];  // subnormal results: absolute (2 ulp)
    } else {
      worst = std::max(worst, ulps(got[i], want[i]));
    }
  }
  EXPECT_LE(worst, 1);
  EXPECT_TRUE(std::isinf(sum_want) && std::isinf(sum_got));
}

void check_exp_special(ExpSubFn exp_sub) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f, -inf, 1.0f, -1.0f, 88.0f, -87.0f, -200.0f, 0.5f, 2.0f, -3.5f, 10.0f};
  for (int64_t n = 1; n <= static_cast<int64_t>(x.size()); ++n) {
    std::vector<float> want(x.begin(), x.begin() + n), got = want;
    const double sw = kernels::ref::exp_sub(want.data(), n, 0.0f);
    const double sg = exp_sub(got.data(), n, 0.0f);
    EXPECT_NEAR(sg, sw, 1e-6 * sw) << n;
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], want[i], 2.5e-7f * want[i]) << x[i];
  }
  std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN()};
  exp_sub(nan.data(), 1, 0.0f);
  EXPECT_TRUE(std::isnan(nan[0]));
}

void check_swiglu(SwigluFn swiglu) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (int64_t n : {1, 5, 15, 16, 17, 33, 1000, 8192, 8195}) {
    std::vector<float> gate(n), up(n);
    for (float& v : gate) v = nd(rng);
    for (float& v : up) v = nd(rng);
    gate[0] = -120.0f;  // exp(-g) overflows: silu -> -0
    if (n > 1) gate[1] = 120.0f;
    if (n > 2) gate[2] = std::numeric_limits<float>::infinity();
    if (n > 3) gate[3] = -88.5f;  // exp(88.5) near the float limit
    std::vector<float> want = gate, got = gate;
    kernels::ref::swiglu(want.data(), up.data(), n);
    swiglu(got.data(), up.data(), n);
    // Bit for bit: SwiGLU feeds the 8-bit quantizer of the down projection (kernels/exp_arm.h).
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), n * sizeof(float))) << n;
  }
}

// exp_arm (SwiGLU's exp, llama.cpp's algorithm) against std::exp in double: within 2.5 ulp (its
// stated bound is 1.45 ulp plus the final rounding; 2.04 measured)
// where the result is normal; 0 and inf beyond the range; NaN stays NaN.
TEST(Activations, ExpArmWithinTwoAndAHalfUlp) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-87.0f, 88.0f);
  for (int i = 0; i < 200000; ++i) {
    const float x = i % 2 ? u(rng) : std::normal_distribution<float>(0.0f, 3.0f)(rng);
    const double want = std::exp(static_cast<double>(x));
    const float got = kernels::exp_arm::scalar(x);
    const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
    ASSERT_LE(std::fabs(got - want), 2.5 * ulp) << x;
  }
  EXPECT_EQ(kernels::exp_arm::scalar(-200.0f), 0.0f);
  EXPECT_EQ(kernels::exp_arm::scalar(200.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(kernels::exp_arm::scalar(0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(kernels::exp_arm::scalar(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Activations, Avx512MatchesStdExp) {
  if (!cpu_features().has_avx512_set()) GTEST_SKIP() << "no AVX-512";
  check_exp_range(kernels::avx512::exp_sub);
  check_exp_special(kernels::avx512::exp_sub);
  check_swiglu(kernels::avx512::swiglu);
}

TEST(Activations, Avx2MatchesStdExp) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2";
  check_exp_range(kernels::avx2::exp_sub);
  check_exp_special(kernels::avx2::exp_sub);
  check_swiglu(kernels::avx2::swiglu);
}

}  // namespace
}  // namespace ll3
