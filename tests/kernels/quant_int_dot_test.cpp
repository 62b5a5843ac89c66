// The integer path: activations quantized to Q8_0 / Q8_1 / Q8_K, and every SIMD weight x
// activation dot against the reference (the dot of both dequantized rows), on random blocks at
// 1, a few and many blocks. Also: the activation quantizers keep their side sums consistent.
#include <gtest/gtest.h>

#include "quant_test_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/half.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_kernels.h"
#include "kernels/type_traits.h"

namespace ll3 {
namespace {

using DotQ = float (*)(const void*, const void*, int64_t);

struct IntKernels {
  DType type;
  DType act;
  std::vector<int> f16_fields;
  DotQ avx2;
  DotQ avx512;
};

#define LL3_IK(T, lower, A, act, ...) \
  IntKernels { DType::T, DType::A, {__VA_ARGS__}, kernels::avx2::lower##_dot_##act, kernels::avx512::lower##_dot_##act }

std::vector<IntKernels> all_int_kernels() {
  return {
      LL3_IK(Q4_0, q4_0, Q8_0, q8_0, 0),      LL3_IK(Q4_1, q4_1, Q8_1, q8_1, 0, 2),
      LL3_IK(Q5_0, q5_0, Q8_0, q8_0, 0),      LL3_IK(Q5_1, q5_1, Q8_1, q8_1, 0, 2),
      LL3_IK(Q8_0, q8_0, Q8_0, q8_0, 0),      LL3_IK(Q2_K, q2_k, Q8_K, q8_k, 80, 82),
      LL3_IK(Q3_K, q3_k, Q8_K, q8_k, 108),    LL3_IK(Q4_K, q4_k, Q8_K, q8_k, 0, 2),
      LL3_IK(Q5_K, q5_k, Q8_K, q8_k, 0, 2),   LL3_IK(Q6_K, q6_k, Q8_K, q8_k, 208),
  };
}

std::vector<uint8_t> random_weights(const IntKernels& k, int64_t n, std::mt19937& rng, bool quantized) {
  return test::random_quant_row(k.type, k.f16_fields, n, rng, quantized);
}

// The decode path's inputs: `rows` weight rows of n elements (every third quantized, the rest
// random bytes with sane f16 scales), `pad` bytes apart, and one quantized activation row.
struct WeightRowsCase {
  std::vector<uint8_t> w, xq;
  size_t stride = 0;
};
WeightRowsCase weight_rows_case(DType t, int64_t n, int64_t rows, size_t pad, std::mt19937& rng) {
  const std::vector<IntKernels> all = all_int_kernels();
  const auto k = std::find_if(all.begin(), all.end(), [&](const IntKernels& e) { return e.type == t; });
  EXPECT_NE(k, all.end()) << dtype_name(t);
  WeightRowsCase c;
  const size_t row_bytes = dtype_row_bytes(t, n);
  c.stride = row_bytes + pad;
  c.w.resize(c.stride * rows);
  for (int64_t r = 0; r < rows && k != all.end(); ++r) {
    const std::vector<uint8_t> row = random_weights(*k, n, rng, r % 3 == 0);
    std::memcpy(c.w.data() + r * c.stride, row.data(), row_bytes);
  }
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = g(rng);
  const DType act = type_traits_ref(t)->vec_dot_type;
  c.xq.resize(dtype_row_bytes(act, n));
  type_traits_ref(act)->from_float(x.data(), c.xq.data(), n);
  return c;
}

void check(const IntKernels& k, DotQ dot, const char* isa) {
  const TypeTraits* ref = type_traits_ref(k.type);
  ASSERT_EQ(ref->vec_dot_type, k.act);
  ASSERT_NE(ref->dot_q, nullptr);
  const TypeTraits* act = type_traits_ref(k.act);
  std::mt19937 rng(static_cast<uint32_t>(k.type) * 131u + 9);
  const int64_t bs = dtype_info(k.type).block_size;
  for (int64_t blocks : {1, 3, 7, 33}) {
    for (bool quantized : {false, true}) {
      SCOPED_TRACE(std::string(isa) + " " + std::string(dtype_name(k.type)) + " blocks " +
                   std::to_string(blocks) + (quantized ? " quantized" : " random bytes"));
      const int64_t n = bs * blocks;
      const std::vector<uint8_t> w = random_weights(k, n, rng, quantized);
      std::normal_distribution<float> g(0.0f, 1.0f);
      std::vector<float> x(n);
      for (float& v : x) v = g(rng);
      std::vector<uint8_t> xq(dtype_row_bytes(k.act, n));
      act->from_float(x.data(), xq.data(), n);

      std::vector<float> wf(n), xf(n);
      ref->to_float(w.data(), wf.data(), n);
      act->to_float(xq.data(), xf.data(), n);
      double exact = 0, mag = 0, exact_f32 = 0;
      for (int64_t i = 0; i < n; ++i) {
        exact += double(wf[i]) * xf[i];
        mag += std::fabs(double(wf[i]) * xf[i]);
        exact_f32 += double(wf[i]) * x[i];
      }
      const double tol = 4e-6 * mag + 1e-30;
      const float want = ref->dot_q(w.data(), xq.data(), n);
      EXPECT_NEAR(dot(w.data(), xq.data(), n), want, tol) << "SIMD";
      // Q8_1's stored sum s is rounded to f16, so the "_1" types sit a little off the exact dot.
      const bool uses_s = k.act == DType::Q8_1;
      EXPECT_NEAR(want, exact, uses_s ? 2e-3 * mag : tol) << "reference";
      // Against float activations only the activation rounding separates the two paths.
      EXPECT_NEAR(exact, exact_f32, 0.02 * mag) << "activation quantization error too large";
    }
  }
}

TEST(QuantIntDot, Avx2MatchesReference) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "CPU has no AVX2+FMA+F16C";
  for (const IntKernels& k : all_int_kernels()) check(k, k.avx2, "avx2");
}

TEST(QuantIntDot, Avx512MatchesReference) {
  if (!cpu_features().has_avx512_set()) GTEST_SKIP() << "CPU lacks the avx512 kernel set";
  for (const IntKernels& k : all_int_kernels()) check(k, k.avx512, "avx512");
}

TEST(QuantIntDot, DispatchedMatchesReference) {
  for (const IntKernels& k : all_int_kernels()) {
    const TypeTraits* t = type_traits(k.type);
    ASSERT_NE(t->dot_q, nullptr);
    ASSERT_EQ(t->vec_dot_type, k.act);
    check(k, t->dot_q, "dispatched");
  }
}

// dot_q_rows (one weight row against several activation rows) equals dot_q row by row, for
// every count of rows around the kernels' pass size (4), with a y stride.
void check_rows(DType type, bool reference) {
  const TypeTraits* t = reference ? type_traits_ref(type) : type_traits(type);
  ASSERT_NE(t->dot_q_rows, nullptr) << dtype_name(type);
  const TypeTraits* act = type_traits_ref(t->vec_dot_type);
  const int64_t n = dtype_info(type).block_size * 5;
  std::mt19937 rng(static_cast<uint32_t>(type) + 77);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> wf(n);
  for (float& v : wf) v = g(rng);
  std::vector<uint8_t> w(dtype_row_bytes(type, n));
  type_traits_ref(type)->from_float(wf.data(), w.data(), n);
  const int64_t max_nx = 9;
  const size_t stride = dtype_row_bytes(t->vec_dot_type, n) + 64;  // padded, like a scratch row
  std::vector<uint8_t> xq(stride * max_nx);
  std::vector<float> x(n);
  for (int64_t j = 0; j < max_nx; ++j) {
    for (float& v : x) v = g(rng);
    act->from_float(x.data(), xq.data() + j * stride, n);
  }
  for (int64_t nx = 1; nx <= max_nx; ++nx) {
    std::vector<float> y(nx * 3, -7.0f);
    t->dot_q_rows(w.data(), xq.data(), stride, nx, n, y.data(), 3);
    for (int64_t j = 0; j < nx; ++j) {
      const float want = t->dot_q(w.data(), xq.data() + j * stride, n);
      EXPECT_NEAR(y[j * 3], want, 1e-5f * (1 + std::fabs(want))) << dtype_name(type) << " nx " << nx << " row " << j;
      EXPECT_EQ(y[j * 3 + 1], -7.0f) << "wrote outside its stride";
    }
  }
}

TEST(QuantIntDot, RowsMatchSingleDots) {
  for (const IntKernels& k : all_int_kernels()) {
    check_rows(k.type, true);
    check_rows(k.type, false);
  }
}

struct RowKernel {
  DType type;
  void (*rows)(const void*, const void*, size_t, int64_t, int64_t, float*, size_t);
};

// The batched kernels against the reference dot, directly (not through the table).
void check_row_kernels(const std::vector<RowKernel>& cases) {
  for (const auto& c : cases) {
    const TypeTraits* ref = type_traits_ref(c.type);
    const int64_t n = dtype_info(c.type).block_size * 3;
    std::mt19937 rng(9);
    std::vector<uint8_t> w(dtype_row_bytes(c.type, n));
    for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
    const size_t bb = dtype_info(c.type).block_bytes;
    const int d_off = c.type == DType::Q6_K ? 208 : c.type == DType::Q3_K ? 108 : c.type == DType::Q2_K ? 80 : 0;
    for (int64_t blk = 0; blk < n / dtype_info(c.type).block_size; ++blk) {
      const uint16_t h = f32_to_f16(0.01f * (blk + 1));
      std::memcpy(w.data() + blk * bb + d_off, &h, 2);
      if (c.type == DType::Q4_K || c.type == DType::Q5_K) std::memcpy(w.data() + blk * bb + 2, &h, 2);
      if (c.type == DType::Q2_K) std::memcpy(w.data() + blk * bb + 82, &h, 2);
    }
    const size_t stride = dtype_row_bytes(ref->vec_dot_type, n);
    std::vector<uint8_t> xq(stride * 6);
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> x(n);
    for (int j = 0; j < 6; ++j) {
      for (float& v : x) v = g(rng);
      type_traits_ref(ref->vec_dot_type)->from_float(x.data(), xq.data() + j * stride, n);
    }
    std::vector<float> y(6), wf(n), af(n);
    c.rows(w.data(), xq.data(), stride, 6, n, y.data(), 1);
    ref->to_float(w.data(), wf.data(), n);
    for (int j = 0; j < 6; ++j) {
      type_traits_ref(ref->vec_dot_type)->to_float(xq.data() + j * stride, af.data(), n);
      double mag = 0;
      for (int64_t i = 0; i < n; ++i) mag += std::fabs(double(wf[i]) * af[i]);
      const float want = ref->dot_q(w.data(), xq.data() + j * stride, n);
      EXPECT_NEAR(y[j], want, 4e-6 * mag) << dtype_name(c.type) << " row " << j;
    }
  }
}

TEST(QuantIntDot, Avx512RowKernels) {
  if (!cpu_features().has_avx512_set()) GTEST_SKIP() << "CPU lacks the avx512 kernel set";
  check_row_kernels({{DType::Q2_K, kernels::avx512::q2_k_dot_q8_k_rows},
                     {DType::Q3_K, kernels::avx512::q3_k_dot_q8_k_rows},
                     {DType::Q4_0, kernels::avx512::q4_0_dot_q8_0_rows},
                     {DType::Q4_K, kernels::avx512::q4_k_dot_q8_k_rows},
                     {DType::Q5_K, kernels::avx512::q5_k_dot_q8_k_rows},
                     {DType::Q6_K, kernels::avx512::q6_k_dot_q8_k_rows},
                     {DType::Q8_0, kernels::avx512::q8_0_dot_q8_0_rows}});
}

TEST(QuantIntDot, Avx2RowKernels) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2";
  check_row_kernels({{DType::Q4_K, kernels::avx2::q4_k_dot_q8_k_rows},
                     {DType::Q6_K, kernels::avx2::q6_k_dot_q8_k_rows},
                     {DType::Q8_0, kernels::avx2::q8_0_dot_q8_0_rows}});
}

// Q4_0's decode kernel (AVX-512 only: 16 rows per pass in the lanes of one vector) gives every
// row the bits of the reference dot: row counts around the pass, odd block counts, rows padded
// apart; and the dispatch table holds it, or nothing below AVX-512 (the rows kernels decode).
TEST(QuantIntDot, Q4_0WeightRowsGiveTheReferenceBits) {
  if (!cpu_features().has_avx512_set()) {
    EXPECT_EQ(type_traits(DType::Q4_0)->dot_q_wrows, nullptr) << "below AVX-512 Q4_0 decodes through its rows kernels";
    return;
  }
  const TypeTraits* ref = type_traits_ref(DType::Q4_0);
  ASSERT_EQ(type_traits(DType::Q4_0)->dot_q_wrows, kernels::avx512::q4_0_dot_q8_0_wrows);
  std::mt19937 rng(41);
  for (int64_t blocks : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{257}}) {
    const int64_t n = 32 * blocks, max_rows = 37;
    const WeightRowsCase c = weight_rows_case(DType::Q4_0, n, max_rows, 18 * 3, rng);
    int checked = 0;
    for (int64_t nrows : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{32}, max_rows}) {
      std::vector<float> y(nrows + 1, -7.0f);
      kernels::avx512::q4_0_dot_q8_0_wrows(c.w.data(), c.stride, nrows, c.xq.data(), n, y.data());
      EXPECT_EQ(y[nrows], -7.0f) << "wrote past nrows";
      for (int64_t r = 0; r < nrows; ++r, ++checked) {
        const float want = ref->dot_q(c.w.data() + r * c.stride, c.xq.data(), n);
        ASSERT_EQ(std::memcmp(&y[r], &want, sizeof(float)), 0)
            << "blocks " << blocks << " nrows " << nrows << " row " << r << ": " << y[r] << " vs " << want;
      }
    }
    EXPECT_EQ(checked, 1 + 15 + 16 + 17 + 32 + 37);
  }
}

// dot_q_wrows (several weight rows against one activation row, the decode path) against the
// reference dot row by row: random bytes (with sane f16 scales) and quantized rows, odd block
// counts, row counts around the kernels' passes and chunks, rows padded apart.
TEST(QuantIntDot, WeightRowsMatchReference) {
  struct {
    DType type;
    void (*avx512)(const void*, size_t, int64_t, const void*, int64_t, float*);
  } cases[] = {{DType::Q4_K, kernels::avx512::q4_k_dot_q8_k_wrows},
               {DType::Q6_K, kernels::avx512::q6_k_dot_q8_k_wrows},
               {DType::Q8_0, kernels::avx512::q8_0_dot_q8_0_wrows}};
  const bool has_avx512 = cpu_features().has_avx512_set();
  for (const auto& c : cases) {
    const TypeTraits* ref = type_traits_ref(c.type);
    const TypeTraits* act = type_traits_ref(ref->vec_dot_type);
    ASSERT_NE(ref->dot_q_wrows, nullptr);
    ASSERT_NE(type_traits(c.type)->dot_q_wrows, nullptr);
    std::mt19937 rng(static_cast<uint32_t>(c.type) * 7u + 5);
    const int64_t bs = dtype_info(c.type).block_size;
    // The last: ~35k elements, longer than one segment of the Q8_0 decode kernel (1024 blocks).
    for (int64_t blocks : {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{37}, 1100 * 32 / bs}) {
      const int64_t n = bs * blocks, max_rows = 21;
      const WeightRowsCase wc = weight_rows_case(c.type, n, max_rows, 48, rng);
      const std::vector<uint8_t>& w = wc.w;
      const std::vector<uint8_t>& xq = wc.xq;
      const size_t stride = wc.stride;
      std::vector<float> wf(n), af(n);
      act->to_float(xq.data(), af.data(), n);
      for (int64_t nrows : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{16}, max_rows}) {
        for (int impl = 0; impl < 3; ++impl) {
          if (impl == 2 && !has_avx512) continue;
          auto* fn = impl == 0 ? ref->dot_q_wrows : impl == 1 ? type_traits(c.type)->dot_q_wrows : c.avx512;
          std::vector<float> y(nrows + 1, -7.0f);
          fn(w.data(), stride, nrows, xq.data(), n, y.data());
          EXPECT_EQ(y[nrows], -7.0f) << "wrote past nrows";
          for (int64_t r = 0; r < nrows; ++r) {
            ref->to_float(w.data() + r * stride, wf.data(), n);
            double mag = 0;
            for (int64_t i = 0; i < n; ++i) mag += std::fabs(double(wf[i]) * af[i]);
            const float want = ref->dot_q(w.data() + r * stride, xq.data(), n);
            if (impl == 0) {
              EXPECT_EQ(y[r], want) << "reference must loop dot_q";
            } else {
              EXPECT_NEAR(y[r], want, 4e-6 * mag + 1e-30)
                  << dtype_name(c.type) << " impl " << impl << " blocks " << blocks << " nrows " << nrows << " row " << r;
            }
          }
        }
      }
    }
  }
}

// The SIMD activation quantizers give the reference's bytes (TypeTraits::from_float_act), on
// data with exact ties (x * id landing on .5), repeated extremes of both signs, zeros and a wide
// range of scales.
TEST(QuantIntDot, SimdActivationQuantizersAreExact) {
  struct Case {
    DType type;
    void (*simd)(const float*, void*, int64_t);
    const char* isa;
  };
  std::vector<Case> cases;
  if (cpu_features().has_avx2_set()) {
    cases.push_back({DType::Q8_K, kernels::avx2::q8_k_from_float, "avx2"});
    cases.push_back({DType::Q8_0, kernels::avx2::q8_0_from_float_act, "avx2"});
  }
  if (cpu_features().has_avx512_set()) {
    cases.push_back({DType::Q8_K, kernels::avx512::q8_k_from_float, "avx512"});
    cases.push_back({DType::Q8_0, kernels::avx512::q8_0_from_float_act, "avx512"});
  }
  if (cases.empty()) GTEST_SKIP() << "CPU lacks the avx2 and avx512 kernel sets";
  std::mt19937 rng(11);
  for (const auto& c : cases) {
    const int64_t n = 256 * 6;
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> x(n);
      std::normal_distribution<float> g(0.0f, std::pow(10.0f, static_cast<float>(trial % 9) - 4));
      for (float& v : x) v = g(rng);
      if (trial % 4 == 1) {  // scale exactly 1 (extreme 127 in every block) and half-integers: ties
        for (int64_t j = 0; j < n; ++j) x[j] = j % 32 == 0 ? 127.0f : 0.5f * static_cast<int>(rng() % 253 - 126);
      }
      if (trial % 4 == 2) {  // the extreme appears with both signs; the first one decides
        x[37] = 9.0f;
        x[3] = -9.0f;
        x[300] = 9.0f;
      }
      if (trial % 4 == 3) std::fill(x.begin() + 256, x.begin() + 512, 0.0f);  // an all-zero block
      std::vector<uint8_t> want(dtype_row_bytes(c.type, n)), got(want.size(), 0xAB);
      type_traits_ref(c.type)->from_float_act(x.data(), want.data(), n);
      c.simd(x.data(), got.data(), n);
      ASSERT_EQ(want, got) << c.isa << " " << dtype_name(c.type) << " trial " << trial;
    }
  }
}

TEST(QuantIntDot, ActivationBlocksKeepSideSums) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 2.0f);
  const int64_t n = 512;
  std::vector<float> x(n);
  for (float& v : x) v = g(rng);

  std::vector<quant::BlockQ8_K> k8(n / 256);
  type_traits_ref(DType::Q8_K)->from_float(x.data(), k8.data(), n);
  for (const auto& b : k8) {
    int max_abs = 0;
    for (int g16 = 0; g16 < 16; ++g16) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b.qs[16 * g16 + j];
      EXPECT_EQ(sum, b.bsums[g16]);
    }
    for (int8_t q : b.qs) max_abs = std::max(max_abs, std::abs(int(q)));
    EXPECT_EQ(max_abs, 127);  // the extreme value uses the full range
  }

  std::vector<quant::BlockQ8_1> q81(n / 32);
  type_traits_ref(DType::Q8_1)->from_float(x.data(), q81.data(), n);
  for (const auto& b : q81) {
    int sum = 0;
    for (int8_t q : b.qs) sum += q;
    // s = f16(sum * d) with the unrounded d, so within f16 rounding of sum * f16(d).
    const float want = sum * f16_to_f32(b.d);
    EXPECT_NEAR(f16_to_f32(b.s), want, 2e-3 * std::fabs(want) + 1e-6);
  }
}

}  // namespace
}  // namespace ll3
