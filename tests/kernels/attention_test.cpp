// Grouped-query attention over the paged cache: the AVX-512 kernel against the scalar
// reference, for every group size and head size of the LLaMA-3 family (and odd ones), F16 and
// F32 caches, block tables out of order, and lengths that end inside a block.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/half.h"
#include "kernels/attention.h"

namespace ll3 {
namespace {

struct Cache {
  std::vector<float> k32, v32;
  std::vector<uint16_t> k16, v16;
  std::vector<int32_t> table;
};

// A cache of n_blocks blocks of bs slots with n_kv heads of hd; the table lists the blocks
// in a shuffled order.
Cache make_cache(int64_t n_blocks, int64_t bs, int64_t n_kv, int64_t hd, std::mt19937& rng) {
  Cache c;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t elems = static_cast<size_t>(n_blocks * bs * n_kv * hd);
  c.k32.resize(elems);
  c.v32.resize(elems);
  for (float& x : c.k32) x = nd(rng);
  for (float& x : c.v32) x = nd(rng);
  // The F32 cache holds the F16 values, so both types give comparable results.
  c.k16.resize(elems);
  c.v16.resize(elems);
  for (size_t i = 0; i < elems; ++i) {
    c.k16[i] = f32_to_f16(c.k32[i]);
    c.v16[i] = f32_to_f16(c.v32[i]);
    c.k32[i] = f16_to_f32(c.k16[i]);
    c.v32[i] = f16_to_f32(c.v16[i]);
  }
  c.table.resize(static_cast<size_t>(n_blocks));
  std::iota(c.table.begin(), c.table.end(), 0);
  std::shuffle(c.table.begin(), c.table.end(), rng);
  return c;
}

using AttendFn = void (*)(const float*, int, int64_t, const kernels::KvHeadView&, int64_t, float, float*, float*);

// attend requires hd to be a multiple of its vector width.
void check_against_reference(AttendFn attend, int64_t width) {
  std::mt19937 rng(21);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t bs = 16, n_blocks = 24, n_kv = 3;
  for (int64_t hd : {64, 128, 48, 16, 40, 24}) {
    if (hd % width != 0) continue;
    Cache c = make_cache(n_blocks, bs, n_kv, hd, rng);
    for (int G : {1, 2, 3, 4, 5, 8}) {
      for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{33}, int64_t{300}, n_blocks * bs}) {
        for (DType type : {DType::F16, DType::F32}) {
          const int64_t g = n % n_kv;  // some KV head other than the first
          kernels::KvHeadView kv;
          kv.type = type;
          kv.k = type == DType::F16 ? static_cast<const void*>(c.k16.data() + g * hd) : c.k32.data() + g * hd;
          kv.v = type == DType::F16 ? static_cast<const void*>(c.v16.data() + g * hd) : c.v32.data() + g * hd;
          kv.slot_stride = n_kv * hd;
          kv.block_size = bs;
          kv.block_table = c.table.data();
          std::vector<float> q(static_cast<size_t>(G * hd));
          for (float& x : q) x = nd(rng) * 2.0f;  // peaked softmax for some heads
          std::vector<float> s_ref(static_cast<size_t>(G * n)), s_simd(s_ref.size());
          std::vector<float> want(q.size()), got(q.size(), NAN);
          const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
          kernels::ref::attend(q.data(), G, hd, kv, n, scale, s_ref.data(), want.data());
          attend(q.data(), G, hd, kv, n, scale, s_simd.data(), got.data());
          for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_NEAR(got[i], want[i], 2e-5f) << "hd " << hd << " G " << G << " n " << n << " i " << i;
          }
        }
      }
    }
  }
}

TEST(Attention, Avx512MatchesReference) {
  if (!cpu_features().has_avx512_set()) GTEST_SKIP() << "no AVX-512";
  check_against_reference(kernels::avx512::attend, 16);
}

TEST(Attention, Avx2MatchesReference) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2";
  check_against_reference(kernels::avx2::attend, 8);
}

TEST(Attention, OnePositionReturnsItsValueRow) {
  // softmax over one position is 1: the output is exactly V_0 of the head, for any q.
  std::mt19937 rng(3);
  Cache c = make_cache(2, 16, 2, 64, rng);
  kernels::KvHeadView kv;
  kv.type = DType::F32;
  kv.k = c.k32.data() + 64;
  kv.v = c.v32.data() + 64;
  kv.slot_stride = 128;
  kv.block_size = 16;
  kv.block_table = c.table.data();
  std::vector<float> q(4 * 64, 0.7f), s(4), out(4 * 64);
  kernels::attend(q.data(), 4, 64, kv, 1, 0.125f, s.data(), out.data());
  const float* v0 = c.v32.data() + c.table[0] * 16 * 128 + 64;
  for (int h = 0; h < 4; ++h) {
    for (int d = 0; d < 64; ++d) EXPECT_FLOAT_EQ(out[h * 64 + d], v0[d]);
  }
}

}  // namespace
}  // namespace ll3
