#include <immintrin.h>

#include "kernels/stream_read.h"

namespace ll3::kernels::avx512 {

// Prefetching 1 KB ahead into L1 measured 34.9 GB/s with 2 threads on huge pages (Sapphire
// Rapids), against 29.6 for plain loads: the roofline should be the best streaming read the
// machine allows, which the plain loop understated (decode kernels prefetch too). On Zen 4 the
// plain loop is the faster one, on a loaded Zen 5 host 16 KB ahead (2 threads, 1 GiB, medians
// of 5: none 50.5 GB/s, 1 KB 49.1, 16 KB 55.3); the caller takes the best.
uint64_t stream_read(const uint8_t* p, size_t n, size_t ahead) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  for (size_t i = 0; i < n; i += 256) {
    if (ahead > 0 && i + ahead < n) {
      for (size_t l = 0; l < 256; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + i + ahead + l), _MM_HINT_T0);
    }
    a = _mm512_xor_si512(a, _mm512_load_si512(p + i));
    b = _mm512_xor_si512(b, _mm512_load_si512(p + i + 64));
    c = _mm512_xor_si512(c, _mm512_load_si512(p + i + 128));
    d = _mm512_xor_si512(d, _mm512_load_si512(p + i + 192));
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d)));
  uint64_t x = 0;
  for (uint64_t l : lanes) x ^= l;  // the xor of every 8-byte word, as ref::stream_read
  return x;
}

}  // namespace ll3::kernels::avx512
