// A streaming read of a large buffer: the memory-bandwidth roofline that decode speed is
// measured against (`ll3 bench --roofline`).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ll3::kernels {

// Reads n bytes (n a multiple of 256, p 64-byte aligned) and returns the xor of their 8-byte
// words, so the compiler cannot drop the loads. With `prefetch`, software prefetches 1 KB ahead into L1; without,
// the hardware prefetchers alone. Which is faster depends on the CPU (Sapphire Rapids: with, by
// 18%; Zen 4: without, by 0-10%), so the roofline takes the best of both.
uint64_t stream_read(const uint8_t* p, size_t n, bool prefetch = true);

namespace ref {
uint64_t stream_read(const uint8_t* p, size_t n);
}
namespace avx2 {
uint64_t stream_read(const uint8_t* p, size_t n, bool prefetch);
}
namespace avx512 {
uint64_t stream_read(const uint8_t* p, size_t n, bool prefetch);
}

}  // namespace ll3::kernels
