// A streaming read of a large buffer: the memory-bandwidth roofline that decode speed is
// measured against (`ll3 bench --roofline`).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ll3::kernels {

// Reads n bytes (n a multiple of 256) and returns a value depending on all of them, so the
// compiler cannot drop the loads.
uint64_t stream_read(const uint8_t* p, size_t n);

namespace ref {
uint64_t stream_read(const uint8_t* p, size_t n);
}
namespace avx2 {
uint64_t stream_read(const uint8_t* p, size_t n);
}
namespace avx512 {
uint64_t stream_read(const uint8_t* p, size_t n);
}

}  // namespace ll3::kernels
