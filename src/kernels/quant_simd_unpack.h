// AVX2 helpers that unpack quantized blocks into plain bytes, shared by the avx2 and avx512
// kernel directories. Include only from files compiled with at least the AVX2 flags. Everything
// here has internal linkage (static), so each instruction set's copy stays its own: an inline
// function with external linkage could be merged across directories by the linker and run
// AVX-512 code on an AVX2-only CPU.
#pragma once

#ifndef __AVX2__
#error "quant_simd_unpack.h needs the AVX2 flags (kernels/cpu/avx2 or kernels/cpu/avx512)"
#endif

#include <immintrin.h>

#include <cstring>

#include "core/half.h"
#include "kernels/quant_blocks.h"

// Fixed-count loops over the chunks of a block must be unrolled: clang keeps them as loops
// otherwise, spilling the unpacked chunks to the stack and rebuilding constants every time.
// GCC has no unroll(full); a count at least the trip count (every such loop here runs at most
// 8 times) unrolls the loop completely.
// LL3_ROLLED and LL3_UNROLL_BY(n) keep loops as loops where full unrolling made the hot code
// too big to run from the core's op cache (avx512/quant_panel_rows.cpp).
#define LL3_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define LL3_UNROLL _Pragma("clang loop unroll(full)")
#define LL3_UNROLL_BY(n) LL3_PRAGMA(clang loop unroll_count(n))
#define LL3_ROLLED _Pragma("clang loop unroll(disable)")
#else
#define LL3_UNROLL _Pragma("GCC unroll 16")
#define LL3_UNROLL_BY(n) LL3_PRAGMA(GCC unroll n)
#define LL3_ROLLED _Pragma("GCC unroll 1")
#endif

namespace ll3::kernels::simd {

using namespace ll3::quant;

// f16 -> f32 with the F16C instruction: exact like the scalar f16_to_f32, but branch-free and
// a fraction of its cost (it runs once or twice per block on the hot path).
static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// One K-quant super-block unpacked: weight j = s[j / 16] * (u[j] - off) - mn[j / 16], with u
// unsigned (0..63) and off the type's constant bias (32 for Q6_K, 4 for Q3_K, else 0). This is
// also exactly ggml's dequantization order (scale * q, then minus the min) when computed with a
// separate multiply and subtract.
struct KUnpacked {
  alignas(64) uint8_t u[kQKK];
  float s[16];   // d * sub-block scale
  float mn[16];  // dmin * sub-block min (0 for the symmetric types)
  // The same as integers, for the integer path (kernels/int_dot_order.h): weight j =
  // d * isc[j / 16] * (u[j] - off) - dmin * imn[j / 16].
  alignas(32) int16_t isc[16];
  alignas(32) int16_t imn[16];
  int off;
  bool has_min;
};

static inline __m256i low_nibbles(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
static inline __m256i high_nibbles(__m256i v) {
  return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
}
// Byte b of every dword, zero-extended, in both int16 halves of the dword (a vpmaddwd factor:
// the AVX2 panel kernels' sub-block scales).
static inline __m256i byte_to_pair16(__m256i v, int b) {
  const __m256i x = _mm256_and_si256(_mm256_srli_epi32(v, 8 * b), _mm256_set1_epi32(0xff));
  return _mm256_or_si256(x, _mm256_slli_epi32(x, 16));
}
static inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
static inline void store256(uint8_t* p, __m256i v) {
  _mm256_store_si256(reinterpret_cast<__m256i*>(p), v);
}
// `value` in every byte of v that has the one-bit mask `bit` set, else 0.
static inline __m256i bit_select(__m256i v, uint8_t bit, uint8_t value) {
  const __m256i b = _mm256_set1_epi8(static_cast<char>(bit));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(v, b), b);
  return _mm256_and_si256(set, _mm256_set1_epi8(static_cast<char>(value)));
}

// 32 bits to 32 bytes: byte j is 0xFF when bit j of bits is set.
static inline __m256i expand_bits(uint32_t bits) {
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuf);
  const __m256i sel = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel);
}

// The 32 values of a Q4_0 / Q4_1 block in element order, 0..15 (unbiased).
static inline __m256i unpack_q4_32(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

// The 32 values of a Q5_0 / Q5_1 block in element order, 0..31 (unbiased).
static inline __m256i unpack_q5_32(const uint8_t* qs, const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const __m256i hi = _mm256_and_si256(expand_bits(h), _mm256_set1_epi8(0x10));
  return _mm256_or_si256(unpack_q4_32(qs), hi);
}

static inline void unpack_q2_k(const BlockQ2_K& b, KUnpacked& o) {
  const float d = h2f(b.d), dmin = h2f(b.dmin);
  for (int g = 0; g < 16; ++g) {
    o.isc[g] = b.scales[g] & 0xF;
    o.imn[g] = b.scales[g] >> 4;
    o.s[g] = d * o.isc[g];
    o.mn[g] = dmin * o.imn[g];
  }
  const __m256i three = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; ++h) {
    const __m256i q = load256(b.qs + 32 * h);
    store256(o.u + 128 * h, _mm256_and_si256(q, three));
    store256(o.u + 128 * h + 32, _mm256_and_si256(_mm256_srli_epi16(q, 2), three));
    store256(o.u + 128 * h + 64, _mm256_and_si256(_mm256_srli_epi16(q, 4), three));
    store256(o.u + 128 * h + 96, _mm256_and_si256(_mm256_srli_epi16(q, 6), three));
  }
  o.off = 0;
  o.has_min = true;
}

static inline void unpack_q3_k(const BlockQ3_K& b, KUnpacked& o) {
  const float d = h2f(b.d);
  int8_t sc[16];
  q3k_scales(b.scales, sc);
  for (int g = 0; g < 16; ++g) {
    o.isc[g] = sc[g];
    o.imn[g] = 0;
    o.s[g] = d * sc[g];
    o.mn[g] = 0.0f;
  }
  const __m256i three = _mm256_set1_epi8(3);
  const __m256i hm = load256(b.hmask);
  for (int h = 0; h < 2; ++h) {
    const __m256i q = load256(b.qs + 32 * h);
    for (int j = 0; j < 4; ++j) {
      const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), three);
      const __m256i hb = bit_select(hm, static_cast<uint8_t>(1u << (4 * h + j)), 4);
      store256(o.u + 128 * h + 32 * j, _mm256_or_si256(lo, hb));
    }
  }
  o.off = 4;
  o.has_min = false;
}

static inline void k4_scales(const uint8_t* packed, float d, float dmin, KUnpacked& o) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    k4_scale_min(j, packed, &sc, &m);
    o.isc[2 * j] = o.isc[2 * j + 1] = sc;
    o.imn[2 * j] = o.imn[2 * j + 1] = m;
    o.s[2 * j] = o.s[2 * j + 1] = d * sc;
    o.mn[2 * j] = o.mn[2 * j + 1] = dmin * m;
  }
}

static inline void unpack_q4_k(const BlockQ4_K& b, KUnpacked& o) {
  k4_scales(b.scales, h2f(b.d), h2f(b.dmin), o);
  for (int k = 0; k < 4; ++k) {
    const __m256i q = load256(b.qs + 32 * k);
    store256(o.u + 64 * k, low_nibbles(q));
    store256(o.u + 64 * k + 32, high_nibbles(q));
  }
  o.off = 0;
  o.has_min = true;
}

static inline void unpack_q5_k(const BlockQ5_K& b, KUnpacked& o) {
  k4_scales(b.scales, h2f(b.d), h2f(b.dmin), o);
  const __m256i qh = load256(b.qh);
  for (int k = 0; k < 4; ++k) {
    const __m256i q = load256(b.qs + 32 * k);
    const __m256i h1 = bit_select(qh, static_cast<uint8_t>(1u << (2 * k)), 0x10);
    const __m256i h2 = bit_select(qh, static_cast<uint8_t>(2u << (2 * k)), 0x10);
    store256(o.u + 64 * k, _mm256_or_si256(low_nibbles(q), h1));
    store256(o.u + 64 * k + 32, _mm256_or_si256(high_nibbles(q), h2));
  }
  o.off = 0;
  o.has_min = true;
}

static inline void unpack_q6_k(const BlockQ6_K& b, KUnpacked& o) {
  const float d = h2f(b.d);
  for (int g = 0; g < 16; ++g) {
    o.isc[g] = b.scales[g];
    o.imn[g] = 0;
    o.s[g] = d * b.scales[g];
    o.mn[g] = 0.0f;
  }
  const __m256i m30 = _mm256_set1_epi8(0x30);
  for (int h = 0; h < 2; ++h) {
    const __m256i a = load256(b.ql + 64 * h);
    const __m256i c = load256(b.ql + 64 * h + 32);
    const __m256i q = load256(b.qh + 32 * h);
    uint8_t* u = o.u + 128 * h;
    store256(u, _mm256_or_si256(low_nibbles(a), _mm256_and_si256(_mm256_slli_epi16(q, 4), m30)));
    store256(u + 32, _mm256_or_si256(low_nibbles(c), _mm256_and_si256(_mm256_slli_epi16(q, 2), m30)));
    store256(u + 64, _mm256_or_si256(high_nibbles(a), _mm256_and_si256(q, m30)));
    store256(u + 96, _mm256_or_si256(high_nibbles(c), _mm256_and_si256(_mm256_srli_epi16(q, 2), m30)));
  }
  o.off = 32;
  o.has_min = false;
}

}  // namespace ll3::kernels::simd
