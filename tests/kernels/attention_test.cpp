// Grouped-query attention over the paged cache: the AVX-512 and AVX2 kernels against the scalar
// reference, for every group size and head size of the LLaMA-3 family (and odd ones), F16, F32
// and Q8_0 caches, block tables out of order, and lengths that end inside a block.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
#include "core/half.h"
#include "kernels/attention.h"
#include "kernels/type_traits.h"

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
using AttendRowsFn = void (*)(const float*, int64_t, int, int, int64_t, const kernels::KvHeadView&, int64_t, float,
                              float*, float*);

// One token through each ISA's run kernel.
template <AttendRowsFn kRows>
void attend_one(const float* q, int G, int64_t hd, const kernels::KvHeadView& kv, int64_t n, float scale, float* s,
                float* out) {
  kRows(q, G * hd, 1, G, hd, kv, n, scale, s, out);
}
constexpr AttendFn kAvx512 = attend_one<kernels::avx512::attend_rows>;
constexpr AttendFn kAvx2 = attend_one<kernels::avx2::attend_rows>;

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
          kv.slot_bytes = static_cast<size_t>(n_kv * hd) * (type == DType::F16 ? 2 : 4);
          kv.block_size = bs;
          kv.block_table = c.table.data();
          std::vector<float> q(static_cast<size_t>(G * hd));
          for (float& x : q) x = nd(rng) * 2.0f;  // peaked softmax for some heads
          std::vector<float> s_ref(static_cast<size_t>(G * n));
          std::vector<float> s_simd(static_cast<size_t>(kernels::attend_scratch_floats(G, hd, bs)));
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
  check_against_reference(kAvx512, 16);
}

TEST(Attention, Avx2MatchesReference) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2";
  check_against_reference(kAvx2, 8);
}

// A Q8_0 cache: rows of n_kv heads of hd random floats (x), quantized row by row by the
// quantizer the KV cache uses (type_traits(Q8_0)->from_float), and the values the blocks hold
// (dequantized: what every kernel must read).
struct BlockCache {
  std::vector<float> k, v;     // the floats before quantization
  std::vector<uint8_t> kq, vq;  // the blocks
  std::vector<float> kd, vd;   // the blocks' values
  std::vector<int32_t> table;
  size_t slot_bytes = 0;
  DType type = DType::Q8_0;
};

BlockCache make_block_cache(int64_t n_blocks, int64_t bs, int64_t n_kv, int64_t hd, std::mt19937& rng,
                      DType type = DType::Q8_0) {
  BlockCache c;
  c.type = type;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t slots = n_blocks * bs, row = n_kv * hd;
  c.slot_bytes = dtype_row_bytes(type, row);
  c.k.resize(static_cast<size_t>(slots * row));
  c.v.resize(c.k.size());
  for (float& x : c.k) x = nd(rng);
  for (float& x : c.v) x = nd(rng);
  c.kq.resize(static_cast<size_t>(slots) * c.slot_bytes);
  c.vq.resize(c.kq.size());
  c.kd.resize(c.k.size());
  c.vd.resize(c.k.size());
  const TypeTraits* q8 = type_traits(type);
  for (int64_t s = 0; s < slots; ++s) {
    q8->from_float(&c.k[s * row], &c.kq[s * c.slot_bytes], row);
    q8->from_float(&c.v[s * row], &c.vq[s * c.slot_bytes], row);
    q8->to_float(&c.kq[s * c.slot_bytes], &c.kd[s * row], row);
    q8->to_float(&c.vq[s * c.slot_bytes], &c.vd[s * row], row);
  }
  c.table.resize(static_cast<size_t>(n_blocks));
  std::iota(c.table.begin(), c.table.end(), 0);
  std::shuffle(c.table.begin(), c.table.end(), rng);
  return c;
}

// KV head g of a Q8_0 cache, and the same head of F32 rows (k, v: n_kv * hd floats per slot).
kernels::KvHeadView block_view(const BlockCache& c, int64_t g, int64_t hd, int64_t bs) {
  kernels::KvHeadView kv;
  kv.type = c.type;
  kv.k = c.kq.data() + g * dtype_row_bytes(c.type, hd);
  kv.v = c.vq.data() + g * dtype_row_bytes(c.type, hd);
  kv.slot_bytes = c.slot_bytes;
  kv.block_size = bs;
  kv.block_table = c.table.data();
  return kv;
}

kernels::KvHeadView f32_view(const std::vector<float>& k, const std::vector<float>& v, const BlockCache& c, int64_t g,
                             int64_t n_kv, int64_t hd, int64_t bs) {
  kernels::KvHeadView kv;
  kv.type = DType::F32;
  kv.k = k.data() + g * hd;
  kv.v = v.data() + g * hd;
  kv.slot_bytes = static_cast<size_t>(n_kv * hd) * 4;
  kv.block_size = bs;
  kv.block_table = c.table.data();
  return kv;
}

// Q8_0 and Q4_0 caches: each ISA's kernel against the scalar reference, to the F16 tests'
// tolerance (the kernels dequantize to the same floats; only the order of the sums differs).
void check_blocks_against_reference(AttendFn attend) {
  std::mt19937 rng(77);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t bs = 16, n_blocks = 20, n_kv = 3;
  for (auto [hd, type] : {std::pair{int64_t{64}, DType::Q8_0}, {int64_t{128}, DType::Q8_0}, {int64_t{32}, DType::Q8_0},
                          {int64_t{64}, DType::Q4_0}, {int64_t{128}, DType::Q4_0}}) {
    const BlockCache c = make_block_cache(n_blocks, bs, n_kv, hd, rng, type);
    for (int G : {1, 4, 8, 3}) {
      for (int64_t n : {1, 15, 16, 17, 100, 300}) {
        const int64_t g = n % n_kv;  // some KV head other than the first
        const kernels::KvHeadView kv = block_view(c, g, hd, bs);
        std::vector<float> q(static_cast<size_t>(G * hd));
        for (float& x : q) x = nd(rng) * 2.0f;  // peaked softmax for some heads
        std::vector<float> s_ref(static_cast<size_t>(G * n));
          std::vector<float> s_simd(static_cast<size_t>(kernels::attend_scratch_floats(G, hd, bs)));
        std::vector<float> want(q.size()), got(q.size(), NAN);
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        kernels::ref::attend(q.data(), G, hd, kv, n, scale, s_ref.data(), want.data());
        attend(q.data(), G, hd, kv, n, scale, s_simd.data(), got.data());
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_NEAR(got[i], want[i], 2e-5f)
              << dtype_name(type) << " hd " << hd << " G " << G << " n " << n << " i " << i;
        }
      }
    }
  }
}

TEST(Attention, Q8_0AndQ4_0Avx512MatchReference) {
  if (!cpu_features().has_avx512_set()) GTEST_SKIP() << "no AVX-512";
  check_blocks_against_reference(kAvx512);
}

TEST(Attention, Q8_0AndQ4_0Avx2MatchReference) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2";
  check_blocks_against_reference(kAvx2);
}

TEST(Attention, Q8_0AndQ4_0DispatchMatchReference) {  // whichever kernel LL3_CPU leaves
  check_blocks_against_reference(kernels::attend);
}

// The reference over Q8_0 (Q4_0) blocks is F32 attention over the blocks' dequantized values,
// to the bit (it reads q * d, the dequantized value, then does the same float arithmetic); and
// both are within the quantization's reach of F32 attention over the floats before
// quantization: Q8_0 moves each element by at most d / 2 (d = amax / 127 of its block), ~0.3%
// of a normal row's scale on average, which moves the scores and so the outputs (weighted means
// of V rows) by about 1% relative L2. Measured here: 0.7e-2 .. 1.44e-2 over these cases; bound
// 3e-2. Q4_0's step is amax / 8, about 16 times as coarse: worst measured 0.24; bound 0.3. (A wrong
// head, block or scale gives an unrelated output: relative L2 near 1.)
void check_blocks_are_f32_over_their_values(DType type, double bound) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t bs = 16, n_blocks = 20, n_kv = 2;
  double worst = 0.0;
  for (int64_t hd : {64, 128}) {
    const BlockCache c = make_block_cache(n_blocks, bs, n_kv, hd, rng, type);
    for (int G : {1, 4, 8}) {
      for (int64_t n : {1, 15, 16, 17, 100, 300}) {
        const int64_t g = (n + 1) % n_kv;
        std::vector<float> q(static_cast<size_t>(G * hd));
        for (float& x : q) x = nd(rng) * 2.0f;
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        std::vector<float> s(static_cast<size_t>(G * n)), blocks(q.size()), deq(q.size()), exact(q.size());
        kernels::ref::attend(q.data(), G, hd, block_view(c, g, hd, bs), n, scale, s.data(), blocks.data());
        kernels::ref::attend(q.data(), G, hd, f32_view(c.kd, c.vd, c, g, n_kv, hd, bs), n, scale, s.data(),
                             deq.data());
        kernels::ref::attend(q.data(), G, hd, f32_view(c.k, c.v, c, g, n_kv, hd, bs), n, scale, s.data(),
                             exact.data());
        ASSERT_EQ(blocks, deq) << "hd " << hd << " G " << G << " n " << n;
        double num = 0.0, den = 0.0;
        for (size_t i = 0; i < blocks.size(); ++i) {
          num += (blocks[i] - exact[i]) * (blocks[i] - exact[i]);
          den += exact[i] * exact[i];
        }
        const double rel = std::sqrt(num / den);
        worst = std::max(worst, rel);
        EXPECT_LE(rel, bound) << "hd " << hd << " G " << G << " n " << n;
      }
    }
  }
  std::printf("%s: worst relative L2 %.3g\n", std::string(dtype_name(type)).c_str(), worst);
  testing::Test::RecordProperty("worst_rel_l2", std::to_string(worst));
}

TEST(Attention, Q8_0ReferenceIsF32AttentionOverItsValues) { check_blocks_are_f32_over_their_values(DType::Q8_0, 3e-2); }
TEST(Attention, Q4_0ReferenceIsF32AttentionOverItsValues) { check_blocks_are_f32_over_their_values(DType::Q4_0, 0.3); }

// A run of consecutive tokens (a prompt chunk) gives each token the bits it gets alone, for every
// cache type, group and head size, block size, and run length (past kMaxAttendRows: several
// passes), starting inside or at the edge of a block; and both within the F16 tests' tolerance
// of the reference.
void check_rows_equal_each_row_alone(AttendRowsFn rows, int64_t width) {
  std::mt19937 rng(91);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t n_kv = 2;
  for (int64_t bs : {16, 32}) {
    const int64_t n_blocks = 1280 / bs;  // past one chunk (1,024 positions)
    for (int64_t hd : {64, 128, 48}) {
      if (hd % width != 0) continue;
      const Cache c = make_cache(n_blocks, bs, n_kv, hd, rng);
      const BlockCache c8 = make_block_cache(n_blocks, bs, n_kv, hd, rng);
      const BlockCache c4 = make_block_cache(n_blocks, bs, n_kv, hd, rng, DType::Q4_0);
      for (DType type : {DType::F16, DType::F32, DType::Q8_0, DType::Q4_0}) {
        const bool blocks = type == DType::Q8_0 || type == DType::Q4_0;
        if (blocks && hd % 32 != 0) continue;
        const int64_t g = 1;
        kernels::KvHeadView kv;
        if (blocks) {
          kv = block_view(type == DType::Q8_0 ? c8 : c4, g, hd, bs);
        } else {
          kv.type = type;
          kv.k = type == DType::F16 ? static_cast<const void*>(c.k16.data() + g * hd) : c.k32.data() + g * hd;
          kv.v = type == DType::F16 ? static_cast<const void*>(c.v16.data() + g * hd) : c.v32.data() + g * hd;
          kv.slot_bytes = static_cast<size_t>(n_kv * hd) * (type == DType::F16 ? 2 : 4);
          kv.block_size = bs;
          kv.block_table = c.table.data();
        }
        for (int G : {1, 3, 4, 8}) {
          std::vector<std::pair<int64_t, int>> lengths;  // (n, m)
          for (int64_t n : {1, 5, 16, 17, 250}) {
            for (int m : {2, 7, 16, 17, 40}) lengths.emplace_back(n, m);
          }
          if (G == 4) lengths.emplace_back(1015, 17);  // a run that crosses into a second chunk
          for (auto [n, m] : lengths) {
            {
              const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
              const int64_t stride = G * hd + 16;  // rows apart, as in a batch of all heads
              std::vector<float> q(static_cast<size_t>(m * stride));
              for (float& x : q) x = nd(rng) * 2.0f;
              std::vector<float> s(static_cast<size_t>(std::max(G * (n + m), kernels::attend_scratch_floats(G, hd, bs))));
              std::vector<float> run(q.size(), NAN), alone(q.size(), NAN);
              rows(q.data(), stride, m, G, hd, kv, n, scale, s.data(), run.data());
              std::vector<float> want(static_cast<size_t>(G * hd));
              for (int i = 0; i < m; ++i) {
                rows(q.data() + i * stride, stride, 1, G, hd, kv, n + i, scale, s.data(), alone.data() + i * stride);
                kernels::ref::attend(q.data() + i * stride, G, hd, kv, n + i, scale, s.data(), want.data());
                for (int64_t e = 0; e < G * hd; ++e) {
                  const float got = run[static_cast<size_t>(i * stride + e)];
                  ASSERT_EQ(std::memcmp(&got, &alone[static_cast<size_t>(i * stride + e)], sizeof(float)), 0)
                      << "bs " << bs << " hd " << hd << " G " << G << " n " << n << " m " << m << " row " << i;
                  ASSERT_NEAR(got, want[static_cast<size_t>(e)], 2e-5f) << "row " << i;
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(Attention, Avx512RowsEqualEachRowAlone) {
  if (!cpu_features().has_avx512_set()) GTEST_SKIP() << "no AVX-512";
  check_rows_equal_each_row_alone(kernels::avx512::attend_rows, 16);
}

TEST(Attention, Avx2RowsEqualEachRowAlone) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2";
  check_rows_equal_each_row_alone(kernels::avx2::attend_rows, 8);
}

// Positions in several chunks: each ISA's run kernel against the definition, and its chunks
// computed apart (attend_chunk, one per thread in the runner) and merged (attend_combine) to
// the bits of attend_rows, for a token alone and a run that crosses a chunk's edge.
struct IsaKernels {
  const char* name;
  int64_t width;
  bool present;
  AttendRowsFn rows;
  void (*chunk)(const float*, int64_t, int, int, int64_t, const kernels::KvHeadView&, int64_t, int64_t, float,
                float*, const kernels::AttendPartial&);
  void (*combine)(const kernels::AttendPartial*, int64_t, int, int, int64_t, float*, int64_t);
};

TEST(Attention, ChunksMergedApartEqualOneThread) {
  const IsaKernels isas[] = {
      {"ref", 1, true, kernels::ref::attend_rows, kernels::ref::attend_chunk, kernels::ref::attend_combine},
      {"avx2", 8, cpu_features().has_avx2_set(), kernels::avx2::attend_rows, kernels::avx2::attend_chunk,
       kernels::avx2::attend_combine},
      {"avx512", 16, cpu_features().has_avx512_set(), kernels::avx512::attend_rows, kernels::avx512::attend_chunk,
       kernels::avx512::attend_combine},
  };
  std::mt19937 rng(33);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t bs = 16, n_blocks = 200, n_kv = 2, hd = 64;
  const Cache c = make_cache(n_blocks, bs, n_kv, hd, rng);
  const BlockCache c8 = make_block_cache(n_blocks, bs, n_kv, hd, rng);
  const BlockCache c4 = make_block_cache(n_blocks, bs, n_kv, hd, rng, DType::Q4_0);
  int tried = 0;
  for (const IsaKernels& isa : isas) {
    if (!isa.present) continue;
    for (DType type : {DType::F16, DType::Q8_0, DType::Q4_0}) {
      kernels::KvHeadView kv = block_view(type == DType::Q4_0 ? c4 : c8, 1, hd, bs);
      if (type == DType::F16) {
        kv.type = DType::F16;
        kv.k = c.k16.data() + hd;
        kv.v = c.v16.data() + hd;
        kv.slot_bytes = static_cast<size_t>(n_kv * hd) * 2;
        kv.block_table = c.table.data();
      }
      for (int G : {1, 3, 4}) {
        for (auto [n, m] : {std::pair<int64_t, int>{1024, 1}, {1025, 1}, {3100, 1}, {1020, 16}, {2040, 9}}) {
          const int64_t stride = G * hd, chunks = kernels::attend_chunks(n + m - 1, bs);
          const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
          std::vector<float> q(static_cast<size_t>(m * stride)), s(static_cast<size_t>(
                                                                        kernels::attend_scratch_floats(G, hd, bs)));
          for (float& x : q) x = nd(rng) * 2.0f;
          std::vector<float> one(q.size(), NAN), apart(q.size(), NAN), want(static_cast<size_t>(stride));
          std::vector<float> ref_s(static_cast<size_t>(G * (n + m)));
          isa.rows(q.data(), stride, m, G, hd, kv, n, scale, s.data(), one.data());
          std::vector<float> outs(static_cast<size_t>(chunks * m * stride), NAN), maxs(static_cast<size_t>(chunks * m * G));
          std::vector<double> sums(maxs.size());
          std::vector<kernels::AttendPartial> parts;
          for (int64_t k = 0; k < chunks; ++k) {
            parts.push_back({&outs[k * m * stride], &maxs[k * m * G], &sums[k * m * G]});
            isa.chunk(q.data(), stride, m, G, hd, kv, n, k, scale, s.data(), parts.back());
          }
          isa.combine(parts.data(), chunks, m, G, hd, apart.data(), stride);
          ASSERT_EQ(std::memcmp(one.data(), apart.data(), one.size() * sizeof(float)), 0)
              << isa.name << " G " << G << " n " << n << " m " << m;
          for (int i = 0; i < m; ++i) {
            kernels::ref::attend(q.data() + i * stride, G, hd, kv, n + i, scale, ref_s.data(), want.data());
            for (int64_t e = 0; e < stride; ++e) {
              ASSERT_NEAR(one[static_cast<size_t>(i * stride + e)], want[static_cast<size_t>(e)], 2e-5f)
                  << isa.name << " G " << G << " n " << n << " m " << m << " row " << i;
            }
          }
          ++tried;
        }
      }
    }
  }
  EXPECT_GE(tried, 30);
}

TEST(Attention, OnePositionReturnsItsValueRow) {
  // softmax over one position is 1: the output is exactly V_0 of the head, for any q.
  std::mt19937 rng(3);
  Cache c = make_cache(2, 16, 2, 64, rng);
  kernels::KvHeadView kv;
  kv.type = DType::F32;
  kv.k = c.k32.data() + 64;
  kv.v = c.v32.data() + 64;
  kv.slot_bytes = 128 * 4;
  kv.block_size = 16;
  kv.block_table = c.table.data();
  std::vector<float> q(4 * 64, 0.7f), s(static_cast<size_t>(kernels::attend_scratch_floats(4, 64, 16))), out(4 * 64);
  kernels::attend(q.data(), 4, 64, kv, 1, 0.125f, s.data(), out.data());
  const float* v0 = c.v32.data() + c.table[0] * 16 * 128 + 64;
  for (int h = 0; h < 4; ++h) {
    for (int d = 0; d < 64; ++d) EXPECT_FLOAT_EQ(out[h * 64 + d], v0[d]);
  }
}

}  // namespace
}  // namespace ll3
