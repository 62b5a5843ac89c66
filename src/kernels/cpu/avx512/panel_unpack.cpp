// Panel groups (kernels/panels.h) back to rows with in-register transposes: 16 groups of 16
// dwords are one 16 x 16 dword transpose (4 shuffle stages), after which each register is 64
// contiguous bytes of one row. The prompt paths unpack every weight row once per batch this way.
#include <immintrin.h>

#include "kernels/panels.h"

namespace ll3::kernels::avx512 {

namespace {

constexpr int kAhead = 2048;  // prefetch distance in the panel (bytes)

// a[g] holds dword g of rows 0..15; afterwards a[r] holds dwords 0..15 of row r.
inline void transpose16(__m512i* a) {
  __m512i t[16], u[16], v[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(a[2 * i], a[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(a[2 * i], a[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 4; ++k) {
      v[8 * i + k] = _mm512_shuffle_i32x4(u[8 * i + k], u[8 * i + 4 + k], 0x88);
      v[8 * i + 4 + k] = _mm512_shuffle_i32x4(u[8 * i + k], u[8 * i + 4 + k], 0xdd);
    }
  }
  for (int k = 0; k < 8; ++k) {
    a[k] = _mm512_shuffle_i32x4(v[k], v[8 + k], 0x88);
    a[8 + k] = _mm512_shuffle_i32x4(v[k], v[8 + k], 0xdd);
  }
}

}  // namespace

void panel_groups_to_rows(const uint8_t* groups, int ngroups, uint8_t* rows, size_t row_stride, bool flip,
                          int gap) {
  const __m512i x = _mm512_set1_epi8(flip ? static_cast<char>(0x80) : 0);
  int g = 0;
  for (int n; g + 8 <= ngroups; g += n) {
    n = ngroups - g >= 16 ? 16 : 8;  // a last half-run of 8 groups pads with zeros
    __m512i a[16];
    for (int k = 0; k < 16; ++k) {
      // The panel is read front to back: keep the stream ahead of the loads (DRAM-bound otherwise).
      if (k < n) _mm_prefetch(reinterpret_cast<const char*>(groups + 64 * (g + k) + kAhead), _MM_HINT_T0);
      a[k] = k < n ? _mm512_xor_si512(_mm512_loadu_si512(groups + 64 * (g + k)), x) : _mm512_setzero_si512();
    }
    transpose16(a);
    for (int r = 0; r < 16; ++r) {
      uint8_t* dst = rows + r * row_stride + 4 * g;
      if (n == 16 && gap != 0) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm512_castsi512_si256(a[r]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 + gap), _mm512_extracti64x4_epi64(a[r], 1));
      } else if (n == 16) {
        _mm512_storeu_si512(dst, a[r]);
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm512_castsi512_si256(a[r]));
      }
    }
  }
  panel_groups_to_rows_scalar(groups, g, ngroups, rows, row_stride, flip, gap);  // fewer than 8 left
}

void f16_transpose16(const uint16_t* src, size_t src_stride, uint16_t* dst, size_t dst_stride) {
  // The halves widened to dwords, so the dword transpose moves them: every bit kept (no float
  // conversion, which would quiet a signalling NaN).
  __m512i a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i * src_stride)));
  transpose16(a);
  for (int i = 0; i < 16; ++i) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i * dst_stride), _mm512_cvtepi32_epi16(a[i]));
}

}  // namespace ll3::kernels::avx512
