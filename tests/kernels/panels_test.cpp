// The panel layout (kernels/panels.h): packing 16 rows and unpacking any one of them gives back
// its bytes exactly, and the decode kernels over panels equal the reference integer dot of each
// row (the int32 sums are exact; only the float steps may round differently), for every bit
// pattern of the quants (random bytes), over several panels and past one prepared activation
// segment.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "core/cpu_features.h"
#include "core/half.h"
#include "kernels/float_kernels.h"
#include "kernels/gemm_f32.h"
#include "kernels/cpu/panel_act.h"
#include "kernels/panels.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_kernels.h"
#include "quant_test_rows.h"
#include "test_support.h"

namespace ll3 {
namespace {

using kernels::kPanelRows;

struct Case {
  DType type;
  std::vector<int> f16_fields;  // byte offsets of the f16 fields of a block
};

const Case kCases[] = {
    {DType::Q4_K, {0, 2}},
    {DType::Q6_K, {208}},
    {DType::Q8_0, {0}},
};

std::vector<uint8_t> random_rows(const Case& c, int64_t rows, int64_t cols, std::mt19937& rng, bool quantized) {
  std::vector<uint8_t> out;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<uint8_t> row = test::random_quant_row(c.type, c.f16_fields, cols, rng, quantized);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

TEST(Panels, LayoutExistsOnlyForWholePanelsAndUnits) {
  EXPECT_TRUE(kernels::panel_layout_exists(DType::Q4_K, 32, 2048));
  EXPECT_FALSE(kernels::panel_layout_exists(DType::Q4_K, 24, 2048));   // not whole panels
  EXPECT_TRUE(kernels::panel_layout_exists(DType::Q6_K, 16, 512));
  EXPECT_FALSE(kernels::panel_layout_exists(DType::Q6_K, 16, 768));    // odd block count
  EXPECT_TRUE(kernels::panel_layout_exists(DType::Q8_0, 16, 64));
  EXPECT_FALSE(kernels::panel_layout_exists(DType::Q8_0, 16, 96));
  EXPECT_FALSE(kernels::panel_layout_exists(DType::Q4_0, 16, 256));    // no panel format
  EXPECT_TRUE(kernels::panel_layout_exists(DType::F16, 16, 256));
  EXPECT_FALSE(kernels::panel_layout_exists(DType::F16, 16, 264));    // not whole groups of 16
  EXPECT_FALSE(kernels::panel_layout_exists(DType::BF16, 16, 256));   // the pair order has none
}

// F16 panels: every row back by both unpacks; the float decode over panels gives each row the
// bits of its row dot (the scalar reference and, where the CPU has it, the AVX-512 kernel);
// the prompt GEMM's packs made from panels equal those made from the rows.
TEST(Panels, F16PanelsKeepTheFloatOrder) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t cols = 4096 + 48, npanels = 3, rows = npanels * kPanelRows;
  std::vector<uint16_t> w(static_cast<size_t>(rows * cols));
  for (uint16_t& h : w) h = f32_to_f16(0.05f * nd(rng));
  std::vector<float> x(static_cast<size_t>(cols));
  for (float& v : x) v = f16_to_f32(f32_to_f16(nd(rng)));  // 8-bit mode rounds F16's inputs
  const size_t rb = static_cast<size_t>(cols) * 2;
  std::vector<uint16_t> panels(w.size());
  const auto* wb = reinterpret_cast<const uint8_t*>(w.data());
  auto* pb = reinterpret_cast<uint8_t*>(panels.data());
  for (int64_t p = 0; p < npanels; ++p) kernels::panel_pack(DType::F16, wb + p * kPanelRows * rb, pb + p * kPanelRows * rb, cols);
  std::vector<uint8_t> row(rb), all(kPanelRows * rb);
  kernels::panel_unpack(DType::F16, pb + kPanelRows * rb, all.data(), rb, cols);
  EXPECT_TRUE(std::equal(all.begin(), all.end(), wb + kPanelRows * rb)) << "whole panel";
  for (int r = 0; r < kPanelRows; ++r) {
    kernels::panel_unpack_row(DType::F16, pb, r, row.data(), cols);
    ASSERT_TRUE(std::equal(row.begin(), row.end(), wb + r * rb)) << "row " << r;
  }

  std::vector<float> want(static_cast<size_t>(rows)), got(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) want[r] = kernels::ref::f16_dot(wb + r * rb, x.data(), cols);
  kernels::ref::f16_dot_panels(pb, npanels, x.data(), cols, got.data());
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4)) << "reference";
  if (!cpu_features().has_avx512_set()) GTEST_SKIP() << "no AVX-512 (or LL3_CPU caps it): the F16 panel kernel and packs are AVX-512's";
  std::fill(got.begin(), got.end(), 0.0f);
  kernels::avx512::f16_dot_panels(pb, npanels, x.data(), cols, got.data());
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(0, std::memcmp(&want[r], &got[r], 4)) << "AVX-512, row " << r;

  const kernels::GemmF32Lanes* lanes = kernels::gemm_f32_lanes();
  ASSERT_NE(lanes, nullptr);
  for (int64_t nr : {16, 32}) {
    const size_t floats = kernels::lanes_w_floats(nr, cols);
    std::vector<float> a(floats + 16), b(floats + 16);  // the packs are 64-byte aligned
    auto aligned = [](std::vector<float>& v) {
      return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(v.data()) + 63) & ~uintptr_t{63});
    };
    float *from_rows = aligned(a), *from_panels = aligned(b);
    lanes->pack_w(DType::F16, wb, rb, nr, cols, from_rows);
    lanes->pack_w_f16_panels(pb, nr, cols, from_panels);
    EXPECT_EQ(0, std::memcmp(from_rows, from_panels, floats * 4)) << nr << " rows";
  }
}

TEST(Panels, UnpackGivesBackEveryRow) {
  std::mt19937 rng(5);
  for (const Case& c : kCases) {
    const int64_t cols = 1024;
    const size_t rb = dtype_row_bytes(c.type, cols);
    const std::vector<uint8_t> rows = random_rows(c, kPanelRows, cols, rng, false);
    std::vector<uint8_t> panel(rows.size());
    kernels::panel_pack(c.type, rows.data(), panel.data(), cols);
    EXPECT_NE(panel, rows) << dtype_name(c.type);
    std::vector<uint8_t> row(rb);
    for (int r = 0; r < kPanelRows; ++r) {
      kernels::panel_unpack_row(c.type, panel.data(), r, row.data(), cols);
      EXPECT_TRUE(std::equal(row.begin(), row.end(), rows.begin() + r * rb)) << dtype_name(c.type) << " row " << r;
    }
    // All 16 at once (the transposing path on AVX-512), into rows with a gap between them.
    const size_t stride = rb + 64;
    std::vector<uint8_t> all(kPanelRows * stride, 0xAB);
    kernels::panel_unpack(c.type, panel.data(), all.data(), stride, cols);
    for (int r = 0; r < kPanelRows; ++r) {
      EXPECT_TRUE(std::equal(rows.begin() + r * rb, rows.begin() + (r + 1) * rb, all.begin() + r * stride))
          << dtype_name(c.type) << " row " << r << " (whole panel)";
      EXPECT_TRUE(std::all_of(all.begin() + r * stride + rb, all.begin() + (r + 1) * stride, [](uint8_t b) { return b == 0xAB; }))
          << dtype_name(c.type) << " wrote past row " << r;
    }
  }
}

// The SIMD group transposes against the definition: dword g of row r goes to
// rows + r * stride + 4 g (+ gap for g >= 8 when there are 16 groups), xor 0x80 with flip.
TEST(Panels, GroupTransposesMatchTheDefinition) {
  using Fn = void (*)(const uint8_t*, int, uint8_t*, size_t, bool, int);
  std::vector<std::pair<const char*, Fn>> fns;
  if (cpu_features().has_avx2_set()) fns.push_back({"avx2", kernels::avx2::panel_groups_to_rows});
  if (cpu_features().has_avx512_set()) fns.push_back({"avx512", kernels::avx512::panel_groups_to_rows});
  if (fns.empty()) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(8);
  struct Shape {
    int ngroups, gap;
    bool flip;
  };
  for (const Shape& sh : {Shape{3, 0, false}, Shape{4, 0, false}, Shape{8, 0, true}, Shape{16, 0, false},
                          Shape{16, 2, true}, Shape{32, 0, false}, Shape{12, 0, false}}) {
    std::vector<uint8_t> groups(64 * sh.ngroups);
    for (uint8_t& b : groups) b = static_cast<uint8_t>(rng());
    const size_t stride = 4 * sh.ngroups + sh.gap + 8;
    std::vector<uint8_t> want(16 * stride, 0xAB);
    for (int g = 0; g < sh.ngroups; ++g) {
      for (int r = 0; r < 16; ++r) {
        for (int k = 0; k < 4; ++k) {
          const uint8_t v = groups[64 * g + 4 * r + k] ^ (sh.flip ? 0x80 : 0);
          want[r * stride + 4 * g + (sh.gap != 0 && g >= 8 ? sh.gap : 0) + k] = v;
        }
      }
    }
    for (const auto& [name, fn] : fns) {
      std::vector<uint8_t> got(16 * stride, 0xAB);
      fn(groups.data(), sh.ngroups, got.data(), stride, sh.flip, sh.gap);
      EXPECT_EQ(got, want) << name << " ngroups " << sh.ngroups << " gap " << sh.gap;
    }
  }
}

using PanelKernel = void (*)(const void*, int64_t, const void*, const void*, int64_t, float*);

// The panel kernel `fn` of type c.type equals the reference integer dot of every row.
void check_panel_kernel(const Case& c, PanelKernel fn, std::mt19937& rng) {
  const TypeTraits* tr = type_traits_ref(c.type);
  const TypeTraits* act = type_traits(tr->vec_dot_type);
  // 2048: the 1B shapes; 17408 / 16448: longer rows than any Llama 3 8B product.
  for (int64_t cols : {int64_t{512}, int64_t{2048}, c.type == DType::Q8_0 ? int64_t{16448} : int64_t{17408}}) {
    for (bool quantized : {true, false}) {
      const int64_t rows = 3 * kPanelRows;
      const size_t rb = dtype_row_bytes(c.type, cols);
      const std::vector<uint8_t> w = random_rows(c, rows, cols, rng, quantized);
      std::vector<uint8_t> panels(w.size());
      for (int64_t p = 0; p < rows / kPanelRows; ++p) {
        kernels::panel_pack(c.type, w.data() + p * kPanelRows * rb, panels.data() + p * kPanelRows * rb, cols);
      }
      // Random activations, and constant ones: every activation at the quantizer's limit, so
      // the block sums (bsums) are extreme too (the kernels' int16 bounds depend on them).
      for (bool extreme : {false, true}) {
      std::vector<float> x = test::random_normal(static_cast<size_t>(cols), rng());
      if (extreme) {
        // Q8_K maps each block's first largest-magnitude value to -127 (scale -127 / max): a
        // -1 first, then +1s, makes nearly every activation +127 and the group sums 16 * 127.
        std::fill(x.begin(), x.end(), 1.0f);
        for (size_t i = 0; i < x.size(); i += 256) x[i] = -1.0f;
      }
      std::vector<uint8_t> xq(dtype_row_bytes(tr->vec_dot_type, cols));
      act->from_float(x.data(), xq.data(), cols);
      std::vector<uint8_t> pa(kernels::panel_act_bytes(cols));
      kernels::panel_act(c.type, xq.data(), cols, pa.data());
      std::vector<float> y(static_cast<size_t>(rows), NAN);
      fn(panels.data(), rows / kPanelRows, xq.data(), pa.data(), cols, y.data());
      for (int64_t r = 0; r < rows; ++r) {
        const float ref = tr->dot_q(w.data() + r * rb, xq.data(), cols);
        // The tolerance scales with the terms before they cancel: the sum over blocks of each
        // block's |dot|, and within a Q4_K block its d-sum and dmin-sum apart (the dot with the
        // other field zeroed). The kernels' integer sums are exact; only the float steps differ.
        const DTypeInfo wi = dtype_info(c.type), ai = dtype_info(tr->vec_dot_type);
        double terms = 0;
        for (int64_t b = 0; b < cols / wi.block_size; ++b) {
          const uint8_t* blk = w.data() + r * rb + b * wi.block_bytes;
          const uint8_t* ablk = xq.data() + b * ai.block_bytes;
          for (int keep : c.f16_fields) {
            std::vector<uint8_t> one(blk, blk + wi.block_bytes);
            for (int f : c.f16_fields) {
              if (f != keep) one[f] = one[f + 1] = 0;
            }
            terms += std::fabs(tr->dot_q(one.data(), ablk, wi.block_size));
          }
        }
        EXPECT_NEAR(y[r], ref, 2e-5 * terms + 1e-4) << dtype_name(c.type) << " cols " << cols << " row " << r
                                                     << (quantized ? " quantized" : " random bytes")
                                                     << (extreme ? ", constant activations" : "");
      }
      }
    }
  }
}

// The decode kernel the dispatcher must pick for `type` (kernels/type_traits.cpp): the AVX-512
// set's where the CPU has that set (and LL3_CPU allows it), else the AVX2 set's, else none.
PanelKernel dispatched_panel_kernel(DType type) {
  const bool avx512 = cpu_features().has_avx512_set(), avx2 = cpu_features().has_avx2_set();
  switch (type) {
    case DType::Q4_K:
      return avx512 ? kernels::avx512::q4_k_dot_q8_k_panels : avx2 ? kernels::avx2::q4_k_dot_q8_k_panels : nullptr;
    case DType::Q6_K:
      return avx512 ? kernels::avx512::q6_k_dot_q8_k_panels : avx2 ? kernels::avx2::q6_k_dot_q8_k_panels : nullptr;
    case DType::Q8_0:
      return avx512 ? kernels::avx512::q8_0_dot_q8_0_panels : avx2 ? kernels::avx2::q8_0_dot_q8_0_panels : nullptr;
    default:
      return nullptr;
  }
}

// Each type on its own: the dispatch table holds the kernel the CPU's instruction sets call for
// (a missing entry fails, it does not skip), and that kernel equals the reference dot. Only
// where no entry is due (no AVX2 set) is there nothing to run.
class PanelDecodeKernel : public ::testing::TestWithParam<Case> {};
void PrintTo(const Case& c, std::ostream* os) { *os << dtype_name(c.type); }

TEST_P(PanelDecodeKernel, EqualsTheReferenceDot) {
  const Case& c = GetParam();
  const PanelKernel fn = type_traits(c.type)->dot_q_panels;
  ASSERT_TRUE(fn == dispatched_panel_kernel(c.type))
      << dtype_name(c.type) << "'s dot_q_panels entry is " << (fn == nullptr ? "missing" : "not the one the dispatch rules pick")
      << " (AVX2 set " << cpu_features().has_avx2_set() << ", AVX-512 set " << cpu_features().has_avx512_set() << ")";
  if (fn == nullptr) GTEST_SKIP() << "no panel kernels without the AVX2 set (this CPU, or LL3_CPU caps it)";
  std::mt19937 rng(6 + static_cast<int>(c.type));
  check_panel_kernel(c, fn, rng);
}

INSTANTIATE_TEST_SUITE_P(Types, PanelDecodeKernel, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(dtype_name(i.param.type)); });

TEST(Panels, Avx2DecodeKernelsEqualTheReferenceDot) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(7);
  check_panel_kernel(kCases[0], kernels::avx2::q4_k_dot_q8_k_panels, rng);
  check_panel_kernel(kCases[1], kernels::avx2::q6_k_dot_q8_k_panels, rng);
  check_panel_kernel(kCases[2], kernels::avx2::q8_0_dot_q8_0_panels, rng);
}

// The prompt kernels over panels (TypeTraits::dot_q_panel_rows): every row of every panel against
// every activation row equals the reference integer dot, and equals bit for bit the decode
// kernel of the same instruction set on that row alone (kernels/int_dot_order.h: one answer
// whatever the batch), for token counts around their passes of 4 and tiles of 16 and rows
// longer than one prepared segment.
using PanelRowKernel = void (*)(const void*, int64_t, const void*, size_t, int64_t, int64_t, float*, size_t);

void check_panel_row_kernel(const Case& c, PanelRowKernel fn, PanelKernel decode, std::mt19937& rng,
                            std::initializer_list<int64_t> token_counts = {1, 3, 4, 7, 9, 16, 17, 35}) {
  const TypeTraits* tr = type_traits_ref(c.type);
  const TypeTraits* act = type_traits_ref(tr->vec_dot_type);
  const DTypeInfo wi = dtype_info(c.type), ai = dtype_info(tr->vec_dot_type);
  // One unit; the 1B shapes; more blocks than the kernels prepare at a time; panels over
  // 128 KB, which for_panel_tiles runs one at a time with more than one tile (the AVX-512 Q4_K
  // kernel takes panels in pairs: one split between two runs).
  const int64_t unit = c.type == DType::Q8_0 ? 64 : 512;
  for (int64_t cols : {unit, int64_t{2048}, c.type == DType::Q8_0 ? int64_t{8256} : int64_t{8704}, int64_t{16384}}) {
    for (bool quantized : {true, false}) {
      const int64_t rows = 3 * kPanelRows;
      const size_t rb = dtype_row_bytes(c.type, cols), xb = dtype_row_bytes(tr->vec_dot_type, cols);
      const std::vector<uint8_t> w = random_rows(c, rows, cols, rng, quantized);
      std::vector<uint8_t> panels(w.size());
      for (int64_t p = 0; p < rows / kPanelRows; ++p) {
        kernels::panel_pack(c.type, w.data() + p * kPanelRows * rb, panels.data() + p * kPanelRows * rb, cols);
      }
      for (int64_t nx : token_counts) {
        std::vector<uint8_t> xq(static_cast<size_t>(nx) * xb);
        for (int64_t x = 0; x < nx; ++x) {
          std::vector<float> v = test::random_normal(static_cast<size_t>(cols), rng());
          if (x == 1) {  // every activation at the quantizer's limit (see check_panel_kernel): int16 bounds
            std::fill(v.begin(), v.end(), 1.0f);
            for (size_t i = 0; i < v.size(); i += 256) v[i] = -1.0f;
          }
          act->from_float(v.data(), xq.data() + x * xb, cols);
        }
        std::vector<float> y(static_cast<size_t>(nx * rows), NAN);
        fn(panels.data(), rows / kPanelRows, xq.data(), xb, nx, cols, y.data(), static_cast<size_t>(rows));
        std::vector<uint8_t> pa(kernels::panel_act_bytes(cols));
        std::vector<float> alone(static_cast<size_t>(rows));
        for (int64_t x = 0; x < nx; ++x) {
          kernels::panel_act(c.type, xq.data() + x * xb, cols, pa.data());
          decode(panels.data(), rows / kPanelRows, xq.data() + x * xb, pa.data(), cols, alone.data());
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_EQ(y[x * rows + r], alone[r]) << "cols " << cols << " token " << x << " of " << nx << " row " << r;
          }
        }
        for (int64_t x = 0; x < nx; ++x) {
          for (int64_t r = 0; r < rows; ++r) {
            const uint8_t* wr = w.data() + r * rb;
            const uint8_t* ar = xq.data() + x * xb;
            // The tolerance scales with the terms before they cancel: per block, each f16 field's
            // part on its own (Q4_K: d and dmin), as in check_panel_kernel.
            double terms = 0;
            for (int64_t b = 0; b < cols / wi.block_size; ++b) {
              const uint8_t* blk = wr + b * wi.block_bytes;
              for (int keep : c.f16_fields) {
                std::vector<uint8_t> one(blk, blk + wi.block_bytes);
                for (int f : c.f16_fields) {
                  if (f != keep) one[f] = one[f + 1] = 0;
                }
                terms += std::fabs(tr->dot_q(one.data(), ar + b * ai.block_bytes, wi.block_size));
              }
            }
            EXPECT_NEAR(y[x * rows + r], tr->dot_q(wr, ar, cols), 2e-5 * terms + 1e-4)
                << "cols " << cols << " token " << x << " of " << nx << " row " << r << (quantized ? " quantized" : "");
          }
        }
      }
    }
  }
}

TEST(Panels, PanelRowKernelsEqualTheReferenceDot) {
  std::mt19937 rng(8);
  if (cpu_features().has_avx2_set()) {
    check_panel_row_kernel(kCases[0], kernels::avx2::q4_k_dot_q8_k_panel_rows, kernels::avx2::q4_k_dot_q8_k_panels, rng);
    check_panel_row_kernel(kCases[1], kernels::avx2::q6_k_dot_q8_k_panel_rows, kernels::avx2::q6_k_dot_q8_k_panels, rng);
    check_panel_row_kernel(kCases[2], kernels::avx2::q8_0_dot_q8_0_panel_rows, kernels::avx2::q8_0_dot_q8_0_panels, rng);
  }
  if (cpu_features().has_avx512_set()) {
    check_panel_row_kernel(kCases[0], kernels::avx512::q4_k_dot_q8_k_panel_rows, kernels::avx512::q4_k_dot_q8_k_panels, rng);
    check_panel_row_kernel(kCases[1], kernels::avx512::q6_k_dot_q8_k_panel_rows, kernels::avx512::q6_k_dot_q8_k_panels, rng);
    check_panel_row_kernel(kCases[2], kernels::avx512::q8_0_dot_q8_0_panel_rows, kernels::avx512::q8_0_dot_q8_0_panels, rng);
  }
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2";
}

// Q8_0's side data (each activation block's scale as float and 128 times the sum of its quants)
// from the AVX-512 helper equals the definition, for quants at the extremes too.
TEST(Panels, Q8_0PanelActIsEachBlocksScaleAndSum) {
  if (!cpu_features().has_avx512_set()) GTEST_SKIP() << "no AVX-512";
  std::mt19937 rng(10);
  constexpr int64_t kBlocks = 37;
  std::vector<quant::BlockQ8_0> a(kBlocks);
  std::uniform_int_distribution<int> q(-128, 127);
  for (int64_t i = 0; i < kBlocks; ++i) {
    a[i].d = f32_to_f16(0.001f * static_cast<float>(i + 1));
    for (int j = 0; j < 32; ++j) a[i].qs[j] = static_cast<int8_t>(i == 0 ? -128 : i == 1 ? 127 : q(rng));
  }
  std::vector<kernels::Q80PanelAct> got(kBlocks);
  kernels::avx512::q8_0_panel_act(a.data(), kBlocks * 32, got.data());
  for (int64_t i = 0; i < kBlocks; ++i) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += a[i].qs[j];
    EXPECT_EQ(got[i].sum128, 128 * sum) << i;
    EXPECT_EQ(got[i].d, f16_to_f32(a[i].d)) << i;
  }
}

// The AMX-INT8 kernels against the AVX-512 decode kernels, bit for bit: fewer than 16 tokens
// (handed to the AVX-512 kernel), whole tiles, groups of 64 and more (a block's B shared by
// four tiles), and the last tile of a group overlapping the one before it, within the group
// (35, 70) and into the group before (65, 129: one token past a group).
TEST(Panels, AmxInt8PanelRowKernelsEqualTheDecodeKernels) {
  if (!cpu_features().amx_int8) GTEST_SKIP() << "no AMX-INT8 on this CPU (or LL3_CPU caps it)";
  std::mt19937 rng(9);
  check_panel_row_kernel(kCases[0], kernels::amx::q4_k_dot_q8_k_panel_rows, kernels::avx512::q4_k_dot_q8_k_panels, rng,
                         {5, 16, 35, 64, 65, 70, 129});
  check_panel_row_kernel(kCases[1], kernels::amx::q6_k_dot_q8_k_panel_rows, kernels::avx512::q6_k_dot_q8_k_panels, rng,
                         {5, 16, 35, 64, 65, 70, 129});
  // Q8_0 also carries each row's chain through y between segments of 64 units (8256 and 16384
  // columns: 129 and 256 units).
  check_panel_row_kernel(kCases[2], kernels::amx::q8_0_dot_q8_0_panel_rows, kernels::avx512::q8_0_dot_q8_0_panels, rng,
                         {5, 16, 35, 64, 65, 70, 129});
}

}  // namespace
}  // namespace ll3
