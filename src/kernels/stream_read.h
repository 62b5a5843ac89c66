// A streaming read of a large buffer: the memory-bandwidth roofline that decode speed is
// measured against (`ll3 bench --roofline`).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ll3::kernels {

// Reads n bytes (n a multiple of 256, p 64-byte aligned) and returns the xor of their 8-byte
// words, so the compiler cannot drop the loads. With `ahead` > 0, a software prefetch into L1
// of every line that many bytes ahead; with 0, the hardware prefetchers alone. Which is fastest
// depends on the CPU and on the host's load (Sapphire Rapids: 1 KB ahead, by 18% over none;
// Zen 4: none, by 0-10%; Zen 5 under a loaded host: 16 KB ahead, by about 10% over either), so
// the roofline takes the best of kStreamReadAheads.
uint64_t stream_read(const uint8_t* p, size_t n, size_t ahead);
inline constexpr size_t kStreamReadAheads[] = {0, 1024, 16384};

namespace ref {
uint64_t stream_read(const uint8_t* p, size_t n);
}
namespace avx2 {
uint64_t stream_read(const uint8_t* p, size_t n, size_t ahead);
}
namespace avx512 {
uint64_t stream_read(const uint8_t* p, size_t n, size_t ahead);
}

}  // namespace ll3::kernels
