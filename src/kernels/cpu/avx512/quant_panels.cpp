// Decode kernels over the panel layout (kernels/panels.h; the prompt ones are in quant_panel_rows.cpp): 16 weight rows against one
// activation row, the rows in the 16 lanes of every vector. Each 64-byte load holds 4 weights
// of each row; vpdpbusd multiplies them with 4 activation bytes broadcast to all lanes, and the
// sums stay per row (per lane) to the end, so there is no horizontal reduction and every
// per-block step (scale decoding, f16 conversion, the K-quant mins) runs once for 16 rows.
//
// Loads are aligned (the layouts keep every group on a cache line) and each one issues its own
// prefetches, into L2 4 KB ahead and into L1 2 KB ahead (prefetch.h): spreading them one per
// line measured 81% of the streaming read for Q4_K where a burst of a block's 36 lines at its
// start reached 64-67%.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/avx512/panel_simd.h"
#include "kernels/cpu/panel_act.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/panels.h"
#include "kernels/quant_kernels.h"
#include "kernels/quant_simd_unpack.h"

namespace ll3::kernels::avx512 {

using namespace ll3::quant;

namespace {

constexpr int R = static_cast<int>(kPanelRows);

template <bool kLight = false>
inline __m512i load_line(const uint8_t* p) {
  prefetch_line<kLight>(p);
  return _mm512_loadu_si512(p);
}

}  // namespace

// ---- Q4_K x Q8_K ----------------------------------------------------------------------------
// Per block and row: sum_t d * sc_t * S_t - dmin * d_a * sum_t m_t * B_t, with S_t the integer
// dot of sub-block t (32 weights) and B_t its activation sum (bsums 2t + 2t+1). The mins term
// runs on vpdpbusd too: B_t (|B_t| <= 4096) is split as 64 * h_t + l_t with l_t in [0, 64), both
// int8, prepared once per activation block for all the panels.
void q4_k_dot_q8_k_panels(const void* panels, int64_t npanels, const void* xq, const void* act, int64_t n,
                          float* y) {
  constexpr size_t kUnit = R * sizeof(BlockQ4_K);
  const BlockQ8_K* a = static_cast<const BlockQ8_K*>(xq);
  const int64_t nb = n / kQKK;
  const size_t panel_bytes = kUnit * static_cast<size_t>(nb);
  const K4PanelAct* digits = static_cast<const K4PanelAct*>(act);
  const __m512i m3f = _mm512_set1_epi8(0x3f), m0f = _mm512_set1_epi8(0x0f), m03 = _mm512_set1_epi8(0x03);
  const __m512i mf0 = _mm512_set1_epi8(static_cast<char>(0xf0));
  const __m512i ff = _mm512_set1_epi32(0xff);
  for (int64_t p = 0; p < npanels; ++p) {
    const uint8_t* w = static_cast<const uint8_t*>(panels) + p * panel_bytes;
    __m512 acc = _mm512_setzero_ps(), acc_min = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const uint8_t* blk = w + i * kUnit;
      const __m512i sc0 = load_line(blk + 64), sc1 = load_line(blk + 128), sc2 = load_line(blk + 192);
      prefetch_line(blk);
      // The 6-bit scales and mins of the 8 sub-blocks, 4 per dword (quant::k4_scale_min).
      const __m512i sc_lo = _mm512_and_si512(sc0, m3f);
      const __m512i mn_lo = _mm512_and_si512(sc1, m3f);
      const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(sc2, m0f),
                                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(sc0, 6), m03), 4));
      const __m512i mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(sc2, 4), m0f),
                                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(sc1, 6), m03), 4));
      const uint8_t* aq = reinterpret_cast<const uint8_t*>(a[i].qs);
      // The high nibbles go to vpdpbusd in place (16 times their value: one mask, no shift);
      // their sum is divided by 16 once per block (exactly: every term is a multiple of 16).
      __m512i isum = _mm512_setzero_si512(), isum16 = isum;
      // qs group j (32 bytes: dwords 8j .. 8j+7) holds sub-block 2j in its low nibbles and
      // 2j+1 in its high ones, each in element order.
      LL3_UNROLL for (int j = 0; j < 4; ++j) {
        __m512i lo0 = _mm512_setzero_si512(), lo1 = lo0, hi0 = lo0, hi1 = lo0;
        LL3_UNROLL for (int k = 0; k < 8; k += 2) {
          const __m512i q0 = load_line(blk + 256 + 64 * (8 * j + k));
          const __m512i q1 = load_line(blk + 256 + 64 * (8 * j + k + 1));
          lo0 = _mm512_dpbusd_epi32(lo0, _mm512_and_si512(q0, m0f), bcast32(aq + 64 * j + 4 * k));
          hi0 = _mm512_dpbusd_epi32(hi0, _mm512_and_si512(q0, mf0), bcast32(aq + 64 * j + 32 + 4 * k));
          lo1 = _mm512_dpbusd_epi32(lo1, _mm512_and_si512(q1, m0f), bcast32(aq + 64 * j + 4 * k + 4));
          hi1 = _mm512_dpbusd_epi32(hi1, _mm512_and_si512(q1, mf0), bcast32(aq + 64 * j + 36 + 4 * k));
        }
        const __m512i scv = j < 2 ? sc_lo : sc_hi;
        const int sh = 16 * (j & 1);
        const __m512i sa = _mm512_and_si512(_mm512_srli_epi32(scv, sh), ff);
        const __m512i sb = _mm512_and_si512(_mm512_srli_epi32(scv, sh + 8), ff);
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(_mm512_add_epi32(lo0, lo1), sa));
        isum16 = _mm512_add_epi32(isum16, _mm512_mullo_epi32(_mm512_add_epi32(hi0, hi1), sb));
      }
      isum = _mm512_add_epi32(isum, _mm512_srai_epi32(isum16, 4));
      const K4PanelAct& dg = digits[i];
      __m512i mh = _mm512_dpbusd_epi32(_mm512_setzero_si512(), mn_lo, bcast32(dg.h));
      mh = _mm512_dpbusd_epi32(mh, mn_hi, bcast32(dg.h + 4));
      __m512i ml = _mm512_dpbusd_epi32(_mm512_setzero_si512(), mn_lo, bcast32(dg.l));
      ml = _mm512_dpbusd_epi32(ml, mn_hi, bcast32(dg.l + 4));
      const __m512i mins = _mm512_add_epi32(_mm512_slli_epi32(mh, 6), ml);
      const __m512 ad = _mm512_set1_ps(a[i].d);
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(load_f16x16(blk), ad), acc);
      acc_min = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(load_f16x16(blk + 32), ad), acc_min);
    }
    _mm512_storeu_ps(y + p * R, _mm512_sub_ps(acc, acc_min));
  }
}

// ---- Q6_K x Q8_K ----------------------------------------------------------------------------
// w = d * sc_g * (u - 32) per group g of 16 weights, u = 4 bits of ql | 2 bits of qh << 4:
//   sum w a = d * d_a * (sum_g sc_g * U_g - 32 * sum_g sc_g * bsum_g).
// The second sum runs on vpdpbusd: bsum_g + 2048 (in [0, 4096)) is split as 64 * h_g + l_g,
// both unsigned bytes, prepared once per activation block; the 2048 * sum_g sc_g it adds is
// taken off with one more product against ones.
void q6_k_dot_q8_k_panels(const void* panels, int64_t npanels, const void* xq, const void* act, int64_t n,
                          float* y) {
  constexpr size_t kUnit = R * 2 * sizeof(BlockQ6_K);
  const BlockQ8_K* a = static_cast<const BlockQ8_K*>(xq);
  const int64_t nb = n / kQKK;
  const size_t panel_bytes = kUnit * static_cast<size_t>(nb / 2);
  const Q6PanelAct* digits = static_cast<const Q6PanelAct*>(act);
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t p = 0; p < npanels; ++p) {
    const uint8_t* w = static_cast<const uint8_t*>(panels) + p * panel_bytes;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const int64_t h2 = i & 1;
      const uint8_t* unit = w + (i / 2) * kUnit;
      const uint8_t* blk = unit + 64 + 3328 * h2;
      const uint8_t* aq = reinterpret_cast<const uint8_t*>(a[i].qs);
      const Q6PanelAct& dg = digits[i];
      // Scales: 4 dwords (groups 4s .. 4s+3) per row; the bsum correction first.
      __m512i sc[4], ch = _mm512_setzero_si512(), cl = ch, c1 = ch;
      LL3_UNROLL for (int s = 0; s < 4; ++s) {
        sc[s] = load_line(blk + 64 * s);
        ch = _mm512_dpbusd_epi32(ch, bcast32(dg.h + 4 * s), sc[s]);
        cl = _mm512_dpbusd_epi32(cl, bcast32(dg.l + 4 * s), sc[s]);
        c1 = _mm512_dpbusd_epi32(c1, ones, sc[s]);
      }
      const __m512i corr = _mm512_sub_epi32(_mm512_add_epi32(_mm512_slli_epi32(ch, 6), cl), _mm512_slli_epi32(c1, 11));
      __m512i isum = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(corr, 5));
      LL3_UNROLL for (int h = 0; h < 2; ++h) {
        // qh dword mm holds, in bit pairs 0..3, the high bits of weights 4mm, 32 + 4mm,
        // 64 + 4mm and 96 + 4mm of this half (+ 0..3 each).
        __m512i qh[8];
        const uint8_t* half = blk + 256 + 1536 * h;
        LL3_UNROLL for (int mm = 0; mm < 8; ++mm) qh[mm] = load_line(half + 64 * mm);
        LL3_UNROLL for (int q = 0; q < 4; ++q) {
          // ql dwords 4q .. 4q+3: low nibbles are group 8h + q, high nibbles group 8h + 4 + q.
          __m512i ul = _mm512_setzero_si512(), uh = ul;
          LL3_UNROLL for (int t = 0; t < 4; ++t) {
            const int kk = 4 * q + t;
            const __m512i ql = load_line(half + 512 + 64 * kk);
            const __m512i hb = qh[kk % 8];
            __m512i lo, hi;
            q6_k_assemble(ql, hb, q, lo, hi);
            ul = _mm512_dpbusd_epi32(ul, lo, bcast32(aq + 128 * h + 4 * kk));
            uh = _mm512_dpbusd_epi32(uh, hi, bcast32(aq + 128 * h + 64 + 4 * kk));
          }
          // Group scales, sign-extended from byte (g % 4) of scale dword g / 4.
          const int gl = 8 * h + q, gh = 8 * h + 4 + q;
          const __m512i sl = _mm512_srai_epi32(_mm512_slli_epi32(sc[gl / 4], 24 - 8 * (gl % 4)), 24);
          const __m512i sh = _mm512_srai_epi32(_mm512_slli_epi32(sc[gh / 4], 24 - 8 * (gh % 4)), 24);
          isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(ul, sl));
          isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(uh, sh));
        }
      }
      prefetch_line(unit);
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(load_f16x16(unit + 32 * h2), _mm512_set1_ps(a[i].d)), acc);
    }
    _mm512_storeu_ps(y + p * R, acc);
  }
}

// ---- Q8_0 x Q8_0 ----------------------------------------------------------------------------
// The weights are stored + 128 (unsigned): sum (w + 128) a - 128 * sum a = sum w a, with sum a
// prepared once per activation block. Two blocks (one unit) per step, two integer chains each.
void q8_0_dot_q8_0_panels(const void* panels, int64_t npanels, const void* xq, const void* act, int64_t n,
                          float* y) {
  constexpr size_t kUnit = R * 2 * sizeof(BlockQ8_0);
  const BlockQ8_0* a = static_cast<const BlockQ8_0*>(xq);
  const int64_t nb = n / kQK;
  const size_t panel_bytes = kUnit * static_cast<size_t>(nb / 2);
  const Q80PanelAct* as = static_cast<const Q80PanelAct*>(act);
  for (int64_t p = 0; p < npanels; ++p) {
    const uint8_t* w = static_cast<const uint8_t*>(panels) + p * panel_bytes;
    __m512 acc = _mm512_setzero_ps();  // one chain: the order of kernels/int_dot_order.h
    for (int64_t i = 0; i < nb; i += 2) {
      const uint8_t* u = w + (i / 2) * kUnit;
      prefetch_line<true>(u);
      prefetch_sparse(u);  // a unit is 1088 bytes: two, about one per 512 (Zen 5)
      prefetch_sparse(u + 512);
      const uint8_t* a0 = reinterpret_cast<const uint8_t*>(a[i].qs);
      const uint8_t* a1 = reinterpret_cast<const uint8_t*>(a[i + 1].qs);
      __m512i s0a = _mm512_setzero_si512(), s0b = s0a, s1a = s0a, s1b = s0a;
      LL3_UNROLL for (int k = 0; k < 8; k += 2) {
        s0a = _mm512_dpbusd_epi32(s0a, load_line<true>(u + 64 + 64 * k), bcast32(a0 + 4 * k));
        s0b = _mm512_dpbusd_epi32(s0b, load_line<true>(u + 128 + 64 * k), bcast32(a0 + 4 * k + 4));
        s1a = _mm512_dpbusd_epi32(s1a, load_line<true>(u + 576 + 64 * k), bcast32(a1 + 4 * k));
        s1b = _mm512_dpbusd_epi32(s1b, load_line<true>(u + 640 + 64 * k), bcast32(a1 + 4 * k + 4));
      }
      const __m512i d0 = _mm512_sub_epi32(_mm512_add_epi32(s0a, s0b), _mm512_set1_epi32(as[i].sum128));
      const __m512i d1 = _mm512_sub_epi32(_mm512_add_epi32(s1a, s1b), _mm512_set1_epi32(as[i + 1].sum128));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d0), _mm512_mul_ps(load_f16x16(u), _mm512_set1_ps(as[i].d)), acc);
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d1), _mm512_mul_ps(load_f16x16(u + 32), _mm512_set1_ps(as[i + 1].d)), acc);
    }
    _mm512_storeu_ps(y + p * R, acc);
  }
}

}  // namespace ll3::kernels::avx512
