// W8A8 (kernels/w8a8.h): every kernel this CPU has (AVX-512 VNNI, AVX2, the scalar one over the
// packed layout, the dispatcher) equals the reference over the plain row-major layout bit for bit
// (memcmp of the floats: the int32 sums are exact, the two float multiplies the same), on random
// non-zero data at several shapes, with a row0 other than 0 and strides wider than the rows; the
// activation quantizers agree bit for bit across the ISAs, ties and clamping included; and the
// dequantized product is the float product of the dequantized inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/w8a8.h"

namespace ll3 {
namespace {

namespace k = kernels;

using GemmFn = void (*)(const void*, const float*, int64_t, int64_t, const int8_t*, size_t, const float*, int64_t,
                        int64_t, float*, size_t);
using StaticFn = void (*)(const float*, int64_t, float, int8_t*);
using DynamicFn = float (*)(const float*, int64_t, int8_t*);

struct Isa {
  const char* name;
  bool available;
  GemmFn gemm;
  StaticFn quantize_static;
  DynamicFn quantize_dynamic;
};

Isa avx512_isa() {
  return {"avx512", cpu_features().has_avx512_set(), k::avx512::w8a8_gemm, k::avx512::w8a8_quantize_static,
          k::avx512::w8a8_quantize_dynamic};
}
Isa avx2_isa() {
  return {"avx2", cpu_features().has_avx2_set(), k::avx2::w8a8_gemm, k::avx2::w8a8_quantize_static,
          k::avx2::w8a8_quantize_dynamic};
}
Isa scalar_isa() {
  return {"scalar", true, k::ref::w8a8_gemm_packed, k::ref::w8a8_quantize_static, k::ref::w8a8_quantize_dynamic};
}
Isa dispatch_isa() {
  return {"dispatch", true, k::w8a8_gemm, k::w8a8_quantize_static, k::w8a8_quantize_dynamic};
}

// n int8 values in -127..127, none zero (a zero would hide a lost product).
std::vector<int8_t> random_int8(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-127, 126);
  std::vector<int8_t> v(n);
  for (int8_t& x : v) {
    const int r = d(rng);
    x = static_cast<int8_t>(r >= 0 ? r + 1 : r);
  }
  return v;
}

std::vector<float> random_scales(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-12.0f, -2.0f);  // 2^-12 .. 2^-2, never round
  std::vector<float> v(n);
  for (float& s : v) s = std::exp2(d(rng)) * 1.37f;
  return v;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// The product of rows row0 .. row0 + n_rows - 1 of w (total_rows x kk) and n_x activation rows
// through isa's kernel on the packed layout against the reference, bit for bit; the outputs of
// other rows and the stride's padding stay untouched.
void expect_gemm_equal(const Isa& isa, const std::vector<int8_t>& w, const std::vector<float>& ws, int64_t total_rows,
                       int64_t row0, int64_t n_rows, const std::vector<int8_t>& x, size_t x_stride,
                       const std::vector<float>& xs, int64_t n_x, int64_t kk) {
  SCOPED_TRACE(testing::Message() << isa.name << " rows " << row0 << "+" << n_rows << " k " << kk << " n_x " << n_x);
  std::vector<uint8_t> packed(k::w8a8_packed_bytes(total_rows, kk));
  k::w8a8_pack(w.data(), total_rows, kk, packed.data());
  const size_t y_stride = static_cast<size_t>(total_rows + 5);
  const float sentinel = -1234.5f;
  std::vector<float> want(y_stride * n_x, sentinel), got(y_stride * n_x, sentinel);
  k::ref::w8a8_gemm(w.data(), ws.data(), row0, n_rows, x.data(), x_stride, xs.data(), n_x, kk, want.data(), y_stride);
  isa.gemm(packed.data(), ws.data(), row0, n_rows, x.data(), x_stride, xs.data(), n_x, kk, got.data(), y_stride);
  ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
  // Only the rows asked for are written (the reference's, hence the kernel's too).
  for (int64_t t = 0; t < n_x; ++t) {
    for (size_t r = 0; r < y_stride; ++r) {
      const bool inside = static_cast<int64_t>(r) >= row0 && static_cast<int64_t>(r) < row0 + n_rows;
      if (!inside) {
        ASSERT_EQ(sentinel, got[t * y_stride + r]) << "row " << r << " written";
      }
    }
  }
}

void check_random_shapes(const Isa& isa) {
  if (!isa.available) GTEST_SKIP() << "no " << isa.name << " on this CPU";
  uint32_t seed = 1;
  for (int64_t n_rows : {16, 48, 256}) {
    for (int64_t kk : {64, 192, 2048}) {
      const int64_t row0 = n_rows == 48 ? 16 : 32, total = row0 + n_rows + 16;
      const std::vector<int8_t> w = random_int8(static_cast<size_t>(total * kk), seed++);
      const std::vector<float> ws = random_scales(static_cast<size_t>(total), seed++);
      for (int64_t n_x : {1, 3, 17, 128}) {
        const size_t x_stride = static_cast<size_t>(kk + 64 + 4);  // wider than the row, not 64-aligned
        const std::vector<int8_t> x = random_int8(x_stride * n_x, seed++);
        const std::vector<float> xs = random_scales(static_cast<size_t>(n_x), seed++);
        expect_gemm_equal(isa, w, ws, total, row0, n_rows, x, x_stride, xs, n_x, kk);
        if (testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(W8A8, GemmAvx512MatchesReference) { check_random_shapes(avx512_isa()); }
TEST(W8A8, GemmAvx2MatchesReference) { check_random_shapes(avx2_isa()); }
TEST(W8A8, GemmScalarPackedMatchesReference) { check_random_shapes(scalar_isa()); }
TEST(W8A8, GemmDispatchMatchesReference) { check_random_shapes(dispatch_isa()); }

// All +-127: the largest sums of either sign, at the longest row the kernels take.
TEST(W8A8, GemmExtremeValues) {
  for (const Isa& isa : {avx512_isa(), avx2_isa(), scalar_isa(), dispatch_isa()}) {
    if (!isa.available) continue;
    for (int64_t kk : {int64_t{2048}, k::kW8A8MaxK}) {
      const int64_t rows = 48, n_x = 4;
      std::vector<int8_t> w(static_cast<size_t>(rows * kk)), x(static_cast<size_t>(n_x * kk));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < kk; ++i) {
          // Rows: all +127, all -127, alternating; the third panel mixed by column.
          const int8_t v = r % 3 == 0 ? 127 : r % 3 == 1 ? -127 : ((i + r) % 2 ? 127 : -127);
          w[r * kk + i] = v;
        }
      }
      for (int64_t t = 0; t < n_x; ++t) {
        for (int64_t i = 0; i < kk; ++i) x[t * kk + i] = t == 0 ? 127 : t == 1 ? -127 : ((i + t) % 2 ? 127 : -127);
      }
      const std::vector<float> ws = random_scales(rows, 7), xs = random_scales(n_x, 8);
      expect_gemm_equal(isa, w, ws, rows, 16, 32, x, static_cast<size_t>(kk), xs, n_x, kk);
      expect_gemm_equal(isa, w, ws, rows, 0, rows, x, static_cast<size_t>(kk), xs, n_x, kk);
      // The exact value of the largest sum: 127 * 127 * k, times the scales.
      std::vector<float> y(static_cast<size_t>(n_x * rows));
      std::vector<uint8_t> packed(k::w8a8_packed_bytes(rows, kk));
      k::w8a8_pack(w.data(), rows, kk, packed.data());
      isa.gemm(packed.data(), ws.data(), 0, rows, x.data(), static_cast<size_t>(kk), xs.data(), n_x, kk, y.data(), rows);
      EXPECT_EQ(static_cast<float>(127 * 127 * kk) * (ws[0] * xs[0]), y[0]) << isa.name;
      EXPECT_EQ(static_cast<float>(-127 * 127 * kk) * (ws[1] * xs[0]), y[1]) << isa.name;
    }
  }
}

TEST(W8A8, PackUnpackRoundTrip) {
  const int64_t rows = 32, kk = 192;
  const std::vector<int8_t> w = random_int8(rows * kk, 3);
  std::vector<uint8_t> packed(k::w8a8_packed_bytes(rows, kk));
  k::w8a8_pack(w.data(), rows, kk, packed.data());
  std::vector<int8_t> row(kk);
  for (int64_t r = 0; r < rows; ++r) {
    k::w8a8_unpack_row(packed.data(), r, kk, row.data());
    ASSERT_EQ(0, std::memcmp(row.data(), w.data() + r * kk, kk)) << r;
  }
}

// The rule itself on hand-picked values: ties to even, the clamp at +-127, NaN to +127.
TEST(W8A8, QuantizeStaticRule) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -126.5f, 127.4f, 127.6f,
                                200.0f, -200.0f, 1e30f, -1e30f, inf, -inf, std::nanf(""), 0.0f, -0.0f, 3.49f};
  const std::vector<int> want = {0, 2, 2, 0, -2, -2, 126, -126, 127, 127, 127, -127, 127, -127, 127, -127, 127, 0, 0, 3};
  for (const Isa& isa : {avx512_isa(), avx2_isa(), scalar_isa(), dispatch_isa()}) {
    if (!isa.available) continue;
    std::vector<int8_t> q(x.size());
    isa.quantize_static(x.data(), static_cast<int64_t>(x.size()), 1.0f, q.data());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(want[i], q[i]) << isa.name << " x " << x[i];
    // Ties at scale 0.5 (inv 2): 0.25 -> 0.5 -> 0, 0.75 -> 1.5 -> 2.
    const float t[2] = {0.25f, 0.75f};
    int8_t tq[2];
    isa.quantize_static(t, 2, 0.5f, tq);
    EXPECT_EQ(0, tq[0]) << isa.name;
    EXPECT_EQ(2, tq[1]) << isa.name;
  }
}

// Random rows (many values on exact halves after the multiply) at lengths with every tail.
TEST(W8A8, QuantizersBitIdenticalAcrossIsas) {
  const Isa ref = scalar_isa();
  uint32_t seed = 100;
  for (int64_t n : {1, 7, 15, 16, 17, 31, 33, 63, 64, 70, 1000, 2048}) {
    std::vector<float> x = random_floats(static_cast<size_t>(n), seed++, 40.0f);
    // Every third value an exact tie at scale 0.25 (inv 4): (m + 0.5) / 4.
    for (int64_t i = 0; i < n; i += 3) x[i] = (std::round(x[i]) + 0.5f) / 4.0f;
    for (const float scale : {0.25f, 0.3f, 1.0f / 127.0f}) {
      std::vector<int8_t> want(n), got(n);
      ref.quantize_static(x.data(), n, scale, want.data());
      for (const Isa& isa : {avx512_isa(), avx2_isa(), dispatch_isa()}) {
        if (!isa.available) continue;
        isa.quantize_static(x.data(), n, scale, got.data());
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), n)) << isa.name << " n " << n << " scale " << scale;
      }
    }
    std::vector<int8_t> want(n), got(n);
    const float want_scale = ref.quantize_dynamic(x.data(), n, want.data());
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    EXPECT_EQ(amax / 127.0f, want_scale);
    for (const Isa& isa : {avx512_isa(), avx2_isa(), dispatch_isa()}) {
      if (!isa.available) continue;
      EXPECT_EQ(want_scale, isa.quantize_dynamic(x.data(), n, got.data())) << isa.name;
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), n)) << isa.name << " n " << n;
    }
    // The largest |x| lands on +-127.
    int max_abs = 0;
    for (int8_t q : want) max_abs = std::max(max_abs, std::abs(static_cast<int>(q)));
    EXPECT_EQ(127, max_abs);
  }
}

TEST(W8A8, DynamicScaleOfZeroRow) {
  for (const Isa& isa : {avx512_isa(), avx2_isa(), scalar_isa(), dispatch_isa()}) {
    if (!isa.available) continue;
    for (int64_t n : {5, 64, 100}) {
      std::vector<float> x(static_cast<size_t>(n), 0.0f);
      x[0] = -0.0f;
      std::vector<int8_t> q(static_cast<size_t>(n), 99);
      EXPECT_EQ(1.0f, isa.quantize_dynamic(x.data(), n, q.data())) << isa.name;
      for (int8_t v : q) EXPECT_EQ(0, v) << isa.name;
      // Values so small that amax / 127 is subnormal: the same.
      x[n / 2] = 1e-38f;
      EXPECT_EQ(1.0f, isa.quantize_dynamic(x.data(), n, q.data())) << isa.name;
      for (int8_t v : q) EXPECT_EQ(0, v) << isa.name;
    }
  }
}

// The dequantized product is the float product of the dequantized inputs (the formula), and
// near the product of the unquantized floats (the quantization error of 8 bits).
TEST(W8A8, DequantizedProductMatchesFloat) {
  const int64_t rows = 64, kk = 512, n_x = 5;
  const std::vector<float> wf = random_floats(rows * kk, 11, 0.02f), xf = random_floats(n_x * kk, 12, 1.0f);
  std::vector<int8_t> wq(rows * kk), xq(n_x * kk);
  std::vector<float> ws(rows), xs(n_x);
  for (int64_t r = 0; r < rows; ++r) ws[r] = k::ref::w8a8_quantize_dynamic(wf.data() + r * kk, kk, wq.data() + r * kk);
  const float static_scale = 4.0f / 127.0f;  // a calibrated scale: |x| up to 4 sigma
  for (int64_t t = 0; t < n_x; ++t) {
    if (t % 2 == 0) {
      xs[t] = k::w8a8_quantize_dynamic(xf.data() + t * kk, kk, xq.data() + t * kk);
    } else {
      xs[t] = static_scale;
      k::w8a8_quantize_static(xf.data() + t * kk, kk, static_scale, xq.data() + t * kk);
    }
  }
  std::vector<uint8_t> packed(k::w8a8_packed_bytes(rows, kk));
  k::w8a8_pack(wq.data(), rows, kk, packed.data());
  std::vector<float> y(n_x * rows);
  k::w8a8_gemm(packed.data(), ws.data(), 0, rows, xq.data(), kk, xs.data(), n_x, kk, y.data(), rows);
  for (int64_t t = 0; t < n_x; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double deq = 0, exact = 0, mag = 0;
      for (int64_t i = 0; i < kk; ++i) {
        deq += (static_cast<double>(wq[r * kk + i]) * ws[r]) * (static_cast<double>(xq[t * kk + i]) * xs[t]);
        exact += double{wf[r * kk + i]} * xf[t * kk + i];
        mag += std::fabs(double{wf[r * kk + i]} * xf[t * kk + i]);
      }
      const double got = y[t * rows + r];
      EXPECT_NEAR(deq, got, 1e-6 * mag + 1e-12) << r << " " << t;
      EXPECT_NEAR(exact, got, 0.02 * mag) << r << " " << t;
    }
  }
}

}  // namespace
}  // namespace ll3
