// A 2-D weight used as y = W x, in whatever type the checkpoint stores it.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "kernels/panels.h"
#include "kernels/type_traits.h"

namespace ll3 {

// `rows` outputs, `cols` inputs, each row `row_bytes` of `type`, in place in the mapped file;
// or, with `panels`, repacked at load into 16-row panels (kernels/panels.h) for the decode
// kernels, when rows are read through row_in.
struct WeightMatrix {
  std::string name;
  DType type = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  const uint8_t* data = nullptr;
  const TypeTraits* traits = nullptr;
  bool panels = false;
  // W8A8 (model/w8a8_format.h) only: the per-row weight scales (rows), and the input's static
  // activation scale, or 0 where each activation row gets its own (amax / 127) at run time.
  // Its data is always in kernels::w8a8_pack's panels, which rows_in / row_in cannot unpack.
  const float* row_scales = nullptr;
  float input_scale = 0.0f;
  // Rows [r0, r0 + nr) in the type's own layout, row_bytes apart: in place, or unpacked from
  // their panels into buf (r0 a multiple of 16, nr too or reaching the last row).
  const uint8_t* rows_in(int64_t r0, int64_t nr, uint8_t* buf) const {
    if (!panels) return row(r0);
    for (int64_t r = 0; r < nr; r += kernels::kPanelRows) {
      kernels::panel_unpack(type, row(r0 + r), buf + r * row_bytes, row_bytes, cols);
    }
    return buf;
  }
  // Row r in the type's own layout: in place, or unpacked from its panel into buf.
  const uint8_t* row_in(int64_t r, uint8_t* buf) const {
    if (!panels) return row(r);
    kernels::panel_unpack_row(type, row(r - r % kernels::kPanelRows), static_cast<int>(r % kernels::kPanelRows), buf,
                              cols);
    return buf;
  }
  // Where row r starts in the row layout; with panels, the start of panel r / 16 when r % 16 == 0.
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
};

}  // namespace ll3
