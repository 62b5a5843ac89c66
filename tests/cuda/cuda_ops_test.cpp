// Every CUDA op against the CPU reference on random data, at odd sizes, with a tolerance per
// op and weight type; batched GEMV rows equal to solo ones bit for bit. Without a CUDA device
// every test skips and says why (the ops are still compiled in CI).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "require_gpu.h"
#include "core/half.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "kernels/type_traits.h"

namespace ll3 {
namespace {

// A device buffer of T, freed at scope end.
template <class T>
struct Dev {
  explicit Dev(size_t n) : n(n) { EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(1, n) * sizeof(T)), cudaSuccess); }
  explicit Dev(const std::vector<T>& host) : Dev(host.size()) {
    EXPECT_EQ(cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Dev() { cudaFree(p); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  T* p = nullptr;
  size_t n;
};

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// max |a - b| / max(|b|, floor) over the elements.
double max_rel(const std::vector<float>& a, const std::vector<float>& b, double floor = 1e-3) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]) / std::max<double>(std::fabs(b[i]), floor));
  return m;
}

TEST(CudaOps, RmsnormAndTheFusedResidualAdd) {
  REQUIRE_GPU();
  for (int64_t n : {1000, 4096}) {
    const int64_t rows = 3;
    std::vector<float> x = randn(rows * n, 1), r = randn(rows * n, 2), w = randn(n, 3);
    std::vector<float> want(rows * n), sum(rows * n);
    for (int64_t i = 0; i < rows * n; ++i) sum[i] = x[i] + r[i];
    for (int64_t t = 0; t < rows; ++t) ops::rmsnorm(&x[t * n], w.data(), &want[t * n], n, 1e-5f);
    Dev<float> dx(x), dw(w), dy(rows * n), dr(r);
    ASSERT_TRUE(cuda::rmsnorm(dx.p, dw.p, dy.p, rows, n, 1e-5f, nullptr).ok());
    EXPECT_LT(max_rel(dy.get(), want), 1e-5) << n;
    for (int64_t t = 0; t < rows; ++t) ops::rmsnorm(&sum[t * n], w.data(), &want[t * n], n, 1e-5f);
    ASSERT_TRUE(cuda::add_rmsnorm(dx.p, dr.p, dw.p, dy.p, rows, n, 1e-5f, nullptr).ok());
    EXPECT_EQ(dx.get(), sum) << "x += r in place, one rounding as on the CPU";
    EXPECT_LT(max_rel(dy.get(), want), 1e-5) << n;
  }
}

TEST(CudaOps, RopeBothPairLayoutsWithAndWithoutFactors) {
  REQUIRE_GPU();
  const int heads = 4, hd = 64;
  const int64_t rows = 5;
  const std::vector<int32_t> pos = {0, 1, 17, 500, 8191};
  std::vector<float> factors(hd / 2);
  for (int i = 0; i < hd / 2; ++i) factors[i] = 1.0f + static_cast<float>(i % 5);
  const float base = 500000.0f;
  const float theta_scale = std::pow(base, -2.0f / hd);
  for (bool half_pairs : {false, true}) {
    for (bool with_factors : {false, true}) {
      std::vector<float> x = randn(rows * heads * hd, 4), want = x;
      std::vector<float> ones(hd / 2, 1.0f), cs(hd / 2), sn(hd / 2);
      for (int64_t t = 0; t < rows; ++t) {
        ops::rope_angles(pos[t], hd, base, with_factors ? factors.data() : ones.data(), cs.data(), sn.data());
        ops::rope(&want[t * heads * hd], heads, hd, cs.data(), sn.data(), half_pairs);
      }
      Dev<float> dx(x), df(factors);
      Dev<int32_t> dp(pos);
      ASSERT_TRUE(cuda::rope(dx.p, dp.p, rows, heads, hd, theta_scale, with_factors ? df.p : nullptr, half_pairs, nullptr).ok());
      const std::vector<float> got = dx.get();
      double m = 0;
      for (size_t i = 0; i < got.size(); ++i) m = std::max<double>(m, std::fabs(got[i] - want[i]));
      EXPECT_LT(m, 2e-5) << "half_pairs " << half_pairs << " factors " << with_factors;
    }
  }
}

TEST(CudaOps, Swiglu) {
  REQUIRE_GPU();
  const int64_t n = 10007;
  std::vector<float> g = randn(n, 5, 4.0f), u = randn(n, 6), want = g;
  ops::swiglu(want.data(), u.data(), n);
  Dev<float> dg(g), du(u);
  ASSERT_TRUE(cuda::swiglu(dg.p, du.p, n, nullptr).ok());
  EXPECT_LT(max_rel(dg.get(), want), 2e-6);
}

// A random (rows, cols) matrix stored as `type`, and its dequantized floats.
struct Matrix {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};
Matrix random_matrix(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m;
  const std::vector<float> src = randn(rows * cols, seed, 0.05f);
  const size_t rb = dtype_row_bytes(type, cols);
  m.bytes.resize(rows * rb);
  m.values.resize(rows * cols);
  const TypeTraits* t = type_traits_ref(type);
  for (int64_t r = 0; r < rows; ++r) {
    t->from_float(&src[r * cols], &m.bytes[r * rb], cols);
    t->to_float(&m.bytes[r * rb], &m.values[r * cols], cols);
  }
  return m;
}

TEST(CudaOps, GemvOfEveryTypeMatchesTheDequantizedProductAndBatchesEqualSolo) {
  REQUIRE_GPU();
  const int64_t rows = 301;  // not a multiple of the rows per block
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_K}) {
    ASSERT_TRUE(cuda::gemv_supported(type));
    for (int64_t cols : {512, 4096}) {
      const Matrix w = random_matrix(type, rows, cols, 7);
      const int batch = cuda::kMaxGemvBatch;
      const std::vector<float> x = randn(batch * cols, 8);
      Dev<uint8_t> dw(w.bytes);
      Dev<float> dx(x), dy(batch * rows), d1(rows);
      ASSERT_TRUE(cuda::gemv(type, dw.p, rows, cols, dx.p, dy.p, batch, nullptr).ok());
      const std::vector<float> y = dy.get();
      for (int b = 0; b < batch; ++b) {
        for (int64_t r = 0; r < rows; ++r) {
          double dot = 0, mag = 0;
          for (int64_t c = 0; c < cols; ++c) {
            dot += static_cast<double>(w.values[r * cols + c]) * x[b * cols + c];
            mag += std::fabs(static_cast<double>(w.values[r * cols + c]) * x[b * cols + c]);
          }
          ASSERT_NEAR(y[b * rows + r], dot, 1e-5 * mag + 1e-6) << dtype_name(type) << " cols " << cols << " row " << r;
        }
        // The same column alone gives the same bits.
        ASSERT_TRUE(cuda::gemv(type, dw.p, rows, cols, dx.p + b * cols, d1.p, 1, nullptr).ok());
        const std::vector<float> solo = d1.get();
        ASSERT_TRUE(std::equal(solo.begin(), solo.end(), y.begin() + b * rows)) << dtype_name(type) << " batch row " << b;
      }
    }
  }
  // What it cannot do is an error, not a crash.
  Dev<float> dx(64), dy(64);
  EXPECT_FALSE(cuda::gemv(DType::Q6_K, dx.p, 1, 256, dx.p, dy.p, 1, nullptr).ok());
  EXPECT_FALSE(cuda::gemv(DType::F32, dx.p, 1, 40, dx.p, dy.p, 1, nullptr).ok());
  EXPECT_FALSE(cuda::gemv(DType::F32, dx.p, 1, 32, dx.p, dy.p, 9, nullptr).ok());
}

// The batch-invariant tensor-core product: every type against the double-precision product of
// its dequantized weights and the activations rounded as the kernel rounds them, then the
// invariance itself: the same x row gives the same bits whatever n is (1 .. 130, across the
// 8-token tiles and 64-token slabs) and wherever the row sits in the batch.
TEST(CudaOps, MmaMatmulMatchesTheRoundedProductAndIsBatchInvariant) {
  REQUIRE_GPU();
  const int64_t rows = 301;  // not a multiple of the 16 rows of a warp
  const int64_t n_max = 130;
  for (DType type : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    for (int64_t cols : {256, 4096, 14336}) {
      ASSERT_TRUE(cuda::matmul_mma_supported(type, cols));
      const Matrix w = random_matrix(type, rows, cols, 31);
      std::vector<uint8_t> bytes = w.bytes;
      if (type == DType::Q8_0) {  // the kernel's own layout
        cuda::q8_0_split(w.bytes.data(), rows, cols, bytes.data(), reinterpret_cast<uint16_t*>(bytes.data() + rows * cols));
      }
      const std::vector<float> x = randn((n_max + 1) * cols, 32);
      Dev<uint8_t> dw(bytes);
      Dev<float> dx(x), dy(n_max * rows), dn(n_max * rows);
      ASSERT_TRUE(cuda::matmul_mma(type, dw.p, rows, cols, dx.p, n_max, dy.p, nullptr).ok());
      const std::vector<float> y = dy.get();
      const bool bf16 = type == DType::BF16;
      auto rounded = [bf16](float v) { return bf16 ? bf16_to_f32(f32_to_bf16(v)) : f16_to_f32(f32_to_f16(v)); };
      for (int64_t t : {int64_t{0}, int64_t{5}, int64_t{64}, n_max - 1}) {
        for (int64_t r = 0; r < rows; ++r) {
          double dot = 0, mag = 0;
          for (int64_t c = 0; c < cols; ++c) {
            const double p = static_cast<double>(w.values[r * cols + c]) * rounded(x[t * cols + c]);
            dot += p;
            mag += std::fabs(p);
          }
          ASSERT_NEAR(y[t * rows + r], dot, 3e-5 * mag + 1e-6) << dtype_name(type) << " cols " << cols << " token " << t << " row " << r;
        }
      }
      // Batches of n rows from x row `first`: row i must equal row first + i of the full run
      // (first = 1 shifts every row to another place in its tile).
      for (int64_t first : {0, 1}) {
        for (int64_t n : {1, 2, 7, 8, 9, 16, 63, 64, 65, 100}) {
          if (first + n > n_max) continue;
          ASSERT_TRUE(cuda::matmul_mma(type, dw.p, rows, cols, dx.p + first * cols, n, dn.p, nullptr).ok());
          const std::vector<float> yn = dn.get();
          for (int64_t i = 0; i < n * rows; ++i) {
            ASSERT_EQ(std::memcmp(&yn[i], &y[first * rows + i], 4), 0)
                << dtype_name(type) << " cols " << cols << " n " << n << " first " << first << " element " << i;
          }
        }
      }
    }
  }
  Dev<float> dx(64), dy(64);
  EXPECT_FALSE(cuda::matmul_mma_supported(DType::F32, 256));
  EXPECT_FALSE(cuda::matmul_mma_supported(DType::Q4_K, 320));
  EXPECT_FALSE(cuda::matmul_mma_supported(DType::Q5_K, 320));
  EXPECT_FALSE(cuda::matmul_mma(DType::Q3_K, dx.p, 1, 256, dx.p, 1, dy.p, nullptr).ok());
  EXPECT_FALSE(cuda::matmul_mma(DType::F16, dx.p, 1, 96, dx.p, 1, dy.p, nullptr).ok());
}

// cuBLAS on F16 (and BF16) operands, the benchmark's yardstick, matches the product of the
// rounded values.
TEST(CudaOps, CublasGemmOfHalfOperands) {
  REQUIRE_GPU();
  const int64_t rows = 77, cols = 512, n = 13;
  Result<cuda::Blas*> blas = cuda::blas_create(nullptr);
  ASSERT_TRUE(blas.ok()) << blas.message();
  for (bool bf16 : {false, true}) {
    const std::vector<float> wf = randn(rows * cols, 22, 0.05f), xf = randn(n * cols, 23);
    std::vector<uint16_t> wh(wf.size());
    for (size_t i = 0; i < wf.size(); ++i) wh[i] = bf16 ? f32_to_bf16(wf[i]) : f32_to_f16(wf[i]);
    Dev<float> dx(xf), dy(n * rows);
    Dev<uint16_t> dwh(wh), dxh(n * cols);
    ASSERT_TRUE(cuda::to_half(dx.p, dxh.p, n * cols, bf16, nullptr).ok());
    const std::vector<uint16_t> xh = dxh.get();
    for (size_t i = 0; i < xf.size(); ++i) ASSERT_EQ(xh[i], bf16 ? f32_to_bf16(xf[i]) : f32_to_f16(xf[i])) << i;
    ASSERT_TRUE(cuda::gemm_half(blas.value(), bf16, dwh.p, rows, cols, dxh.p, n, dy.p).ok());
    const std::vector<float> y = dy.get();
    auto val = [bf16](uint16_t v) { return bf16 ? bf16_to_f32(v) : f16_to_f32(v); };
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        double dot = 0, mag = 0;
        for (int64_t c = 0; c < cols; ++c) {
          const double p = static_cast<double>(val(wh[r * cols + c])) * val(xh[t * cols + c]);
          dot += p;
          mag += std::fabs(p);
        }
        ASSERT_NEAR(y[t * rows + r], dot, 1e-5 * mag + 1e-6) << (bf16 ? "bf16" : "f16") << " row " << r << " token " << t;
      }
    }
  }
  cuda::blas_destroy(blas.value());
}

// The small ops of the runner: residual add, row gather, and the store of new K / V rows
// (rounded to F16) into their cache slots.
TEST(CudaOps, AddGatherAndKvStore) {
  REQUIRE_GPU();
  const int64_t rows = 5, cols = 96;
  const std::vector<float> x = randn(rows * cols, 31), r = randn(rows * cols, 32);
  Dev<float> dx(x), dr(r);
  ASSERT_TRUE(cuda::add(dx.p, dr.p, rows * cols, nullptr).ok());
  std::vector<float> sum(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + r[i];
  EXPECT_EQ(dx.get(), sum);

  const std::vector<int32_t> pick = {4, 0, 4};
  Dev<int32_t> dp(pick);
  Dev<float> dg(pick.size() * cols);
  ASSERT_TRUE(cuda::gather_rows(dx.p, dp.p, 3, cols, dg.p, nullptr).ok());
  const std::vector<float> g = dg.get();
  for (size_t i = 0; i < pick.size(); ++i) {
    EXPECT_TRUE(std::equal(g.begin() + i * cols, g.begin() + (i + 1) * cols, sum.begin() + pick[i] * cols)) << i;
  }

  const std::vector<int32_t> slots = {7, 2, 19, 0, 11};
  Dev<int32_t> ds(slots);
  Dev<uint16_t> kc(20 * cols), vc(20 * cols);
  ASSERT_TRUE(cuda::kv_store(dr.p, dx.p, ds.p, rows, cols, kc.p, vc.p, nullptr).ok());
  const std::vector<uint16_t> k = kc.get(), v = vc.get();
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t e = 0; e < cols; ++e) {
      ASSERT_EQ(k[slots[t] * cols + e], f32_to_f16(r[t * cols + e])) << t;
      ASSERT_EQ(v[slots[t] * cols + e], f32_to_f16(sum[t * cols + e])) << t;
    }
  }
}

// A paged F16 cache of n_seqs sequences of max_blocks blocks each, the block ids shuffled over
// the whole pool (tables: row s holds sequence s's ids), random K and V (seed + 1, seed + 2).
struct ShuffledCache {
  std::vector<int32_t> tables;
  std::vector<uint16_t> k, v;
};
ShuffledCache shuffled_cache(int n_seqs, int max_blocks, int bs, int n_kv, int hd, uint32_t seed) {
  ShuffledCache c;
  c.tables.resize(static_cast<size_t>(n_seqs) * max_blocks);
  std::iota(c.tables.begin(), c.tables.end(), 0);
  std::shuffle(c.tables.begin(), c.tables.end(), std::mt19937(seed));
  const size_t elems = c.tables.size() * bs * n_kv * hd;
  const std::vector<float> kf = randn(elems, seed + 1), vf = randn(elems, seed + 2);
  c.k.resize(elems);
  c.v.resize(elems);
  for (size_t i = 0; i < elems; ++i) {
    c.k[i] = f32_to_f16(kf[i]);
    c.v[i] = f32_to_f16(vf[i]);
  }
  return c;
}

TEST(CudaOps, PagedDecodeAttentionOverShuffledBlocks) {
  REQUIRE_GPU();
  const int n_heads = 8, n_kv = 2, bs = 16;
  const std::vector<int32_t> lens = {1, 37, 300};
  for (int hd : {64, 128}) {
    const int max_blocks = (300 + bs - 1) / bs;
    const ShuffledCache cache = shuffled_cache(3, max_blocks, bs, n_kv, hd, 9);
    const std::vector<int32_t>& tables = cache.tables;
    const std::vector<uint16_t>& k = cache.k;
    const std::vector<uint16_t>& v = cache.v;
    const std::vector<float> q = randn(3 * n_heads * hd, 12);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    Dev<uint16_t> dk(k), dv(v);
    Dev<int32_t> dt(tables), dl(lens);
    Dev<float> dq(q), dout(3 * n_heads * hd);
    cuda::PagedKv kv{dk.p, dv.p, dt.p, dl.p, max_blocks, bs, n_kv};
    ASSERT_TRUE(cuda::attention_decode(dq.p, kv, 3, n_heads, hd, scale, dout.p, nullptr).ok());
    const std::vector<float> out = dout.get();
    for (int s = 0; s < 3; ++s) {
      for (int h = 0; h < n_heads; ++h) {
        const int g = h / (n_heads / n_kv);
        auto at = [&](const std::vector<uint16_t>& c, int p, int e) {
          const size_t slot = static_cast<size_t>(tables[s * max_blocks + p / bs]) * bs + p % bs;
          return static_cast<double>(f16_to_f32(c[(slot * n_kv + g) * hd + e]));
        };
        std::vector<double> sc(lens[s]);
        double mx = -INFINITY;
        for (int p = 0; p < lens[s]; ++p) {
          double d = 0;
          for (int e = 0; e < hd; ++e) d += q[(s * n_heads + h) * hd + e] * at(k, p, e);
          sc[p] = d * scale;
          mx = std::max(mx, sc[p]);
        }
        double sum = 0;
        for (double& x : sc) sum += (x = std::exp(x - mx));
        for (int e = 0; e < hd; ++e) {
          double o = 0;
          for (int p = 0; p < lens[s]; ++p) o += sc[p] / sum * at(v, p, e);
          ASSERT_NEAR(out[(s * n_heads + h) * hd + e], o, 2e-5) << "hd " << hd << " seq " << s << " head " << h;
        }
      }
    }
  }
  cuda::PagedKv bad{};
  bad.n_kv_heads = 3;
  EXPECT_FALSE(cuda::attention_decode(nullptr, bad, 1, 8, 64, 1.0f, nullptr, nullptr).ok());
  bad.n_kv_heads = 2;
  EXPECT_FALSE(cuda::attention_decode(nullptr, bad, 1, 8, 48, 1.0f, nullptr, nullptr).ok());
}

// Split attention (flash-decoding): sequences of one chunk get the unsplit kernel's bits, longer
// ones its result within float rounding, and a sequence's output is the same bits alone as
// beside others (the split depends on its own length only).
TEST(CudaOps, SplitAttentionMatchesTheWholeAndKeepsBatchInvariance) {
  REQUIRE_GPU();
  const int n_heads = 8, n_kv = 2, bs = 16, hd = 128, chunk = 512;
  const std::vector<int32_t> lens = {1, 37, 512, 513, 3000};
  const int n = static_cast<int>(lens.size());
  const int max_blocks = (3000 + bs - 1) / bs, max_chunks = (3000 + chunk - 1) / chunk;
  const ShuffledCache cache = shuffled_cache(n, max_blocks, bs, n_kv, hd, 13);
  const std::vector<int32_t>& tables = cache.tables;
  const std::vector<float> q = randn(static_cast<size_t>(n) * n_heads * hd, 16);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  Dev<uint16_t> dk(cache.k), dv(cache.v);
  Dev<int32_t> dt(tables), dl(lens);
  Dev<float> dq(q), whole(static_cast<size_t>(n) * n_heads * hd), split(static_cast<size_t>(n) * n_heads * hd);
  Dev<float> partials(static_cast<size_t>(n) * n_heads * max_chunks * (hd + 2));
  const cuda::PagedKv kv{dk.p, dv.p, dt.p, dl.p, max_blocks, bs, n_kv};
  const cuda::AttentionSplit sp{chunk, max_chunks, partials.p};
  ASSERT_TRUE(cuda::attention_decode(dq.p, kv, n, n_heads, hd, scale, whole.p, nullptr).ok());
  ASSERT_TRUE(cuda::attention_decode(dq.p, kv, n, n_heads, hd, scale, split.p, nullptr, sp).ok());
  const std::vector<float> a = whole.get(), b = split.get();
  const size_t row = static_cast<size_t>(n_heads) * hd;
  for (int s = 0; s < n; ++s) {
    const float* x = &a[s * row];
    const float* y = &b[s * row];
    if (lens[s] <= chunk) {
      EXPECT_EQ(0, std::memcmp(x, y, row * sizeof(float))) << "one chunk: the unsplit bits, length " << lens[s];
    } else {
      for (size_t e = 0; e < row; ++e) ASSERT_NEAR(y[e], x[e], 2e-5 * (1 + std::fabs(x[e]))) << "length " << lens[s];
    }
  }
  // The 3000-position sequence alone (its query and table first in the buffers).
  Dev<float> dq1(std::vector<float>(q.begin() + 4 * row, q.end()));
  Dev<int32_t> dt1(std::vector<int32_t>(tables.begin() + 4 * max_blocks, tables.end())), dl1(std::vector<int32_t>{3000});
  Dev<float> alone(row);
  const cuda::PagedKv kv1{dk.p, dv.p, dt1.p, dl1.p, max_blocks, bs, n_kv};
  ASSERT_TRUE(cuda::attention_decode(dq1.p, kv1, 1, n_heads, hd, scale, alone.p, nullptr, sp).ok());
  EXPECT_EQ(0, std::memcmp(alone.get().data(), &b[4 * row], row * sizeof(float))) << "alone equals batched";
  EXPECT_FALSE(cuda::attention_decode(dq.p, kv, n, n_heads, hd, scale, split.p, nullptr, {chunk, 0, partials.p}).ok());
}

TEST(CudaOps, ArgmaxTiesToTheLowerId) {
  REQUIRE_GPU();
  const int64_t V = 128256, rows = 4;
  std::vector<float> l = randn(rows * V, 13);
  l[0 * V + 5] = 100.0f;            // row 0: a clear winner
  l[1 * V + 7] = l[1 * V + 90000] = 50.0f;  // row 1: a tie
  l[2 * V + V - 1] = 60.0f;         // row 2: the last id
  Dev<float> dl(l);
  Dev<int32_t> out(rows);
  ASSERT_TRUE(cuda::argmax(dl.p, rows, V, out.p, nullptr).ok());
  const std::vector<int32_t> got = out.get();
  EXPECT_EQ(got[0], 5);
  EXPECT_EQ(got[1], 7);
  EXPECT_EQ(got[2], V - 1);
  EXPECT_EQ(got[3], std::max_element(l.begin() + 3 * V, l.end()) - (l.begin() + 3 * V));
}

// The read probe folds every word it reads: the XOR of its blocks' words is the XOR of the
// buffer's, so a load it skipped or doubled shows.
TEST(CudaOps, ReadProbeReadsEveryWordOnce) {
  REQUIRE_GPU();
  std::mt19937 rng(21);
  std::vector<uint32_t> words(3 * 1024 * 1024 + 4);  // not a multiple of the grid's stride
  for (uint32_t& w : words) w = rng();
  uint32_t want = 0;
  for (uint32_t w : words) want ^= w;
  Dev<uint32_t> buf(words);
  Dev<uint32_t> out(std::vector<uint32_t>(64, 0));
  ASSERT_TRUE(cuda::read_probe(buf.p, words.size() * 4, out.p, 64, nullptr).ok());
  uint32_t got = 0;
  for (uint32_t w : out.get()) got ^= w;
  EXPECT_EQ(got, want);
  EXPECT_FALSE(cuda::read_probe(buf.p, 10, out.p, 64, nullptr).ok()) << "not a multiple of 16 bytes";
}

}  // namespace
}  // namespace ll3
