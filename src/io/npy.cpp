#include "io/npy.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ll3 {

Status write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  std::string dims;
  size_t count = 1;
  for (int64_t d : shape) {
    dims += std::to_string(d) + ",";
    count *= static_cast<size_t>(d);
  }
  if (shape.size() > 1) dims.pop_back();  // "(n,)" for 1-D, "(a,b)" otherwise
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + length (2) + header + '\n' must be a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::errorf("%s: cannot write: %s", path.c_str(), std::strerror(errno));
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char magic[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  bool ok = std::fwrite(magic, 1, 8, f) == 8 && std::fwrite(&len, 2, 1, f) == 1 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            std::fwrite(data, sizeof(float), count, f) == count;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return Status::errorf("%s: write failed", path.c_str());
  return Status();
}

}  // namespace ll3
