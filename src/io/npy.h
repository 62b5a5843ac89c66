// Writing float32 arrays as NumPy .npy files (version 1.0, little-endian, C order).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ll3 {

Status write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape);

}  // namespace ll3
