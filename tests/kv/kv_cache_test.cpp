// The KV cache's storage: row sizes per type, store() then the attention view reads back what
// was stored (exactly for F32, rounded for F16, within half a quantization step for Q8_0), and
// configurations the types cannot hold are rejected.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/half.h"
#include "kernels/quant_blocks.h"
#include "kernels/type_traits.h"
#include "kv/kv_cache.h"

namespace ll3 {
namespace {

KvCacheConfig config(DType type, int64_t head_dim) {
  KvCacheConfig c;
  c.n_layers = 3;
  c.n_kv_heads = 2;
  c.head_dim = head_dim;
  c.block_size = 16;
  c.n_blocks = 5;
  c.type = type;
  return c;
}

std::unique_ptr<KvCache> make(DType type, int64_t head_dim) {
  auto kv = KvCache::create(config(type, head_dim));
  EXPECT_TRUE(kv.ok()) << kv.message();
  return kv.ok() ? std::move(kv.value()) : nullptr;
}

TEST(KvCache, RowBytesPerType) {
  // A row is both KV heads of one position: 2 * 64 elements.
  const std::pair<DType, size_t> cases[] = {{DType::F32, 512}, {DType::F16, 256}, {DType::Q8_0, 4 * 34}, {DType::Q4_0, 4 * 18}};
  for (const auto& [type, row] : cases) {
    auto kv = make(type, 64);
    ASSERT_TRUE(kv);
    EXPECT_EQ(kv->row_elems(), 128);
    EXPECT_EQ(kv->row_bytes(), row) << dtype_name(type);
    EXPECT_EQ(kv->bytes(), 2 * 3 * 5 * 16 * row) << dtype_name(type);  // K and V, layers, blocks, slots
  }
}

TEST(KvCache, Q8_0NeedsWholeBlocksPerHead) {
  auto kv = KvCache::create(config(DType::Q8_0, 48));
  ASSERT_FALSE(kv.ok());
  EXPECT_EQ(kv.message(), "KV cache type q8_0 needs a head dimension that is a multiple of 32 (blocks of 32 per "
                          "head); this model's is 48");
  EXPECT_TRUE(KvCache::create(config(DType::F16, 48)).ok());  // the float types take any head_dim
  auto q4 = KvCache::create(config(DType::Q4_0, 48));
  ASSERT_FALSE(q4.ok());
  EXPECT_EQ(q4.message(), "KV cache type q4_0 needs a head dimension that is a multiple of 32 (blocks of 32 per "
                          "head); this model's is 48");
  auto bad = KvCache::create(config(DType::Q4_1, 64));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "KV cache type must be f32, f16, q8_0 or q4_0, not q4_1");
}

// Stores random rows at positions 0 .. n-1 of a sequence with an out-of-order block table in
// layer 1, and reads every head of every position back through head_view (the kernels'
// addressing: block_table[p / block_size] * block_size + p % block_size slots of slot_bytes).
struct Stored {
  std::vector<float> k, v;  // (n, row_elems) as stored
  std::vector<float> k_back, v_back;  // read back through the views, dequantized
  std::vector<int32_t> table;
};

Stored store_and_read(KvCache& kv, int64_t n) {
  Stored s;
  const KvCacheConfig& c = kv.config();
  const int64_t row = kv.row_elems(), hd = c.head_dim, layer = 1;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  s.k.resize(static_cast<size_t>(n * row));
  s.v.resize(s.k.size());
  for (float& x : s.k) x = nd(rng);
  for (float& x : s.v) x = nd(rng);
  s.table = {3, 0, 4};
  for (int64_t p = 0; p < n; ++p) {
    kv.store(layer, s.table[p / c.block_size], p % c.block_size, &s.k[p * row], &s.v[p * row]);
  }
  s.k_back.assign(s.k.size(), NAN);
  s.v_back.assign(s.k.size(), NAN);
  const TypeTraits* t = type_traits_ref(c.type);
  for (int64_t g = 0; g < c.n_kv_heads; ++g) {
    const kernels::KvHeadView view = kv.head_view(layer, g, s.table);
    EXPECT_EQ(view.type, c.type);
    EXPECT_EQ(view.slot_bytes, kv.row_bytes());
    for (int64_t p = 0; p < n; ++p) {
      const size_t slot = static_cast<size_t>(view.block_table[p / view.block_size] * view.block_size +
                                              p % view.block_size);
      t->to_float(static_cast<const uint8_t*>(view.k) + slot * view.slot_bytes, &s.k_back[p * row + g * hd], hd);
      t->to_float(static_cast<const uint8_t*>(view.v) + slot * view.slot_bytes, &s.v_back[p * row + g * hd], hd);
    }
  }
  return s;
}

TEST(KvCache, F32AndF16StoreReadsBack) {
  for (DType type : {DType::F32, DType::F16}) {
    auto kv = make(type, 64);
    ASSERT_TRUE(kv);
    const Stored s = store_and_read(*kv, 40);
    for (size_t i = 0; i < s.k.size(); ++i) {
      const float k = type == DType::F32 ? s.k[i] : f16_to_f32(f32_to_f16(s.k[i]));
      const float v = type == DType::F32 ? s.v[i] : f16_to_f32(f32_to_f16(s.v[i]));
      ASSERT_EQ(s.k_back[i], k) << dtype_name(type) << " " << i;
      ASSERT_EQ(s.v_back[i], v) << dtype_name(type) << " " << i;
    }
  }
}

// Q8_0: each value comes back within d / 2 of what was stored, d = amax / 127 of its block of
// 32 (q = round(x / d)), plus what rounding d to f16 moves q * d (|q| <= 127 steps of that
// rounding): the bound of the format, checked block by block.
TEST(KvCache, Q8_0StoreReadsBackWithinHalfAStep) {
  auto kv = make(DType::Q8_0, 64);
  ASSERT_TRUE(kv);
  const Stored s = store_and_read(*kv, 40);
  constexpr int B = quant::kQK;
  for (const auto& [in, back] : {std::pair{&s.k, &s.k_back}, std::pair{&s.v, &s.v_back}}) {
    for (size_t b0 = 0; b0 < in->size(); b0 += B) {
      float amax = 0.0f;
      for (int j = 0; j < B; ++j) amax = std::max(amax, std::fabs((*in)[b0 + j]));
      const float d = amax / 127, d16 = f16_to_f32(f32_to_f16(d));
      const float bound = 0.5f * d16 + 127 * std::fabs(d - d16) + 1e-6f;
      float worst = 0.0f;
      for (int j = 0; j < B; ++j) worst = std::max(worst, std::fabs((*back)[b0 + j] - (*in)[b0 + j]));
      ASSERT_LE(worst, bound) << "block at " << b0 << ", d " << d;
      ASSERT_GT(worst, 0.0f) << "block at " << b0;  // random floats are not all on the grid
    }
  }
}

// Q4_0: d = the block's signed absmax / -8, q = min(15, floor(x / d + 8.5)), x = (q - 8) d: a
// value comes back within d / 2 of what was stored, or within d where q was clamped to 15
// (x / d above 7.5, on the side opposite the absmax), plus what rounding d to f16 moves
// (q - 8) d (|q - 8| <= 8 steps of that rounding).
TEST(KvCache, Q4_0StoreReadsBackWithinHalfAStep) {
  auto kv = make(DType::Q4_0, 64);
  ASSERT_TRUE(kv);
  const Stored s = store_and_read(*kv, 40);
  constexpr int B = quant::kQK;
  for (const auto& [in, back] : {std::pair{&s.k, &s.k_back}, std::pair{&s.v, &s.v_back}}) {
    for (size_t b0 = 0; b0 < in->size(); b0 += B) {
      float amax = 0.0f, max = 0.0f;
      for (int j = 0; j < B; ++j) {
        const float x = (*in)[b0 + j];
        if (std::fabs(x) > amax) amax = std::fabs(x), max = x;
      }
      const float d = max / -8, d16 = f16_to_f32(f32_to_f16(d));
      float worst = 0.0f;
      for (int j = 0; j < B; ++j) {
        const float x = (*in)[b0 + j], err = std::fabs((*back)[b0 + j] - x);
        const float bound = (x / d > 7.5f ? 1.0f : 0.5f) * std::fabs(d16) + 8 * std::fabs(d - d16) + 1e-6f;
        ASSERT_LE(err, bound) << "block at " << b0 << ", element " << j << ", d " << d;
        worst = std::max(worst, err);
      }
      ASSERT_GT(worst, 0.0f) << "block at " << b0;
    }
  }
}

}  // namespace
}  // namespace ll3

namespace ll3 {
namespace {

// The block versions a device mirror follows: every write here moves the version of the block
// written (store, the copy's destination, a writable row), and reads move none.
TEST(KvCache, BlockVersionsMoveOnEveryWriteAndOnlyThere) {
  auto kv = make(DType::F16, 32);
  ASSERT_TRUE(kv);
  auto versions = [&] {
    std::vector<uint64_t> v;
    for (int32_t b = 0; b < 5; ++b) v.push_back(kv->version(b));
    return v;
  };
  const std::vector<uint64_t> v0 = versions();
  std::vector<float> k(64, 0.5f), v(64, -0.25f);
  kv->store(1, 2, 3, k.data(), v.data());
  std::vector<uint64_t> v1 = versions();
  EXPECT_NE(v1[2], v0[2]);
  for (int b : {0, 1, 3, 4}) EXPECT_EQ(v1[b], v0[b]) << b;

  kv->copy_positions(2, 4, 8);
  const std::vector<uint64_t> v2 = versions();
  EXPECT_NE(v2[4], v1[4]) << "the destination changed";
  EXPECT_EQ(v2[2], v1[2]) << "the source was only read";

  const KvCache& ckv = *kv;
  (void)ckv.k_row(0, 1, 0);
  (void)ckv.v_row(0, 3, 0);
  EXPECT_EQ(versions(), v2) << "reading through the const rows changes nothing";
  (void)kv->k_row(0, 0, 5);
  (void)kv->v_row(2, 3, 1);
  const std::vector<uint64_t> v3 = versions();
  EXPECT_NE(v3[0], v2[0]);
  EXPECT_NE(v3[3], v2[3]);
  EXPECT_EQ(v3[1], v2[1]);
}

}  // namespace
}  // namespace ll3
