#include "kernels/panels.h"

#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/quant_blocks.h"

namespace ll3::kernels {

using namespace ll3::quant;

namespace {

constexpr int R = static_cast<int>(kPanelRows);

// Where each byte of a row's unit goes in the panel's unit, as runs of 2 or 4 bytes. The two
// directions share this one description so they cannot disagree.
//   fn(row_offset, panel_offset, bytes, flip): flip = the bytes are stored + 128.
template <class F>
void q4_k_unit(int r, F&& fn) {
  fn(0, 2 * r, 2, false);                                    // d
  fn(2, 32 + 2 * r, 2, false);                               // dmin
  for (int k = 0; k < 3; ++k) fn(4 + 4 * k, 64 + 64 * k + 4 * r, 4, false);       // scales
  for (int k = 0; k < 32; ++k) fn(16 + 4 * k, 256 + 64 * k + 4 * r, 4, false);    // qs
}
static_assert(sizeof(BlockQ4_K) == 144 && offsetof(BlockQ4_K, scales) == 4 && offsetof(BlockQ4_K, qs) == 16);

template <class F>
void q8_0_unit(int r, F&& fn) {
  for (int h = 0; h < 2; ++h) {
    fn(34 * h, 32 * h + 2 * r, 2, false);                                            // d
    for (int k = 0; k < 8; ++k) fn(34 * h + 2 + 4 * k, 64 + 512 * h + 64 * k + 4 * r, 4, true);  // qs
  }
}
static_assert(sizeof(BlockQ8_0) == 34 && offsetof(BlockQ8_0, qs) == 2);

template <class F>
void q6_k_unit(int r, F&& fn) {
  for (int h = 0; h < 2; ++h) {
    const int row = 210 * h, blk = 576 + 3072 * h;
    fn(row + 208, 32 * h + 2 * r, 2, false);                                            // d
    for (int s = 0; s < 4; ++s) fn(row + 192 + 4 * s, 64 + 256 * h + 64 * s + 4 * r, 4, false);  // scales
    for (int k = 0; k < 32; ++k) fn(row + 4 * k, blk + 64 * k + 4 * r, 4, false);                // ql
    for (int m = 0; m < 16; ++m) fn(row + 128 + 4 * m, blk + 2048 + 64 * m + 4 * r, 4, false);   // qh
  }
}
static_assert(sizeof(BlockQ6_K) == 210 && offsetof(BlockQ6_K, qh) == 128 && offsetof(BlockQ6_K, scales) == 192);

struct Format {
  int64_t unit_cols = 0;     // columns per unit
  size_t unit_row_bytes = 0; // bytes of one row's unit
};

Format format_of(DType t) {
  switch (t) {
    case DType::Q4_K: return {kQKK, sizeof(BlockQ4_K)};
    case DType::Q6_K: return {2 * kQKK, 2 * sizeof(BlockQ6_K)};
    case DType::Q8_0: return {2 * kQK, 2 * sizeof(BlockQ8_0)};
    default: return {};
  }
}

template <class F>
void for_unit(DType t, int r, F&& fn) {
  if (t == DType::Q4_K) q4_k_unit(r, fn);
  if (t == DType::Q6_K) q6_k_unit(r, fn);
  if (t == DType::Q8_0) q8_0_unit(r, fn);
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

// The same layouts as runs of whole groups, for unpacking 16 rows at once: runs of 16 f16
// fields (32 bytes in the panel, 2 bytes per row) and runs of groups of 16 dwords.
struct HalfRun {
  int panel_off, row_off;
};
struct GroupRun {
  int panel_off, row_off, groups;
  bool flip;
  int gap = 0;  // see avx512::panel_groups_to_rows
};
struct UnitRuns {
  HalfRun halves[2];
  GroupRun groups[6];
  int n_groups;
};

const UnitRuns* runs_of(DType t) {
  static const UnitRuns q4_k = {{{0, 0}, {32, 2}}, {{64, 4, 3, false}, {256, 16, 32, false}}, 2};
  static const UnitRuns q6_k = {{{0, 208}, {32, 418}},
                                {{64, 192, 4, false},
                                 {320, 402, 4, false},
                                 {576, 0, 32, false},
                                 {2624, 128, 16, false},
                                 {3648, 210, 32, false},
                                 {5696, 338, 16, false}},
                                6};
  // Q8_0: both blocks' qs in one transpose, the second block's d (2 bytes) between them in the row.
  static const UnitRuns q8_0 = {{{0, 0}, {32, 34}}, {{64, 2, 16, true, 2}}, 1};
  switch (t) {
    case DType::Q4_K: return &q4_k;
    case DType::Q6_K: return &q6_k;
    case DType::Q8_0: return &q8_0;
    default: return nullptr;
  }
}

}  // namespace

bool panel_layout_exists(DType t, int64_t rows, int64_t cols) {
  const Format f = format_of(t);
  return f.unit_cols != 0 && rows > 0 && rows % kPanelRows == 0 && cols > 0 && cols % f.unit_cols == 0;
}

void panel_pack(DType t, const uint8_t* rows16, uint8_t* out, int64_t cols) {
  const Format f = format_of(t);
  const int64_t units = cols / f.unit_cols;
  const size_t row_bytes = f.unit_row_bytes * static_cast<size_t>(units);
  for (int r = 0; r < R; ++r) {
    for_unit(t, r, [&](int row_off, int panel_off, int bytes, bool flip) {
      for (int64_t u = 0; u < units; ++u) {
        copy_run(out + u * R * f.unit_row_bytes + panel_off, rows16 + r * row_bytes + u * f.unit_row_bytes + row_off,
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

void panel_unpack(DType t, const uint8_t* panel, uint8_t* rows16, size_t row_stride, int64_t cols) {
  const Format f = format_of(t);
  const int64_t units = cols / f.unit_cols;
  if (!cpu_features().has_avx512_set()) {
    for (int r = 0; r < R; ++r) panel_unpack_row(t, panel, r, rows16 + r * row_stride, cols);
    return;
  }
  const UnitRuns& runs = *runs_of(t);
  for (int64_t u = 0; u < units; ++u) {
    const uint8_t* src = panel + u * R * f.unit_row_bytes;
    uint8_t* dst = rows16 + u * f.unit_row_bytes;
    for (const HalfRun& h : runs.halves) {
      for (int r = 0; r < R; ++r) std::memcpy(dst + r * row_stride + h.row_off, src + h.panel_off + 2 * r, 2);
    }
    for (int k = 0; k < runs.n_groups; ++k) {
      const GroupRun& g = runs.groups[k];
      avx512::panel_groups_to_rows(src + g.panel_off, g.groups, dst + g.row_off, row_stride, g.flip, g.gap);
    }
  }
}

void panel_unpack_row(DType t, const uint8_t* panel, int r, uint8_t* row, int64_t cols) {
  const Format f = format_of(t);
  const int64_t units = cols / f.unit_cols;
  for (int64_t u = 0; u < units; ++u) {
    const uint8_t* src = panel + u * R * f.unit_row_bytes;
    uint8_t* dst = row + u * f.unit_row_bytes;
    for_unit(t, r, [&](int row_off, int panel_off, int bytes, bool flip) {
      copy_run(dst + row_off, src + panel_off, bytes, flip);
    });
  }
}

}  // namespace ll3::kernels
