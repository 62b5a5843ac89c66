#include <immintrin.h>

#include "kernels/stream_read.h"

namespace ll3::kernels::avx2 {

uint64_t stream_read(const uint8_t* p, size_t n, size_t ahead) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (size_t i = 0; i < n; i += 128) {
    if (ahead > 0 && i + ahead < n) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i + ahead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p + i + ahead + 64), _MM_HINT_T0);
    }
    a = _mm256_xor_si256(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_xor_si256(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    c = _mm256_xor_si256(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    d = _mm256_xor_si256(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  __m256i x = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  return static_cast<uint64_t>(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 1) ^ _mm256_extract_epi64(x, 2) ^
                               _mm256_extract_epi64(x, 3));  // the xor of every 8-byte word, as ref::stream_read
}

}  // namespace ll3::kernels::avx2
