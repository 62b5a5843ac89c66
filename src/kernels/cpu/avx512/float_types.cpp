// AVX-512 kernels of F32 / F16 / BF16 rows (compiled with the avx512 directory's flags only).
#include <immintrin.h>

#include "core/half.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/vec_f32.h"
#include "kernels/float_kernels.h"
#include "kernels/quant_simd_unpack.h"  // LL3_UNROLL

namespace ll3::kernels::avx512 {

namespace {
inline __m512 load_bf16(const uint16_t* p) {
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
}  // namespace

// One 16-lane accumulator in the order of kernels/float_dot_order.h: weight groups of 16
// converted by Load, a masked last group, the lanes summed by reduce16.
template <class Load>
inline float dot16(Load load, const float* x, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = _mm512_fmadd_ps(load(i), _mm512_loadu_ps(x + i), acc);
  if (i < n) {
    const __mmask16 m = lanes_before(i, n);
    acc = _mm512_mask3_fmadd_ps(load(i), _mm512_maskz_loadu_ps(m, x + i), acc, m);
  }
  return reduce16(acc);
}

// Four rows against one x: four chains, each one dot16's, so the fma latency of one chain no
// longer paces the stream. Prefetch: each row 2 KB ahead into L1, and the rows eight on into L2
// (rows_ahead_line; the rows are consecutive: 4 KB ahead of a row is its neighbour, already
// being read). F16 decode, 1B preset, 2 threads, alternated with the one-row kernel on a quiet
// host: 11.5-11.9 -> 12.0-12.3 t/s (87-89% -> 90-91% of `ll3 bench --roofline`); four rows on
// instead of eight, or sixteen: 2-8% slower; eight rows at once instead of four: slower.
// Whole vectors run unmasked, the masked step only at a row's end: Zen 5, one core, F16 rows
// in L2 (`quant_gemv_bench gemv_float_wrows/F16/2048/128`) 37 -> 43 GB/s.
template <class Load>
inline void dot16x4(Load load, const uint8_t* w, size_t stride, const float* x, int64_t n, int line_elems, float* y) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  const auto prefetch = [&](int64_t i) {
    if (i % line_elems != 0) return;
    for (int r = 0; r < 4; ++r) {
      const size_t off = static_cast<size_t>(i) * (64 / line_elems);
      if (kRowsPrefetchL1) _mm_prefetch(reinterpret_cast<const char*>(w + r * stride + off) + kPrefetchL1Bytes, _MM_HINT_T0);
      _mm_prefetch(rows_ahead_line(w, stride, off, r), _MM_HINT_T1);
    }
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    prefetch(i);
    const __m512 xv = _mm512_loadu_ps(x + i);
    for (int r = 0; r < 4; ++r) acc[r] = _mm512_fmadd_ps(load(w + r * stride, i, __mmask16(0xffff)), xv, acc[r]);
  }
  if (i < n) {  // the masked lanes add nothing: the bits of the full-vector steps
    prefetch(i);
    const __mmask16 m = lanes_before(i, n);
    const __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
    for (int r = 0; r < 4; ++r) acc[r] = _mm512_mask3_fmadd_ps(load(w + r * stride, i, m), xv, acc[r], m);
  }
  for (int r = 0; r < 4; ++r) y[r] = reduce16(acc[r]);
}

template <class Load>
inline void dot_wrows(Load load, float (*one)(const void*, const float*, int64_t), const void* rows, size_t stride,
                      int64_t nrows, const float* x, int64_t n, int line_elems, float* y) {
  const uint8_t* w = static_cast<const uint8_t*>(rows);
  int64_t r = 0;
  for (; r + 4 <= nrows; r += 4) dot16x4(load, w + r * stride, stride, x, n, line_elems, y + r);
  for (; r < nrows; ++r) y[r] = one(w + r * stride, x, n);
}

float f32_dot(const void* row, const float* x, int64_t n) {
  const float* w = static_cast<const float*>(row);
  return dot16(
      [&](int64_t i) {
        if ((i & 31) == 0) prefetch_ahead<2>(w + i);
        return load16_f32(w + i, lanes_before(i, n));
      },
      x, n);
}

float f16_dot(const void* row, const float* x, int64_t n) {
  const uint16_t* w = static_cast<const uint16_t*>(row);
  return dot16(
      [&](int64_t i) {
        if ((i & 31) == 0) prefetch_ahead<1>(w + i);
        return load16_f16(w + i, lanes_before(i, n));
      },
      x, n);
}

// F16 panels (kernels/panels.h): per k, the 16 rows' weights are one 32-byte vector, converted
// into the rows' lanes and multiplied by a broadcast x[k]. Accumulator l takes k = l (mod 16),
// so that lane r of accumulator l is lane l of row r's dot16 chain, and the tree of
// float_dot_order.h over the accumulators gives every row its bits. One sequential stream per
// thread, prefetched as the AVX-512 Q8_0 kernel is: per line where the CPU gains by it
// (Intel), once per 512 bytes on Zen 5 (prefetch_sparse; per line was slower than none there,
// 1B preset, 2 threads, paired share of the read: none 86-88%, 8 KB ahead into L1 81-83%; one
// line in eight 12 KB ahead: +5-15% t/s over none, alternated rounds).
void f16_dot_panels(const void* panels, int64_t npanels, const float* x, int64_t n, float* y) {
  for (int64_t p = 0; p < npanels; ++p) {
    const uint16_t* w = static_cast<const uint16_t*>(panels) + p * 16 * n;
    __m512 acc[16];
    LL3_UNROLL for (int l = 0; l < 16; ++l) acc[l] = _mm512_setzero_ps();
    for (int64_t k0 = 0; k0 < n; k0 += 16) {
      const uint16_t* wk = w + k0 * 16;  // 512 bytes: 16 steps of 16 rows
      LL3_UNROLL for (int c = 0; c < 8; ++c) prefetch_line<true>(wk + 32 * c);
      prefetch_sparse(wk);
      LL3_UNROLL for (int l = 0; l < 16; ++l) {
        const __m512 wv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wk + 16 * l)));
        acc[l] = _mm512_fmadd_ps(wv, _mm512_set1_ps(x[k0 + l]), acc[l]);
      }
    }
    __m512 s8[8], s4[4];
    LL3_UNROLL for (int l = 0; l < 8; ++l) s8[l] = _mm512_add_ps(acc[l], acc[l + 8]);
    LL3_UNROLL for (int l = 0; l < 4; ++l) s4[l] = _mm512_add_ps(s8[l], s8[l + 4]);
    _mm512_storeu_ps(y + 16 * p, _mm512_add_ps(_mm512_add_ps(s4[0], s4[2]), _mm512_add_ps(s4[1], s4[3])));
  }
}

void f16_to_float(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
  }
  for (; i < n; ++i) dst[i] = f16_to_f32(s[i]);
}

// As avx2::f16_from_float, 16 at a time.
void f16_from_float(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(src + i);
    if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0) {
      ref::f16_from_float(src + i, d + i, 16);
      continue;
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  ref::f16_from_float(src + i, d + i, n - i);
}

void f16_to_bf16(const void* src, uint16_t* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
    const __m512 hi = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 16)));
    _mm512_storeu_si512(dst + i, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
  }
  for (; i < n; ++i) dst[i] = f32_to_bf16(f16_to_f32(s[i]));
}

void bf16_to_float(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load_bf16(s + i));
  for (; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
}

void f32_dot_wrows(const void* rows, size_t stride, int64_t nrows, const float* x, int64_t n, float* y) {
  dot_wrows([](const uint8_t* w, int64_t i, __mmask16 m) { return load16_f32(reinterpret_cast<const float*>(w) + i, m); },
            f32_dot, rows, stride, nrows, x, n, 16, y);
}

void f16_dot_wrows(const void* rows, size_t stride, int64_t nrows, const float* x, int64_t n, float* y) {
  dot_wrows([](const uint8_t* w, int64_t i, __mmask16 m) { return load16_f16(reinterpret_cast<const uint16_t*>(w) + i, m); },
            f16_dot, rows, stride, nrows, x, n, 32, y);
}

// BF16 rows in the pair order of kernels/float_dot_order.h, by fma (x need not be a bf16
// value): per block of 32, the weights' odd elements are the high halves of its 16 words and
// the even ones the low halves shifted up; x's odd and even elements are gathered by two
// permutes, once per block for all the rows in flight. Up to 4 rows at once, with the
// prefetch of dot16x4.
namespace {
template <int R>
inline void bf16_pairs_rows(const uint8_t* w, size_t stride, const float* x, int64_t n, float* y) {
  const __m512i odd_idx = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512i even_idx = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 32) {
    for (int r = 0; r < R; ++r) {  // a block is one cache line of each row
      const char* p = reinterpret_cast<const char*>(w + r * stride + 2 * i);
      if (R == 1 || kRowsPrefetchL1) _mm_prefetch(p + kPrefetchL1Bytes, _MM_HINT_T0);  // one row: its only prefetch
      if (R > 1) _mm_prefetch(rows_ahead_line(w, stride, 2 * static_cast<size_t>(i), r), _MM_HINT_T1);
    }
    const __mmask16 m0 = lanes_before(i, n), m1 = i + 16 < n ? lanes_before(i + 16, n) : 0;
    const __m512 x0 = _mm512_maskz_loadu_ps(m0, x + i), x1 = _mm512_maskz_loadu_ps(m1, x + i + 16);
    const __m512 xo = _mm512_permutex2var_ps(x0, odd_idx, x1), xe = _mm512_permutex2var_ps(x0, even_idx, x1);
    const __mmask32 mw = n - i >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1ull << (n - i)) - 1);
    for (int r = 0; r < R; ++r) {
      const __m512i v = _mm512_maskz_loadu_epi16(mw, reinterpret_cast<const uint16_t*>(w + r * stride) + i);
      acc[r] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(v, high)), xo, acc[r]);
      acc[r] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), xe, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = reduce16(acc[r]);
}
}  // namespace

float bf16_dot(const void* row, const float* x, int64_t n) {
  float y;
  bf16_pairs_rows<1>(static_cast<const uint8_t*>(row), 0, x, n, &y);
  return y;
}

void bf16_dot_wrows(const void* rows, size_t stride, int64_t nrows, const float* x, int64_t n, float* y) {
  const uint8_t* w = static_cast<const uint8_t*>(rows);
  int64_t r = 0;
  for (; r + 4 <= nrows; r += 4) bf16_pairs_rows<4>(w + r * stride, stride, x, n, y + r);
  for (; r < nrows; ++r) y[r] = bf16_dot(w + r * stride, x, n);
}

// As avx2's, a block of 32 per register.
void bf16_to_float_pairs(const void* src, float* dst, int64_t n) {
  const uint8_t* s = static_cast<const uint8_t*>(src);
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  for (int64_t b = 0; b < n; b += 32) {
    const __m512i w = _mm512_loadu_si512(s + 2 * b);
    _mm512_storeu_si512(dst + b, _mm512_and_si512(w, high));
    _mm512_storeu_si512(dst + b + 16, _mm512_slli_epi32(w, 16));
  }
}

}  // namespace ll3::kernels::avx512
