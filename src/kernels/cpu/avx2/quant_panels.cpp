// Decode kernels over the panel layout (kernels/panels.h; the Q4_K and Q6_K prompt kernels
// are in quant_panel_rows.cpp) for CPUs with AVX2 but without AVX-512 VNNI: the same scheme as
// avx512/quant_panels.cpp with 8 rows per 256-bit vector (a panel's 64-byte group is rows 0-7
// in its first half and rows 8-15 in its second). Without
// vpdpbusd, 4 weights times 4 activation bytes take vpmaddubsw (pairs to int16), and several of
// those are summed in int16 before one vpmaddwd widens them, with the block scale folded into
// that vpmaddwd for free: the int16 sums are bounded (noted per kernel) so none saturates.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/avx2/panel_simd.h"
#include "kernels/cpu/panel_act.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/row_passes.h"
#include "kernels/panels.h"
#include "kernels/quant_kernels.h"
#include "kernels/quant_simd_unpack.h"

namespace ll3::kernels::avx2 {

using namespace ll3::quant;

namespace {

constexpr int R = static_cast<int>(kPanelRows);

}  // namespace

// ---- Q4_K x Q8_K ----------------------------------------------------------------------------
// As the AVX-512 kernel, both halves of the panel in one pass (as Q6_K below: one broadcast
// per two vpmaddubsw). The int16 sums: a sub-block's 32 weights (<= 15) times activations
// (|a| <= 127) give 16 products per lane, <= 30480; the mins' digit products <= 2 * 2 * 63 * 64.
void q4_k_dot_q8_k_panels(const void* panels, int64_t npanels, const void* xq, const void* act, int64_t n,
                          float* y) {
  constexpr size_t kUnit = R * sizeof(BlockQ4_K);
  const BlockQ8_K* a = static_cast<const BlockQ8_K*>(xq);
  const int64_t nb = n / kQKK;
  const size_t panel_bytes = kUnit * static_cast<size_t>(nb);
  const K4PanelAct* digits = static_cast<const K4PanelAct*>(act);
  const __m256i m3f = _mm256_set1_epi8(0x3f), m0f = _mm256_set1_epi8(0x0f), m03 = _mm256_set1_epi8(0x03);
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (int64_t p = 0; p < npanels; ++p) {
    const uint8_t* w = static_cast<const uint8_t*>(panels) + p * panel_bytes;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    __m256 acc_min[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < nb; ++i) {
      const uint8_t* blk = w + i * kUnit;
      prefetch_line(blk);
      prefetch_line(blk + 64);
      prefetch_line(blk + 128);
      prefetch_line(blk + 192);
      const uint8_t* aq = reinterpret_cast<const uint8_t*>(a[i].qs);
      const auto& dg = digits[i];
      __m256i sc_lo[2], sc_hi[2], isum[2];
      for (int h = 0; h < 2; ++h) {
        const __m256i sc0 = load_half(blk + 64, h), sc2 = load_half(blk + 192, h);
        sc_lo[h] = _mm256_and_si256(sc0, m3f);
        sc_hi[h] = _mm256_or_si256(_mm256_and_si256(sc2, m0f),
                                   _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(sc0, 6), m03), 4));
        isum[h] = _mm256_setzero_si256();
      }
      for (int j = 0; j < 4; ++j) {
        __m256i lo[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}, hi[2] = {lo[0], lo[0]};
        for (int k = 0; k < 8; ++k) {
          const uint8_t* line = blk + 256 + 64 * (8 * j + k);
          prefetch_line(line);
          const __m256i al = bcast32(aq + 64 * j + 4 * k), ah = bcast32(aq + 64 * j + 32 + 4 * k);
          for (int h = 0; h < 2; ++h) {
            const __m256i q = load_half(line, h);
            lo[h] = _mm256_add_epi16(lo[h], _mm256_maddubs_epi16(_mm256_and_si256(q, m0f), al));
            hi[h] = _mm256_add_epi16(hi[h], _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m0f), ah));
          }
        }
        for (int h = 0; h < 2; ++h) {
          const __m256i scv = j < 2 ? sc_lo[h] : sc_hi[h];
          isum[h] = _mm256_add_epi32(isum[h], _mm256_madd_epi16(lo[h], simd::byte_to_pair16(scv, 2 * (j & 1))));
          isum[h] = _mm256_add_epi32(isum[h], _mm256_madd_epi16(hi[h], simd::byte_to_pair16(scv, 2 * (j & 1) + 1)));
        }
      }
      const __m256 ad = _mm256_set1_ps(a[i].d);
      for (int h = 0; h < 2; ++h) {
        const __m256i sc1 = load_half(blk + 128, h), sc2 = load_half(blk + 192, h);
        const __m256i mn_lo = _mm256_and_si256(sc1, m3f);
        const __m256i mn_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(sc2, 4), m0f),
                                              _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(sc1, 6), m03), 4));
        const __m256i mh = _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(mn_lo, bcast32(dg.h)),
                                                              _mm256_maddubs_epi16(mn_hi, bcast32(dg.h + 4))),
                                             ones16);
        const __m256i ml = _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(mn_lo, bcast32(dg.l)),
                                                              _mm256_maddubs_epi16(mn_hi, bcast32(dg.l + 4))),
                                             ones16);
        const __m256i mins = _mm256_add_epi32(_mm256_slli_epi32(mh, 6), ml);
        acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h]), _mm256_mul_ps(load_f16x8(blk, h), ad), acc[h]);
        acc_min[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(load_f16x8(blk + 32, h), ad), acc_min[h]);
      }
    }
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(y + p * R + 8 * h, _mm256_sub_ps(acc[h], acc_min[h]));
  }
}

// ---- Q6_K x Q8_K ----------------------------------------------------------------------------
// As the AVX-512 kernel, with both halves of the panel (rows 0-7, 8-15) in one pass so that
// each activation broadcast feeds two vpmaddubsw (on Zen 3 a vpbroadcastd from memory takes a
// vector pipe besides its load: halves in turn, this kernel streamed 5.5-8.7 GB/s on one core).
// The int16 sums: two vpmaddubsw of 6-bit weights (<= 63) times activations (|a| <= 127) per
// lane, <= 32004, widened with the group scale by vpmaddwd; the offset term's digit products,
// two scale lines' worth, <= 2 * 2 * 63 * 128.
void q6_k_dot_q8_k_panels(const void* panels, int64_t npanels, const void* xq, const void* act, int64_t n,
                          float* y) {
  constexpr size_t kUnit = R * 2 * sizeof(BlockQ6_K);
  const BlockQ8_K* a = static_cast<const BlockQ8_K*>(xq);
  const int64_t nb = n / kQKK;
  const size_t panel_bytes = kUnit * static_cast<size_t>(nb / 2);
  const Q6PanelAct* digits = static_cast<const Q6PanelAct*>(act);
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (int64_t p = 0; p < npanels; ++p) {
    const uint8_t* w = static_cast<const uint8_t*>(panels) + p * panel_bytes;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < nb; ++i) {
      const int64_t h2 = i & 1;
      const uint8_t* unit = w + (i / 2) * kUnit;
      const uint8_t* blk = unit + 64 + 3328 * h2;
      const uint8_t* aq = reinterpret_cast<const uint8_t*>(a[i].qs);
      const auto& dg = digits[i];
      if (h2 == 0) prefetch_line(unit);
      for (int s = 0; s < 4; ++s) prefetch_line(blk + 64 * s);
      __m256i isum[2];
      for (int hf = 0; hf < 2; ++hf) {
        // Two scale lines' digit products per int16 lane (<= 2 * 2 * 63 * 128) before widening.
        __m256i ch = _mm256_setzero_si256(), cl = ch, c1 = ch;
        for (int s = 0; s < 4; s += 2) {
          const __m256i sc0 = load_half(blk + 64 * s, hf), sc1 = load_half(blk + 64 * (s + 1), hf);
          const __m256i h16 = _mm256_add_epi16(_mm256_maddubs_epi16(bcast32(dg.h + 4 * s), sc0),
                                               _mm256_maddubs_epi16(bcast32(dg.h + 4 * s + 4), sc1));
          const __m256i l16 = _mm256_add_epi16(_mm256_maddubs_epi16(bcast32(dg.l + 4 * s), sc0),
                                               _mm256_maddubs_epi16(bcast32(dg.l + 4 * s + 4), sc1));
          ch = _mm256_add_epi32(ch, _mm256_madd_epi16(h16, ones16));
          cl = _mm256_add_epi32(cl, _mm256_madd_epi16(l16, ones16));
          c1 = _mm256_add_epi16(c1, _mm256_add_epi16(_mm256_maddubs_epi16(ones8, sc0), _mm256_maddubs_epi16(ones8, sc1)));
        }
        const __m256i corr = _mm256_sub_epi32(_mm256_add_epi32(_mm256_slli_epi32(ch, 6), cl),
                                              _mm256_slli_epi32(_mm256_madd_epi16(c1, ones16), 11));
        isum[hf] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
      }
      for (int h = 0; h < 2; ++h) {
        const uint8_t* half = blk + 256 + 1536 * h;
        // Unrolled: the scale byte's shifts are then immediates (rolled, this pass ran at half
        // the speed, gemv_panels Q6_K 2048 x 512: 9.2 against 14.9 GB/s, medians of 5).
        LL3_UNROLL for (int q = 0; q < 4; ++q) {
          // Group scales as int16 pairs (vpmaddwd factors).
          const int gl = 8 * h + q, gh = 8 * h + 4 + q;
          __m256i sl16[2], sh16[2];
          for (int hf = 0; hf < 2; ++hf) {
            sl16[hf] = q6_k_scale_pair16(load_half(blk + 64 * (gl / 4), hf), gl);
            sh16[hf] = q6_k_scale_pair16(load_half(blk + 64 * (gh / 4), hf), gh);
          }
          for (int t0 = 0; t0 < 4; t0 += 2) {  // two lines' products per int16 lane, then widened
            __m256i ul[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}, uh[2] = {ul[0], ul[0]};
            for (int t = t0; t < t0 + 2; ++t) {
              const int kk = 4 * q + t;
              const __m256i al = bcast32(aq + 128 * h + 4 * kk), ah = bcast32(aq + 128 * h + 64 + 4 * kk);
              for (int hf = 0; hf < 2; ++hf) {
                __m256i lo, hi;
                q6_k_line<false>(half, kk, hf, lo, hi);
                ul[hf] = _mm256_add_epi16(ul[hf], _mm256_maddubs_epi16(lo, al));
                uh[hf] = _mm256_add_epi16(uh[hf], _mm256_maddubs_epi16(hi, ah));
              }
            }
            for (int hf = 0; hf < 2; ++hf) {
              isum[hf] = _mm256_add_epi32(isum[hf], _mm256_add_epi32(_mm256_madd_epi16(ul[hf], sl16[hf]), _mm256_madd_epi16(uh[hf], sh16[hf])));
            }
          }
        }
      }
      const __m256 ad = _mm256_set1_ps(a[i].d);
      for (int hf = 0; hf < 2; ++hf) {
        acc[hf] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[hf]), _mm256_mul_ps(load_f16x8(unit + 32 * h2, hf), ad), acc[hf]);
      }
    }
    for (int hf = 0; hf < 2; ++hf) _mm256_storeu_ps(y + p * R + 8 * hf, acc[hf]);
  }
}

// ---- Q8_0 x Q8_0 ----------------------------------------------------------------------------
// The weights are stored + 128: back to signed with one xor, then the usual AVX2 sign trick
// (|w| unsigned times a * sign(w) signed: pairs <= 2 * 128 * 127 fit int16, the activation
// quantizer keeping |a| <= 127) and vpmaddwd.
void q8_0_dot_q8_0_panels(const void* panels, int64_t npanels, const void* xq, const void* act, int64_t n,
                          float* y) {
  constexpr size_t kUnit = R * 2 * sizeof(BlockQ8_0);
  const BlockQ8_0* a = static_cast<const BlockQ8_0*>(xq);
  const int64_t nb = n / kQK;
  const size_t panel_bytes = kUnit * static_cast<size_t>(nb / 2);
  const Q80PanelAct* as = static_cast<const Q80PanelAct*>(act);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80)), ones16 = _mm256_set1_epi16(1);
  for (int64_t p = 0; p < npanels; ++p) {
    const uint8_t* w = static_cast<const uint8_t*>(panels) + p * panel_bytes;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < nb; i += 2) {
      const uint8_t* u = w + (i / 2) * kUnit;
      prefetch_line(u);
      for (int l = 0; l < 16; ++l) prefetch_line(u + 64 + 64 * l);
      for (int hf = 0; hf < 2; ++hf) {
        for (int b = 0; b < 2; ++b) {
          const uint8_t* aq = reinterpret_cast<const uint8_t*>(a[i + b].qs);
          __m256i s32 = _mm256_setzero_si256();
          for (int k = 0; k < 8; ++k) {
            const __m256i wv = _mm256_xor_si256(load_half(u + 64 + 512 * b + 64 * k, hf), flip);
            const __m256i av = bcast32(aq + 4 * k);
            // Pairs: |w| (unsigned, right for -128 too) times a with w's sign (|a| <= 127);
            // two of them per int16 lane could overflow, so each is widened at once.
            s32 = _mm256_add_epi32(s32, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(av, wv)), ones16));
          }
          const __m256 f = _mm256_mul_ps(load_f16x8(u + 32 * b, hf), _mm256_set1_ps(as[i + b].d));
          acc[hf] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), f, acc[hf]);
        }
      }
    }
    for (int hf = 0; hf < 2; ++hf) _mm256_storeu_ps(y + p * R + 8 * hf, acc[hf]);
  }
}

// ---- Q8_0 x Q8_0, several tokens (prompts) ---------------------------------------------------
// One panel against NX activation rows, 8 weight rows (half a group) at a time: each 32-byte
// half holds 4 weights of each of 8 rows, so one vpmaddubsw against 4 broadcast activation
// bytes gives 8 rows' products, against one row's 32 in the row kernel (avx2/quant_rows.cpp),
// and the weights are read from the panel as stored, with no unpacking to rows.
template <int NX>
void q8_0_panel_rows(const uint8_t* panel, const void* xq, size_t stride, int64_t n, float* y, size_t y_stride) {
  constexpr size_t kUnit = R * 2 * sizeof(BlockQ8_0);
  const int64_t nb = n / kQK;
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80)), ones16 = _mm256_set1_epi16(1);
  for (int hf = 0; hf < 2; ++hf) {
    __m256 acc[NX];
    for (int x = 0; x < NX; ++x) acc[x] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const uint8_t* u = panel + (i / 2) * kUnit;
      const int b = static_cast<int>(i & 1);
      __m256i isum[NX];
      for (int x = 0; x < NX; ++x) isum[x] = _mm256_setzero_si256();
      if (hf == 0 && b == 0) prefetch_line(u);
      for (int k = 0; k < 8; ++k) {
        if (hf == 0) prefetch_line(u + 64 + 512 * b + 64 * k);  // the second half reads L1 / L2
        const __m256i w = _mm256_xor_si256(load_half(u + 64 + 512 * b + 64 * k, hf), flip);
        const __m256i aw = _mm256_sign_epi8(w, w);
        for (int x = 0; x < NX; ++x) {
          const BlockQ8_0& a = act_row<BlockQ8_0>(xq, stride, x)[i];
          // |w| (unsigned) times a with w's sign: pairs <= 2 * 128 * 127, then widened at once.
          const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(bcast32(a.qs + 4 * k), w));
          isum[x] = _mm256_add_epi32(isum[x], _mm256_madd_epi16(p, ones16));
        }
      }
      const __m256 dw = load_f16x8(u + 32 * b, hf);
      for (int x = 0; x < NX; ++x) {
        const float da = simd::h2f(act_row<BlockQ8_0>(xq, stride, x)[i].d);
        acc[x] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[x]), _mm256_mul_ps(dw, _mm256_set1_ps(da)), acc[x]);
      }
    }
    for (int x = 0; x < NX; ++x) _mm256_storeu_ps(y + x * y_stride + 8 * hf, acc[x]);
  }
}

template <int NX> struct Q80Panel {
  static void run(const void* panels, int64_t npanels, const void* a, size_t s, int64_t n, float* y, size_t ys) {
    const size_t panel_bytes = R * dtype_row_bytes(DType::Q8_0, n);
    for (int64_t p = 0; p < npanels; ++p) {
      q8_0_panel_rows<NX>(static_cast<const uint8_t*>(panels) + p * panel_bytes, a, s, n, y + p * R, ys);
    }
  }
};

void q8_0_dot_q8_0_panel_rows(const void* panels, int64_t npanels, const void* xq, size_t stride, int64_t nx, int64_t n,
                              float* y, size_t y_stride) {
  run_panel_row_passes<Q80Panel>(panels, npanels, kPanelRows * dtype_row_bytes(DType::Q8_0, n), xq, stride, nx, n, y, y_stride);
}

}  // namespace ll3::kernels::avx2
