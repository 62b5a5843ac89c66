#include "kernels/panels.h"

#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "core/half.h"
#include "kernels/cpu/panel_act.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_kernels.h"

namespace ll3::kernels {

using namespace ll3::quant;

namespace {

constexpr int R = static_cast<int>(kPanelRows);

// Each layout of panels.h, per unit, as runs: runs of 16 f16 fields (32 bytes in the panel, 2
// bytes per row), and runs of groups of 16 dwords (group g: 64 bytes in the panel, dword g of
// each row). This one description serves packing, unpacking one row and unpacking a panel.
struct HalfRun {
  int panel_off, row_off;
};
struct GroupRun {
  int panel_off, row_off, groups;
  bool flip = false;  // stored + 128
  int gap = 0;        // bytes skipped in the row after the first 8 of 16 groups
  // Offset in the row of group g.
  int row_at(int g) const { return row_off + 4 * g + (gap != 0 && g >= 8 ? gap : 0); }
};
struct Layout {
  int64_t unit_cols;
  size_t unit_row_bytes;
  HalfRun halves[2];
  GroupRun groups[10];
  int n_groups;
};

static_assert(sizeof(BlockQ4_K) == 144 && offsetof(BlockQ4_K, scales) == 4 && offsetof(BlockQ4_K, qs) == 16);
static_assert(sizeof(BlockQ6_K) == 210 && offsetof(BlockQ6_K, qh) == 128 && offsetof(BlockQ6_K, scales) == 192);
static_assert(sizeof(BlockQ8_0) == 34 && offsetof(BlockQ8_0, qs) == 2);

const Layout* layout_of(DType t) {
  // Q4_K, one block: d, dmin; 12 scale bytes (3 groups), 128 qs bytes (32 groups).
  static const Layout q4_k = {kQKK, 144, {{0, 0}, {32, 2}}, {{64, 4, 3}, {256, 16, 32}}, 2};
  // Q6_K, two blocks (rows at 0 and 210): d of both; then per block, in the order the kernel
  // reads them: 16 scale bytes (4 groups), and per half qh groups 8h..8h+7 followed by ql groups
  // 16h..16h+15.
  static const Layout q6_k = {2 * kQKK,
                              420,
                              {{0, 208}, {32, 418}},
                              {{64, 192, 4},
                               {320, 128, 8},
                               {832, 0, 16},
                               {1856, 160, 8},
                               {2368, 64, 16},
                               {3392, 402, 4},
                               {3648, 338, 8},
                               {4160, 210, 16},
                               {5184, 370, 8},
                               {5696, 274, 16}},
                              10};
  // Q8_0, two blocks: d; both blocks' 32 qs (8 groups each) in one run, the second block's d
  // (2 bytes) between them in the row.
  static const Layout q8_0 = {2 * kQK, 68, {{0, 0}, {32, 34}}, {{64, 2, 16, true, 2}}, 1};
  switch (t) {
    case DType::Q4_K: return &q4_k;
    case DType::Q6_K: return &q6_k;
    case DType::Q8_0: return &q8_0;
    default: return nullptr;
  }
}

// Calls fn(row_offset, panel_offset, bytes, flip) for each 2- or 4-byte run of row r in a unit.
template <class F>
void for_runs(const Layout& l, int r, F&& fn) {
  for (const HalfRun& h : l.halves) fn(h.row_off, h.panel_off + 2 * r, 2, false);
  for (int k = 0; k < l.n_groups; ++k) {
    const GroupRun& g = l.groups[k];
    for (int i = 0; i < g.groups; ++i) fn(g.row_at(i), g.panel_off + 64 * i + 4 * r, 4, g.flip);
  }
}

// Runs are 2 or 4 bytes: fixed-size copies the compiler turns into single moves (the whole
// checkpoint goes through here at load).
inline void copy_run(uint8_t* dst, const uint8_t* src, int bytes, bool flip) {
  if (bytes == 2) {
    std::memcpy(dst, src, 2);
    return;
  }
  uint32_t v;
  std::memcpy(&v, src, 4);
  if (flip) v ^= 0x80808080u;
  std::memcpy(dst, &v, 4);
}

}  // namespace

// F16 panels (panels.h): element k of the 16 rows is 16 consecutive halves, so packing and
// unpacking are 16 x 16 transposes of halves (in registers where the CPU has AVX-512, which
// every CPU that repacks F16 has: with scalar loops the repack added 0.4-1 s to loading the
// 2.3 GiB of the 1B preset).
namespace {
void f16_transpose16_scalar(const uint16_t* src, size_t src_stride, uint16_t* dst, size_t dst_stride) {
  for (int i = 0; i < R; ++i) {
    for (int j = 0; j < R; ++j) dst[j * dst_stride + i] = src[i * src_stride + j];
  }
}
void f16_transpose16(const uint16_t* src, size_t src_stride, uint16_t* dst, size_t dst_stride) {
  static const auto fn = cpu_features().has_avx512_set() ? avx512::f16_transpose16 : f16_transpose16_scalar;
  fn(src, src_stride, dst, dst_stride);
}
void f16_pack(const uint8_t* rows16, uint8_t* out, int64_t cols) {
  const auto* in = reinterpret_cast<const uint16_t*>(rows16);
  auto* o = reinterpret_cast<uint16_t*>(out);
  for (int64_t k0 = 0; k0 < cols; k0 += 16) f16_transpose16(in + k0, static_cast<size_t>(cols), o + k0 * R, R);
}
void f16_unpack(const uint8_t* panel, uint8_t* rows16, size_t row_stride, int64_t cols) {
  const auto* in = reinterpret_cast<const uint16_t*>(panel);
  auto* rows = reinterpret_cast<uint16_t*>(rows16);
  for (int64_t k0 = 0; k0 < cols; k0 += 16) f16_transpose16(in + k0 * R, R, rows + k0, row_stride / 2);
}
}  // namespace

bool panel_layout_exists(DType t, int64_t rows, int64_t cols) {
  if (t == DType::F16) return rows > 0 && rows % kPanelRows == 0 && cols > 0 && cols % 16 == 0;
  const Layout* l = layout_of(t);
  return l != nullptr && rows > 0 && rows % kPanelRows == 0 && cols > 0 && cols % l->unit_cols == 0;
}

void panel_pack(DType t, const uint8_t* rows16, uint8_t* out, int64_t cols) {
  if (t == DType::F16) return f16_pack(rows16, out, cols);
  const Layout& l = *layout_of(t);
  const int64_t units = cols / l.unit_cols;
  const size_t row_bytes = l.unit_row_bytes * static_cast<size_t>(units);
  for (int r = 0; r < R; ++r) {
    for_runs(l, r, [&](int row_off, int panel_off, int bytes, bool flip) {
      for (int64_t u = 0; u < units; ++u) {
        copy_run(out + u * R * l.unit_row_bytes + panel_off, rows16 + r * row_bytes + u * l.unit_row_bytes + row_off,
                 bytes, flip);
      }
    });
  }
}

void panel_pack_matrix(DType t, uint8_t* data, int64_t rows, int64_t cols) {
  const size_t panel_bytes = dtype_row_bytes(t, cols) * R;
  std::vector<uint8_t> rows16(panel_bytes);
  for (int64_t p = 0; p < rows / R; ++p) {
    uint8_t* panel = data + static_cast<size_t>(p) * panel_bytes;
    std::memcpy(rows16.data(), panel, panel_bytes);
    panel_pack(t, rows16.data(), panel, cols);
  }
}

void panel_groups_to_rows_scalar(const uint8_t* groups, int g0, int ngroups, uint8_t* rows, size_t row_stride,
                                 bool flip, int gap) {
  for (int g = g0; g < ngroups; ++g) {
    for (int r = 0; r < R; ++r) {
      copy_run(rows + r * row_stride + 4 * g + (gap != 0 && g >= 8 ? gap : 0), groups + 64 * g + 4 * r, 4, flip);
    }
  }
}

void panel_unpack(DType t, const uint8_t* panel, uint8_t* rows16, size_t row_stride, int64_t cols) {
  if (t == DType::F16) return f16_unpack(panel, rows16, row_stride, cols);
  static const auto groups_to_rows = cpu_features().has_avx512_set() ? avx512::panel_groups_to_rows
                                     : cpu_features().has_avx2_set()  ? avx2::panel_groups_to_rows
                                                                      : nullptr;
  if (groups_to_rows == nullptr) {
    for (int r = 0; r < R; ++r) panel_unpack_row(t, panel, r, rows16 + r * row_stride, cols);
    return;
  }
  const Layout& l = *layout_of(t);
  for (int64_t u = 0; u < cols / l.unit_cols; ++u) {
    const uint8_t* src = panel + u * R * l.unit_row_bytes;
    uint8_t* dst = rows16 + u * l.unit_row_bytes;
    for (const HalfRun& h : l.halves) {
      for (int r = 0; r < R; ++r) std::memcpy(dst + r * row_stride + h.row_off, src + h.panel_off + 2 * r, 2);
    }
    for (int k = 0; k < l.n_groups; ++k) {
      const GroupRun& g = l.groups[k];
      groups_to_rows(src + g.panel_off, g.groups, dst + g.row_off, row_stride, g.flip, g.gap);
    }
  }
}

void panel_act(DType weight_type, const void* xq, int64_t n, void* act) {
  switch (weight_type) {
    case DType::Q4_K: {
      const auto* a = static_cast<const quant::BlockQ8_K*>(xq);
      auto* out = static_cast<K4PanelAct*>(act);
      for (int64_t i = 0; i < n / quant::kQKK; ++i) {
        for (int t = 0; t < 8; ++t) {
          const int b = a[i].bsums[2 * t] + a[i].bsums[2 * t + 1];
          out[i].h[t] = static_cast<int8_t>(b >> 6);
          out[i].l[t] = static_cast<int8_t>(b & 63);
        }
      }
      break;
    }
    case DType::Q6_K: {
      const auto* a = static_cast<const quant::BlockQ8_K*>(xq);
      auto* out = static_cast<Q6PanelAct*>(act);
      for (int64_t i = 0; i < n / quant::kQKK; ++i) {
        for (int g = 0; g < 16; ++g) {
          const int b = a[i].bsums[g] + 2048;
          out[i].h[g] = static_cast<uint8_t>(b >> 6);
          out[i].l[g] = static_cast<uint8_t>(b & 63);
        }
      }
      break;
    }
    case DType::Q8_0: {
      // Made for every run of panels by the prompt kernels (kernels/cpu/row_passes.h): 32 scalar
      // adds a block took 21% of a 1B Q8_0 pp256 on Zen 5; vpsadbw: pp256 207-214 -> 258-265.
      static const bool simd = cpu_features().has_avx512_set();
      if (simd) {
        avx512::q8_0_panel_act(xq, n, act);
        break;
      }
      const auto* a = static_cast<const quant::BlockQ8_0*>(xq);
      auto* out = static_cast<Q80PanelAct*>(act);
      for (int64_t i = 0; i < n / quant::kQK; ++i) {
        int sum = 0;
        for (int j = 0; j < quant::kQK; ++j) sum += a[i].qs[j];
        out[i].d = f16_to_f32(a[i].d);
        out[i].sum128 = 128 * sum;
      }
      break;
    }
    default: break;
  }
}

void panel_unpack_row(DType t, const uint8_t* panel, int r, uint8_t* row, int64_t cols) {
  if (t == DType::F16) {
    const auto* in = reinterpret_cast<const uint16_t*>(panel);
    auto* out = reinterpret_cast<uint16_t*>(row);
    for (int64_t k = 0; k < cols; ++k) out[k] = in[k * R + r];
    return;
  }
  const Layout& l = *layout_of(t);
  for (int64_t u = 0; u < cols / l.unit_cols; ++u) {
    const uint8_t* src = panel + u * R * l.unit_row_bytes;
    uint8_t* dst = row + u * l.unit_row_bytes;
    for_runs(l, r, [&](int row_off, int panel_off, int bytes, bool flip) { copy_run(dst + row_off, src + panel_off, bytes, flip); });
  }
}

}  // namespace ll3::kernels
