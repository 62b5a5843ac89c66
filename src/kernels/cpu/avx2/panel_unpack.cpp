// Panel groups (kernels/panels.h) back to rows on AVX2: as the AVX-512 version, with 8 x 8
// dword transposes: 8 groups' first halves (rows 0-7) and then their second halves (rows
// 8-15), after which each register is 32 contiguous bytes of one row.
#include <immintrin.h>

#include "kernels/panels.h"

namespace ll3::kernels::avx2 {

namespace {

constexpr int kAhead = 2048;  // prefetch distance in the panel (bytes)

// a[g] holds dword g of 8 rows; afterwards a[r] holds dwords 0..7 of row r.
inline void transpose8(__m256i* a) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(a[2 * i], a[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(a[2 * i], a[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int k = 0; k < 4; ++k) {
    a[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);
    a[4 + k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31);
  }
}

}  // namespace

void panel_groups_to_rows(const uint8_t* groups, int ngroups, uint8_t* rows, size_t row_stride, bool flip,
                          int gap) {
  const __m256i x = _mm256_set1_epi8(flip ? static_cast<char>(0x80) : 0);
  int g = 0;
  for (; g + 8 <= ngroups; g += 8) {
    // With a gap (ngroups == 16), groups 8..15 land gap bytes further along the row.
    const int shift = gap != 0 && g >= 8 ? gap : 0;
    for (int k = 0; k < 8; ++k) _mm_prefetch(reinterpret_cast<const char*>(groups + 64 * (g + k) + kAhead), _MM_HINT_T0);
    for (int h = 0; h < 2; ++h) {
      __m256i a[8];
      for (int k = 0; k < 8; ++k) {
        a[k] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(groups + 64 * (g + k) + 32 * h)), x);
      }
      transpose8(a);
      for (int r = 0; r < 8; ++r) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows + (8 * h + r) * row_stride + 4 * g + shift), a[r]);
      }
    }
  }
  panel_groups_to_rows_scalar(groups, g, ngroups, rows, row_stride, flip, gap);  // fewer than 8 left
}

}  // namespace ll3::kernels::avx2
