// AVX2 + FMA + F16C kernels of F32 / F16 / BF16 rows (compiled with -mavx2 -mfma -mf16c only).
#include <immintrin.h>

#include "core/half.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/vec_f32.h"
#include "kernels/float_kernels.h"

namespace ll3::kernels::avx2 {

// Lanes 0-7 and 8-15 of kernels/float_dot_order.h's 16 in two accumulators: weight groups of 8
// converted by Load (zero past n), the lanes summed as hsum8(lo + hi). dot16_finish: the last
// partial group and the sum, for accumulators that have run over [0, i).
template <class Load>
inline float dot16_finish(Load load, const float* x, int64_t i, int64_t n, __m256 lo, __m256 hi) {
  // A last partial group: zero weights and activations past n leave those lanes as they are
  // (fma(0, 0, a) = a: the lanes are never -0).
  alignas(32) float xt[16] = {};
  for (int64_t j = i; j < n; ++j) xt[j - i] = x[j];
  if (i < n) {
    lo = _mm256_fmadd_ps(load(i), _mm256_load_ps(xt), lo);
    if (i + 8 < n) hi = _mm256_fmadd_ps(load(i + 8), _mm256_load_ps(xt + 8), hi);
  }
  return hsum8(_mm256_add_ps(lo, hi));
}

template <class Load>
inline float dot16(Load load, const float* x, int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    lo = _mm256_fmadd_ps(load(i), _mm256_loadu_ps(x + i), lo);
    hi = _mm256_fmadd_ps(load(i + 8), _mm256_loadu_ps(x + i + 8), hi);
  }
  return dot16_finish(load, x, i, n, lo, hi);
}

// Four rows against one x (TypeTraits::dot_f32_wrows), each row's two chains as dot16's, with
// the prefetch of the AVX-512 version (avx512/float_types.cpp). RowLoad(r) is row r's Load.
// F16 decode, 1B preset, 2 threads, LL3_CPU=avx2, alternated with the one-row kernel (which has
// no prefetch): 3.1-3.3 -> 7.2-7.4 t/s (35% -> 76-81% of `ll3 bench --roofline`); BF16 4.5-5.5
// -> 6.8-7.1.
template <class RowLoad>
inline void dot16x4(RowLoad row_load, const uint8_t* w, size_t stride, const float* x, int64_t n, int elem_bytes,
                    float* y) {
  __m256 lo[4], hi[4];
  for (int r = 0; r < 4; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    if ((i * elem_bytes) % 64 == 0) {
      for (int r = 0; r < 4; ++r) {
        const size_t off = static_cast<size_t>(i * elem_bytes);
        if (kRowsPrefetchL1) _mm_prefetch(reinterpret_cast<const char*>(w + r * stride + off) + kPrefetchL1Bytes, _MM_HINT_T0);
        _mm_prefetch(rows_ahead_line(w, stride, off, r), _MM_HINT_T1);
      }
    }
    const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
    for (int r = 0; r < 4; ++r) {
      lo[r] = _mm256_fmadd_ps(row_load(r)(i), x0, lo[r]);
      hi[r] = _mm256_fmadd_ps(row_load(r)(i + 8), x1, hi[r]);
    }
  }
  for (int r = 0; r < 4; ++r) y[r] = dot16_finish(row_load(r), x, i, n, lo[r], hi[r]);
}

// Eight weights from i (zero past n) as floats.
template <class T, class Cvt>
inline __m256 load8(const T* w, int64_t i, int64_t n, Cvt cvt) {
  if (i + 8 <= n) return cvt(w + i);
  alignas(32) T t[8] = {};
  for (int64_t j = i; j < n; ++j) t[j - i] = w[j];
  return cvt(t);
}

float f32_dot(const void* row, const float* x, int64_t n) {
  const float* w = static_cast<const float*>(row);
  return dot16([&](int64_t i) { return load8(w, i, n, [](const float* p) { return _mm256_loadu_ps(p); }); }, x, n);
}

float f16_dot(const void* row, const float* x, int64_t n) {
  const uint16_t* w = static_cast<const uint16_t*>(row);
  return dot16([&](int64_t i) {
    return load8(w, i, n, [](const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); });
  }, x, n);
}

void f16_to_float(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  }
  for (; i < n; ++i) dst[i] = f16_to_f32(s[i]);
}

// vcvtps2ph rounds to nearest even, overflows to infinity and makes subnormals as the
// reference does; only a NaN's bits differ (it keeps part of the payload), so a group holding
// one takes the reference. The F16 KV cache stores every K and V row through this: the scalar
// loop was 1.2% of a 16-row decode step.
void f16_from_float(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(src + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {
      ref::f16_from_float(src + i, d + i, 8);
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  ref::f16_from_float(src + i, d + i, n - i);
}

namespace {
// dot_f32_wrows over rows of T, each converted by Cvt as the one-row kernel does.
template <class T, class Cvt>
void dot_wrows(const void* rows, size_t stride, int64_t nrows, const float* x, int64_t n, float* y,
               float (*one)(const void*, const float*, int64_t), Cvt cvt) {
  const uint8_t* w = static_cast<const uint8_t*>(rows);
  int64_t r = 0;
  for (; r + 4 <= nrows; r += 4) {
    const uint8_t* base = w + r * stride;
    auto row_load = [&](int k) {
      const T* row = reinterpret_cast<const T*>(base + k * stride);
      return [row, n, cvt](int64_t i) { return load8(row, i, n, cvt); };
    };
    dot16x4(row_load, base, stride, x, n, static_cast<int>(sizeof(T)), y + r);
  }
  for (; r < nrows; ++r) y[r] = one(w + r * stride, x, n);
}
}  // namespace

void f32_dot_wrows(const void* rows, size_t stride, int64_t nrows, const float* x, int64_t n, float* y) {
  dot_wrows<float>(rows, stride, nrows, x, n, y, f32_dot, [](const float* p) { return _mm256_loadu_ps(p); });
}

void f16_dot_wrows(const void* rows, size_t stride, int64_t nrows, const float* x, int64_t n, float* y) {
  dot_wrows<uint16_t>(rows, stride, nrows, x, n, y, f16_dot,
                      [](const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); });
}

// BF16 rows in the pair order of kernels/float_dot_order.h: pairs 0-7 of a block of 32 in
// one accumulator and 8-15 in the other; the weights' odd elements are the high halves of
// their words, the even ones the low halves shifted up, and x's are gathered by shuffles once
// per block for all the rows in flight. A last partial block goes through zeroed copies.
namespace {
struct XPairs {
  __m256 odd[2], even[2];  // pairs 0-7, 8-15
};
inline XPairs x_pairs(const float* x) {
  XPairs p;
  for (int h = 0; h < 2; ++h) {
    const __m256 a = _mm256_loadu_ps(x + 16 * h), b = _mm256_loadu_ps(x + 16 * h + 8);
    p.odd[h] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xdd)), 0xd8));
    p.even[h] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xd8));
  }
  return p;
}
inline void pairs_step(const uint16_t* w, const XPairs& x, __m256 acc[2]) {
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  for (int h = 0; h < 2; ++h) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 16 * h));
    acc[h] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(v, high)), x.odd[h], acc[h]);
    acc[h] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), x.even[h], acc[h]);
  }
}
template <int R>
void bf16_pairs_rows(const uint8_t* w, size_t stride, const float* x, int64_t n, float* y) {
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const auto row = [&](int r) { return reinterpret_cast<const uint16_t*>(w + r * stride); };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int r = 0; r < R; ++r) {  // a block is one cache line of each row
      const char* p = reinterpret_cast<const char*>(row(r) + i);
      if (R == 1 || kRowsPrefetchL1) _mm_prefetch(p + kPrefetchL1Bytes, _MM_HINT_T0);  // one row: its only prefetch
      if (R > 1) _mm_prefetch(rows_ahead_line(w, stride, 2 * static_cast<size_t>(i), r), _MM_HINT_T1);
    }
    const XPairs xp = x_pairs(x + i);
    for (int r = 0; r < R; ++r) pairs_step(row(r) + i, xp, acc[r]);
  }
  if (i < n) {
    alignas(32) float xt[32] = {};
    for (int64_t j = i; j < n; ++j) xt[j - i] = x[j];
    const XPairs xp = x_pairs(xt);
    for (int r = 0; r < R; ++r) {
      alignas(32) uint16_t wt[32] = {};
      for (int64_t j = i; j < n; ++j) wt[j - i] = row(r)[j];
      pairs_step(wt, xp, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = hsum8(_mm256_add_ps(acc[r][0], acc[r][1]));
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

// Dword l of a block of 32 holds element 2l in its low half and 2l + 1 in its high half: the
// odd elements are the dwords masked, the even ones the dwords shifted up (float_dot_order.h).
// Through the baseline build's 4-wide loop this was 7.6% of a BF16 prompt under LL3_CPU=avx2.
void bf16_to_float_pairs(const void* src, float* dst, int64_t n) {
  const uint8_t* s = static_cast<const uint8_t*>(src);
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  for (int64_t b = 0; b < n; b += 32) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 2 * b));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 2 * b + 32));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b), _mm256_and_si256(w0, high));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b + 8), _mm256_and_si256(w1, high));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b + 16), _mm256_slli_epi32(w0, 16));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b + 24), _mm256_slli_epi32(w1, 16));
  }
}

}  // namespace ll3::kernels::avx2
