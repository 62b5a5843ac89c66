// Reference quantizers: quantize random rows, dequantize, and bound the error per type; the dot
// product kernels agree with dequantize-then-dot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/half.h"
#include "kernels/quant_blocks.h"
#include "kernels/type_traits.h"

namespace ll3 {
namespace {

struct Case {
  DType type;
  double max_rel_rmse;  // RMS error / RMS of the data, Gaussian rows
};

// Bounds sit ~20% above what these (ggml's reference) quantizers reach on N(0,1) rows.
const Case kCases[] = {
    {DType::Q8_0, 0.0064}, {DType::Q4_0, 0.105}, {DType::Q4_1, 0.097}, {DType::Q5_0, 0.052},
    {DType::Q5_1, 0.047},  {DType::Q2_K, 0.36},  {DType::Q3_K, 0.18},  {DType::Q4_K, 0.087},
    {DType::Q5_K, 0.044},  {DType::Q6_K, 0.0215}, {DType::Q8_K, 0.0083},
};

std::vector<float> gaussian(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

class QuantRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(QuantRoundTrip, ErrorBound) {
  const Case c = GetParam();
  const TypeTraits* tt = type_traits_ref(c.type);
  ASSERT_NE(tt, nullptr);
  ASSERT_NE(tt->from_float, nullptr);
  const int64_t bs = dtype_info(c.type).block_size;
  const int64_t n = bs * 24;
  for (uint32_t seed : {1u, 2u, 3u}) {
    // Vary the scale per seed: the error is relative, so it must not depend on it.
    const float scale = seed == 1 ? 1.0f : seed == 2 ? 0.02f : 37.0f;
    std::vector<float> x = gaussian(n, seed, scale);
    std::vector<uint8_t> q(dtype_row_bytes(c.type, n));
    std::vector<float> y(n);
    tt->from_float(x.data(), q.data(), n);
    tt->to_float(q.data(), y.data(), n);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
      ref += double(x[i]) * x[i];
    }
    const double rel = std::sqrt(err / ref);
    EXPECT_LT(rel, c.max_rel_rmse) << dtype_name(c.type) << " seed " << seed;
    // A quantizer that did nothing useful would be far off; one that is exact is suspicious.
    EXPECT_GT(rel, 0.0) << dtype_name(c.type);

    // Dot with a random activation row: kernel vs dequantize-then-dot in double.
    std::vector<float> a = gaussian(n, seed + 100);
    double expect = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      expect += double(y[i]) * a[i];
      mag += std::fabs(double(y[i]) * a[i]);
    }
    EXPECT_NEAR(tt->dot_f32(q.data(), a.data(), n), expect, 1e-5 * mag + 1e-30);
  }
}

TEST_P(QuantRoundTrip, ZerosAndConstants) {
  const Case c = GetParam();
  const TypeTraits* tt = type_traits_ref(c.type);
  const int64_t n = dtype_info(c.type).block_size * 2;
  std::vector<uint8_t> q(dtype_row_bytes(c.type, n));
  std::vector<float> y(n);
  std::vector<float> zeros(n, 0.0f);
  tt->from_float(zeros.data(), q.data(), n);
  tt->to_float(q.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], 0.0f) << dtype_name(c.type) << " at " << i;
  // One block zero, one block with a single spike: the spike survives to within its scale's
  // f16 rounding, everything else stays near zero.
  std::vector<float> spike(n, 0.0f);
  spike[n / 2 + 5] = -3.5f;
  tt->from_float(spike.data(), q.data(), n);
  tt->to_float(q.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(y[i], spike[i], 3.5 * 0.01) << dtype_name(c.type) << " at " << i;
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(dtype_name(info.param.type));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantRoundTrip, ::testing::ValuesIn(kCases), case_name);

// Values that are already exactly representable come back unchanged from Q8_0 and Q4_0: the
// quantizer recovers the scale from the block's extreme value and the rounding of every value to
// its code is exact, so dequantize(quantize(x)) == x bit for bit, and quantizing that again gives
// the same bytes. Checked with the reference kernels and the dispatched (SIMD) ones.
void check_fixed_points(DType type, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  for (const TypeTraits* tt : {type_traits_ref(type), type_traits(type)}) {
    ASSERT_NE(tt, nullptr);
    const char* which = tt == type_traits_ref(type) ? " (reference)" : " (dispatched)";
    std::vector<uint8_t> q(dtype_row_bytes(type, n)), q2(q.size());
    std::vector<float> y(n, NAN);
    tt->from_float(x.data(), q.data(), n);
    tt->to_float(q.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i]) << dtype_name(type) << which << " at " << i;
    tt->from_float(y.data(), q2.data(), n);
    EXPECT_EQ(q2, q) << dtype_name(type) << which << ": quantizing the dequantized row changed its bytes";
  }
}

// f16-representable block scales of both signs over a wide range.
float block_scale(int64_t b) {
  const float mag[] = {0.01f, 0.37f, 1.0f, 1e-3f, 2.5f, 90.0f, 6.1e-5f, 0.0625f};
  const float d = mag[b % 8] * (1.0f + 0.01f * static_cast<float>(b));
  return f16_to_f32(f32_to_f16(b % 2 == 0 ? d : -d));
}

TEST(QuantRoundTrip, RepresentableValuesAreFixedPointsQ8_0) {
  std::mt19937 rng(7);
  const int64_t n = 32 * 16;
  std::vector<float> x(n);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float d = std::fabs(block_scale(b));  // Q8_0 keeps |extreme| / 127: the scale is positive
    for (int j = 0; j < 32; ++j) x[b * 32 + j] = d * (static_cast<int>(rng() % 255) - 127);
    x[b * 32 + 3] = (b % 3 == 0 ? -127 : 127) * d;  // the block's extreme, of either sign
  }
  check_fixed_points(DType::Q8_0, x);
}

// Q4_0 maps the value of largest magnitude, sign included, to code 0 (-8 x d): a block whose
// values are k x d for k in [-8, 7], with -8 x d the extreme, is exact. d < 0 puts the extreme on
// the positive side. Every block uses all 16 codes, so a wrong offset, nibble order or scale
// shows.
TEST(QuantRoundTrip, RepresentableValuesAreFixedPointsQ4_0) {
  std::mt19937 rng(8);
  const int64_t n = 32 * 16;
  std::vector<float> x(n);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float d = block_scale(b);
    std::vector<int> k(32);
    for (int j = 0; j < 32; ++j) k[j] = j % 16 - 8;
    std::shuffle(k.begin(), k.end(), rng);
    for (int j = 0; j < 32; ++j) x[b * 32 + j] = d * static_cast<float>(k[j]);
  }
  check_fixed_points(DType::Q4_0, x);
  // And the comparison above is exact, not one any input passes: a value off the grid comes
  // back moved, to its nearest code.
  std::vector<float> off = x;
  off[5] += 0.3f * block_scale(0);
  std::vector<uint8_t> q(dtype_row_bytes(DType::Q4_0, n));
  std::vector<float> y(n);
  type_traits_ref(DType::Q4_0)->from_float(off.data(), q.data(), n);
  type_traits_ref(DType::Q4_0)->to_float(q.data(), y.data(), n);
  EXPECT_NE(y[5], off[5]);
  EXPECT_EQ(y[5], x[5]);
}

}  // namespace
}  // namespace ll3
