// F32 / F16 / BF16 row kernels and the half-precision conversions: every SIMD version against
// its scalar reference on random data at odd sizes.
#include <gtest/gtest.h>

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/cpu_features.h"
#include "core/half.h"
#include "core/aligned.h"
#include "kernels/float_dot_order.h"
#include "kernels/float_kernels.h"
#include "kernels/gemm_f32.h"
#include "kernels/stream_read.h"

namespace ll3 {
namespace {

using DotFn = float (*)(const void*, const float*, int64_t);

std::vector<uint16_t> to_f16(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  kernels::ref::f16_from_float(x.data(), h.data(), static_cast<int64_t>(x.size()));
  return h;
}
std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  kernels::ref::bf16_from_float(x.data(), h.data(), static_cast<int64_t>(x.size()));
  return h;
}

void check_dots(DotFn f32, DotFn f16, DotFn bf16) {
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t n : {1, 7, 8, 15, 16, 17, 31, 32, 33, 100, 1000, 4099}) {
    std::vector<float> w(n), x(n);
    for (float& v : w) v = nd(rng);
    for (float& v : x) v = nd(rng);
    // The same order of operations (kernels/float_dot_order.h), so the same bits.
    EXPECT_EQ(f32(w.data(), x.data(), n), kernels::ref::f32_dot(w.data(), x.data(), n)) << n;
    auto h = to_f16(w);
    EXPECT_EQ(f16(h.data(), x.data(), n), kernels::ref::f16_dot(h.data(), x.data(), n)) << n;
    auto b = to_bf16(w);
    EXPECT_EQ(bf16(b.data(), x.data(), n), kernels::ref::bf16_dot(b.data(), x.data(), n)) << n;
  }
}

TEST(FloatKernels, Avx2DotsMatchReference) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2";
  check_dots(kernels::avx2::f32_dot, kernels::avx2::f16_dot, kernels::avx2::bf16_dot);
}

TEST(FloatKernels, Avx512DotsMatchReference) {
  if (!cpu_features().has_avx512_set()) GTEST_SKIP() << "no AVX-512";
  check_dots(kernels::avx512::f32_dot, kernels::avx512::f16_dot, kernels::avx512::bf16_dot);
}

using RowsFn = void (*)(const void*, size_t, int64_t, const float*, int64_t, float*);
struct RowsKernels {
  RowsFn f32, f16, bf16;
  DotFn one_f32, one_f16, one_bf16;
};

// The decode kernel of several rows at once gives each row the bits of the one-row kernel
// (which the prompt GEMM matches too: kernels/float_dot_order.h), and the reference's value.
void check_rows_at_once(const RowsKernels& k) {
  std::mt19937 rng(23);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t n : {1, 17, 32, 100, 2048, 4099}) {
    for (int64_t nrows : {1, 3, 4, 5, 9, 16}) {
      std::vector<float> w(static_cast<size_t>(nrows * n)), x(static_cast<size_t>(n));
      for (float& v : w) v = nd(rng);
      for (float& v : x) v = nd(rng);
      const std::vector<uint16_t> h = to_f16(w), b = to_bf16(w);
      struct Case {
        const char* name;
        const void* rows;
        size_t elem;
        RowsFn many;
        DotFn one, ref;
      } cases[] = {{"f32", w.data(), 4, k.f32, k.one_f32, kernels::ref::f32_dot},
                   {"f16", h.data(), 2, k.f16, k.one_f16, kernels::ref::f16_dot},
                   {"bf16", b.data(), 2, k.bf16, k.one_bf16, kernels::ref::bf16_dot}};
      for (const Case& c : cases) {
        std::vector<float> y(static_cast<size_t>(nrows));
        c.many(c.rows, n * c.elem, nrows, x.data(), n, y.data());
        for (int64_t r = 0; r < nrows; ++r) {
          const void* row = static_cast<const uint8_t*>(c.rows) + r * n * c.elem;
          ASSERT_EQ(y[r], c.one(row, x.data(), n)) << c.name << " n " << n << " rows " << nrows << " row " << r;
          EXPECT_NEAR(y[r], c.ref(row, x.data(), n), 1e-4f * std::sqrt(static_cast<float>(n))) << c.name;
        }
      }
    }
  }
}

// The BF16 prompt GEMM's `vdpbf16ps` tiles give the pair order's bits (two fmas per lane, the
// odd element first), with operands over 40 binades: what the instruction does on this CPU,
// not only what its manual says.
TEST(FloatKernels, Bf16PairTilesGiveThePairOrderBits) {
  const kernels::GemmF32Lanes* lanes = kernels::gemm_f32_lanes();
  if (lanes == nullptr) GTEST_SKIP() << "no AVX-512 (BF16) kernels on this CPU (or LL3_CPU caps them)";
  std::mt19937 rng(31);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> e(-20, 20);
  const int64_t k = 512, rows = 32, n = 13;  // two tiles, the second one partial
  std::vector<uint16_t> w(rows * k);
  std::vector<float> x(n * k), xd(n * k);
  for (uint16_t& v : w) v = f32_to_bf16(std::ldexp(nd(rng), e(rng)));
  for (float& v : x) v = bf16_to_f32(f32_to_bf16(std::ldexp(nd(rng), e(rng))));
  for (int64_t t = 0; t < n; ++t) kernels::bf16_pairs_deinterleave(&x[t * k], &xd[t * k], k);
  AlignedVector<float> wp(kernels::lanes_w_floats(rows, k)), xp(kernels::lanes_x_floats(n, k));
  std::vector<float> y(n * rows);
  lanes->pack_x_pairs(xd.data(), k, n, k, xp.data());
  lanes->pack_w_pairs(w.data(), k * 2, rows, k, wp.data());
  lanes->gemm_pairs(wp.data(), rows, xp.data(), n, k, y.data(), rows);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(y[t * rows + r], kernels::ref::bf16_dot(&w[r * k], &x[t * k], k)) << "token " << t << " row " << r;
    }
  }
}

TEST(FloatKernels, Avx512RowsAtOnceEqualOneRowAtATime) {
  if (!cpu_features().has_avx512_set()) GTEST_SKIP() << "no AVX-512";
  check_rows_at_once({kernels::avx512::f32_dot_wrows, kernels::avx512::f16_dot_wrows, kernels::avx512::bf16_dot_wrows,
                      kernels::avx512::f32_dot, kernels::avx512::f16_dot, kernels::avx512::bf16_dot});
}

TEST(FloatKernels, Avx2RowsAtOnceEqualOneRowAtATime) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2";
  check_rows_at_once({kernels::avx2::f32_dot_wrows, kernels::avx2::f16_dot_wrows, kernels::avx2::bf16_dot_wrows,
                      kernels::avx2::f32_dot, kernels::avx2::f16_dot, kernels::avx2::bf16_dot});
}

TEST(FloatKernels, Avx2F16ToFloatMatchesReference) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int64_t n : {1, 8, 13, 64, 67}) {
    std::vector<float> x(n);
    for (float& v : x) v = nd(rng);
    auto h = to_f16(x);
    std::vector<float> a(n), b(n);
    kernels::avx2::f16_to_float(h.data(), a.data(), n);
    kernels::ref::f16_to_float(h.data(), b.data(), n);
    EXPECT_EQ(a, b) << n;  // conversion is exact
  }
}

// BF16 rows in the pair order (TypeTraits::to_float_pairs): every version, bit for bit.
TEST(FloatKernels, Bf16ToFloatPairsMatchesReference) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (int64_t n : {32, 64, 96, 2048}) {
    std::vector<float> x(n);
    for (float& v : x) v = nd(rng);
    auto b = to_bf16(x);
    std::vector<float> want(n), got(n, NAN);
    kernels::bf16_row_to_pairs(b.data(), want.data(), n);
    kernels::avx2::bf16_to_float_pairs(b.data(), got.data(), n);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), n * sizeof(float))) << "avx2 " << n;
    if (cpu_features().has_avx512_set()) {
      std::fill(got.begin(), got.end(), NAN);
      kernels::avx512::bf16_to_float_pairs(b.data(), got.data(), n);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), n * sizeof(float))) << "avx512 " << n;
    }
    EXPECT_EQ(want[0], bf16_to_f32(b[1]));   // the odd element first
    EXPECT_EQ(want[16], bf16_to_f32(b[0]));  // then the even ones
  }
}

TEST(FloatKernels, Avx512ToFloatIsExact) {
  if (!cpu_features().has_avx512_set()) GTEST_SKIP() << "no AVX-512";
  std::mt19937 rng(6);
  std::normal_distribution<float> nd(0.0f, 5.0f);
  for (int64_t n : {1, 15, 16, 17, 64, 77}) {
    std::vector<float> x(n);
    for (float& v : x) v = nd(rng);
    auto h = to_f16(x);
    auto b = to_bf16(x);
    std::vector<float> a(n), r(n);
    kernels::avx512::f16_to_float(h.data(), a.data(), n);
    kernels::ref::f16_to_float(h.data(), r.data(), n);
    EXPECT_EQ(a, r) << n;
    kernels::avx512::bf16_to_float(b.data(), a.data(), n);
    kernels::ref::bf16_to_float(b.data(), r.data(), n);
    EXPECT_EQ(a, r) << n;
  }
}

// F32 -> F16 rows (the F16 KV cache's store): the same bits as the reference for every input,
// NaNs (one in a group sends the group to the reference) and values near the F16 range's ends
// included.
void check_f16_from_float(void (*f)(const float*, void*, int64_t)) {
  std::mt19937 rng(21);
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 33, 100, 4099}) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits = static_cast<uint32_t>(rng());
      if (i % 3 == 1) bits = (bits & 0x80000000u) | (0x33000000u + bits % 0x15000000u);  // subnormal to overflow
      if (i % 97 == 5) bits |= 0x7f800000u;  // NaN or infinity
      std::memcpy(&x[i], &bits, 4);
    }
    std::vector<uint16_t> a(n), r(n);
    f(x.data(), a.data(), n);
    kernels::ref::f16_from_float(x.data(), r.data(), n);
    EXPECT_EQ(a, r) << n;
  }
}

TEST(FloatKernels, Avx2F16FromFloatMatchesReference) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2";
  check_f16_from_float(kernels::avx2::f16_from_float);
}

TEST(FloatKernels, Avx512F16FromFloatMatchesReference) {
  if (!cpu_features().has_avx512_set()) GTEST_SKIP() << "no AVX-512";
  check_f16_from_float(kernels::avx512::f16_from_float);
}

// The scalar half conversions against the hardware's (F16C), over every half value and many
// floats including subnormals, ties and overflow.
TEST(HalfConversions, MatchHardwareRounding) {
  if (!cpu_features().f16c) GTEST_SKIP() << "no F16C";
  for (uint32_t h = 0; h < 65536; ++h) {
    float hw = _cvtsh_ss(static_cast<unsigned short>(h));
    float sw = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(hw)) {
      EXPECT_TRUE(std::isnan(sw));
    } else {
      ASSERT_EQ(std::memcmp(&hw, &sw, 4), 0) << std::hex << h;
    }
  }
  std::mt19937 rng(9);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t bits = static_cast<uint32_t>(rng());
    if (i % 2) bits = (bits & 0x80000000u) | (0x33000000u + bits % 0x15000000u);  // near the f16 range
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)) << std::hex << bits;
  }
}

TEST(HalfConversions, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  float f;
  uint32_t bits = 0x3f808000u;  // exactly halfway between 0x3f80 and 0x3f81: even stays
  std::memcpy(&f, &bits, 4);
  EXPECT_EQ(f32_to_bf16(f), 0x3f80);
  bits = 0x3f818000u;  // halfway between 0x3f81 and 0x3f82: rounds up to even
  std::memcpy(&f, &bits, 4);
  EXPECT_EQ(f32_to_bf16(f), 0x3f82);
  EXPECT_EQ(bf16_to_f32(0xc040), -3.0f);
}

// The roofline's streaming read: every version, with and without prefetch, folds every word of
// the buffer (a flipped byte anywhere changes the result) into the xor of its 8-byte words, as the
// reference does.
TEST(StreamRead, EveryVersionReadsEveryByte) {
  constexpr size_t kBytes = 64 * 1024 + 256;
  AlignedVector<uint8_t> buf(kBytes);  // the SIMD versions use aligned loads
  std::mt19937 rng(5);
  for (size_t i = 0; i < kBytes; ++i) buf.data()[i] = static_cast<uint8_t>(rng());
  const uint64_t want = kernels::ref::stream_read(buf.data(), kBytes);
  for (size_t ahead : kernels::kStreamReadAheads) {
    EXPECT_EQ(kernels::stream_read(buf.data(), kBytes, ahead), want) << ahead;
    if (cpu_features().has_avx2_set()) EXPECT_EQ(kernels::avx2::stream_read(buf.data(), kBytes, ahead), want) << ahead;
    if (cpu_features().has_avx512_set()) EXPECT_EQ(kernels::avx512::stream_read(buf.data(), kBytes, ahead), want) << ahead;
  }
  for (size_t at : {size_t{0}, size_t{4097}, kBytes - 1}) {
    buf.data()[at] ^= 0x10;
    for (size_t ahead : kernels::kStreamReadAheads) EXPECT_NE(kernels::stream_read(buf.data(), kBytes, ahead), want) << at;
    buf.data()[at] ^= 0x10;
  }
}

}  // namespace
}  // namespace ll3
