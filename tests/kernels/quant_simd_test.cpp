// Every SIMD quant kernel against its scalar reference, on random blocks (random bytes with
// finite random f16 scales, so every bit pattern of the packed fields occurs) and on blocks made
// by the quantizers, at 1 block, a few, and many. to_float must match bit for bit; dot within a
// tolerance relative to sum |w x|. ISAs this CPU lacks are skipped (and reported).
#include <gtest/gtest.h>

#include "quant_test_rows.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/half.h"
#include "kernels/quant_kernels.h"
#include "kernels/type_traits.h"

namespace ll3 {
namespace {

using ToFloat = void (*)(const void*, float*, int64_t);
using Dot = float (*)(const void*, const float*, int64_t);

struct Kernels {
  DType type;
  std::vector<int> f16_fields;  // byte offsets of the f16 fields in a block
  ToFloat avx2_to_float;
  Dot avx2_dot;
  ToFloat avx512_to_float;
  Dot avx512_dot;
};

#define LL3_K(T, lower, ...)                                                           \
  Kernels {                                                                            \
    DType::T, {__VA_ARGS__}, kernels::avx2::lower##_to_float, kernels::avx2::lower##_dot, \
        kernels::avx512::lower##_to_float, kernels::avx512::lower##_dot                \
  }

std::vector<Kernels> all_kernels() {
  return {
      LL3_K(Q4_0, q4_0, 0),    LL3_K(Q4_1, q4_1, 0, 2), LL3_K(Q5_0, q5_0, 0),
      LL3_K(Q5_1, q5_1, 0, 2), LL3_K(Q8_0, q8_0, 0),    LL3_K(Q2_K, q2_k, 80, 82),
      LL3_K(Q3_K, q3_k, 108),  LL3_K(Q4_K, q4_k, 0, 2), LL3_K(Q5_K, q5_k, 0, 2),
      LL3_K(Q6_K, q6_k, 208),
  };
}

std::vector<uint8_t> random_row(const Kernels& k, int64_t n, std::mt19937& rng, bool quantized) {
  return test::random_quant_row(k.type, k.f16_fields, n, rng, quantized);
}

void check_isa(const Kernels& k, ToFloat to_float, Dot dot, const char* isa) {
  const TypeTraits* ref = type_traits_ref(k.type);
  std::mt19937 rng(static_cast<uint32_t>(k.type) * 977u + 5);
  const int64_t bs = dtype_info(k.type).block_size;
  for (int64_t blocks : {1, 3, 7, 33}) {
    for (bool quantized : {false, true}) {
      SCOPED_TRACE(std::string(isa) + " " + std::string(dtype_name(k.type)) + " blocks " +
                   std::to_string(blocks) + (quantized ? " quantized" : " random bytes"));
      const int64_t n = bs * blocks;
      const std::vector<uint8_t> row = random_row(k, n, rng, quantized);
      std::vector<float> want(n), got(n, -1.0f);
      ref->to_float(row.data(), want.data(), n);
      to_float(row.data(), got.data(), n);
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), n * sizeof(float)))
          << "to_float differs from the reference";

      std::normal_distribution<float> g(0.0f, 1.0f);
      std::vector<float> x(n);
      for (float& v : x) v = g(rng);
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        exact += double(want[i]) * x[i];
        mag += std::fabs(double(want[i]) * x[i]);
      }
      const double tol = 2e-6 * mag + 1e-30;
      EXPECT_NEAR(ref->dot_f32(row.data(), x.data(), n), exact, tol) << "reference dot";
      EXPECT_NEAR(dot(row.data(), x.data(), n), exact, tol) << "SIMD dot";
    }
  }
}

TEST(QuantSimd, Avx2MatchesReference) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "CPU has no AVX2+FMA+F16C";
  for (const Kernels& k : all_kernels()) check_isa(k, k.avx2_to_float, k.avx2_dot, "avx2");
}

TEST(QuantSimd, Avx512MatchesReference) {
  if (!cpu_features().has_avx512_set()) GTEST_SKIP() << "CPU lacks the avx512 kernel set";
  for (const Kernels& k : all_kernels()) check_isa(k, k.avx512_to_float, k.avx512_dot, "avx512");
}

// The dispatched table (whatever LL3_CPU and the CPU allow) agrees with the reference too.
TEST(QuantSimd, DispatchedMatchesReference) {
  for (const Kernels& k : all_kernels()) {
    const TypeTraits* t = type_traits(k.type);
    ASSERT_NE(t, nullptr);
    check_isa(k, t->to_float, t->dot_f32, "dispatched");
  }
}

}  // namespace
}  // namespace ll3
