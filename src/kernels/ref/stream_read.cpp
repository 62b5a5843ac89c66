#include <cstring>

#include "kernels/stream_read.h"

namespace ll3::kernels {

namespace ref {
uint64_t stream_read(const uint8_t* p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t i = 0; i < n; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, 32);
    a ^= w[0];
    b ^= w[1];
    c ^= w[2];
    d ^= w[3];
  }
  return a ^ b ^ c ^ d;
}
}  // namespace ref

}  // namespace ll3::kernels
