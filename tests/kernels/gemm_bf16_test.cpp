// The AMX bf16 kernels against their scalar references: activation packing and the fused
// unpack-to-bf16 kernels bit for bit, the product (weights of every common stored type,
// unpacked chunk by chunk inside the kernel) within float-accumulation error, at sizes that
// cover partial row tiles, token groups, several k chunks and several token passes.
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <random>

#include "core/cpu_features.h"
#include "core/half.h"
#include "kernels/gemm_bf16.h"
#include "kernels/type_traits.h"
#include "quant_test_rows.h"
#include "test_support.h"

namespace ll3 {
namespace {

constexpr DType kTypes[] = {DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                            DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

std::vector<uint16_t> packed(kernels::PackXBf16Fn pack, const std::vector<float>& x, size_t ldx, int64_t n,
                             int64_t k) {
  std::vector<uint16_t> out(kernels::bf16_packed_x_elems(n, k), 0xdead);
  for (int64_t g = 0; g * kernels::kBf16TokenGroup < n; ++g) {
    const int64_t valid = std::min<int64_t>(kernels::kBf16TokenGroup, n - g * kernels::kBf16TokenGroup);
    pack(x.data() + g * kernels::kBf16TokenGroup * ldx, ldx, valid, k, out.data() + g * kernels::kBf16TokenGroup * k);
  }
  return out;
}

// nr rows of `type` (plus stride slack) made by the reference quantizer from Gaussian data.
std::vector<uint8_t> random_rows(DType type, int64_t nr, int64_t k, size_t row_bytes, std::mt19937& rng) {
  std::vector<uint8_t> rows(nr * row_bytes);
  for (int64_t r = 0; r < nr; ++r) {
    std::vector<uint8_t> row = test::random_quant_row(type, {}, k, rng, true);
    std::copy(row.begin(), row.end(), rows.begin() + r * row_bytes);
  }
  return rows;
}

TEST(GemmBf16, PackingMatchesReferenceExactly) {
  const kernels::Bf16Gemm* amx = kernels::bf16_gemm_amx();
  if (amx == nullptr) GTEST_SKIP() << "no AMX-BF16 on this CPU (or LL3_CPU caps it)";
  std::mt19937 rng(11);
  for (int64_t n : {1, 5, 16, 23, 40}) {
    for (int64_t k : {32, 96, 256}) {
      const size_t ldx = static_cast<size_t>(k + 7);
      std::vector<float> x = test::random_normal(n * ldx, rng());
      ASSERT_EQ(packed(amx->pack_x, x, ldx, n, k), packed(kernels::ref::pack_x_bf16, x, ldx, n, k)) << n << "x" << k;
    }
  }
}

// Every to_bf16 kernel equals to_float rounded to nearest even, bit for bit. The kernels are
// AVX-512 code: on a CPU with the AVX-512 set every type but BF16 (whose stored values already are
// bf16) must have one, so a kernel missing from the dispatch table fails here. Where there are
// none (no AVX-512, or LL3_CPU=avx2 / scalar) the test skips and says so.
TEST(GemmBf16, UnpackToBf16MatchesRoundedDequantization) {
  const bool avx512 = cpu_features().has_avx512_set();
  std::mt19937 rng(13);
  int checked = 0;
  for (DType type : kTypes) {
    const TypeTraits* tr = type_traits(type);
    if (tr->to_bf16 == nullptr) {
      EXPECT_FALSE(avx512 && type != DType::BF16) << dtype_name(type) << ": no to_bf16 kernel on an AVX-512 CPU";
      continue;
    }
    ++checked;
    for (int64_t k : {256, 768}) {
      std::vector<uint8_t> row = test::random_quant_row(type, {}, k, rng, true);
      std::vector<float> f(k);
      type_traits_ref(type)->to_float(row.data(), f.data(), k);
      std::vector<uint16_t> got(k), want(k);
      tr->to_bf16(row.data(), got.data(), k);
      for (int64_t i = 0; i < k; ++i) want[i] = f32_to_bf16(f[i]);
      ASSERT_EQ(got, want) << dtype_name(type) << " k=" << k;
    }
  }
  if (checked == 0) {
    ASSERT_FALSE(avx512) << "an AVX-512 CPU without any to_bf16 kernel";
    GTEST_SKIP() << "no to_bf16 kernels on this CPU: they are AVX-512 only (no AVX-512 set here, or LL3_CPU "
                    "caps it); the products round to_float's output instead";
  }
  if (avx512) {
    EXPECT_EQ(checked, static_cast<int>(std::size(kTypes)) - 1) << "every type but BF16";
  }
}

void check_product(DType type, bool fused_unpack, int64_t nr, int64_t n, int64_t k, std::mt19937& rng) {
  const kernels::Bf16Gemm* amx = kernels::bf16_gemm_amx();
  const TypeTraits* tr = type_traits(type);
  const size_t row_bytes = dtype_row_bytes(type, k) + 64;
  std::vector<uint8_t> rows = random_rows(type, nr + 1, k, row_bytes, rng);  // one more: the prefetch range
  kernels::Bf16WeightRows w;
  w.rows = rows.data();
  w.row_bytes = row_bytes;
  w.nr = nr;
  w.chunk_bytes = dtype_row_bytes(type, kernels::kBf16ChunkK);
  w.to_bf16 = fused_unpack ? tr->to_bf16 : nullptr;
  w.to_float = tr->to_float;
  w.next = rows.data() + nr * row_bytes;
  w.next_bytes = row_bytes;
  std::vector<float> x = test::random_normal(n * k, rng());
  std::vector<uint16_t> xp = packed(kernels::ref::pack_x_bf16, x, k, n, k);
  const size_t ldy = static_cast<size_t>(nr + 3);
  std::vector<float> y(n * ldy, -7.0f), yr(n * ldy, -7.0f);
  amx->gemm(w, xp.data(), n, k, y.data(), ldy);
  kernels::Bf16WeightRows wr = w;
  wr.to_float = type_traits_ref(type)->to_float;
  kernels::ref::gemm_bf16(wr, xp.data(), n, k, yr.data(), ldy);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < static_cast<int64_t>(ldy); ++r) {
      const float a = y[t * ldy + r], b = yr[t * ldy + r];
      if (r >= nr) {
        ASSERT_EQ(a, -7.0f) << "wrote outside the block";
      } else {
        ASSERT_NEAR(a, b, 2e-6f * k + 1e-5f * std::fabs(b))
            << dtype_name(type) << " " << nr << "x" << n << "x" << k << " at " << t << "," << r;
      }
    }
  }
}

TEST(GemmBf16, AmxProductMatchesReferenceForEveryType) {
  if (kernels::bf16_gemm_amx() == nullptr) GTEST_SKIP() << "no AMX-BF16 on this CPU (or LL3_CPU caps it)";
  std::mt19937 rng(12);
  for (DType type : kTypes) {
    check_product(type, true, 32, 45, 768, rng);  // three k chunks, a partial token pair
    check_product(type, false, 17, 16, 256, rng);
  }
}

TEST(GemmBf16, AmxProductShapes) {
  if (kernels::bf16_gemm_amx() == nullptr) GTEST_SKIP() << "no AMX-BF16 on this CPU (or LL3_CPU caps it)";
  std::mt19937 rng(14);
  for (int64_t nr : {1, 7, 16, 17, 32}) {
    for (int64_t n : {1, 15, 16, 17, 32, 45}) {
      for (int64_t k : {32, 96, 256, 320}) check_product(DType::F16, true, nr, n, k, rng);
    }
  }
  check_product(DType::Q8_0, true, 32, 530, 256, rng);  // more tokens than one parked pass
}

}  // namespace
}  // namespace ll3
