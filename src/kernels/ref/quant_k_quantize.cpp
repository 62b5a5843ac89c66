// Reference quantizers of the K-quants. They follow the algorithms of ggml's reference
// quantizers (what llama-quantize runs without an importance matrix): per sub-block, a scale (and
// a min) fitted by a short search that minimises a weighted error, then the sub-block scales are
// themselves quantized to 4, 6 or 8 bits against one f16 super-block scale, and the weights are
// requantized against the rounded scales.
#include <algorithm>
#include <cmath>

#include "kernels/quant_blocks.h"
#include "kernels/quant_kernels.h"
#include "kernels/ref/quant_common.h"

namespace ll3::kernels::ref {

using namespace ll3::quant;
using detail::nearest_int;

namespace {

constexpr float kGroupMaxEps = 1e-15f;

// Symmetric fit of n values to integers in [-nmax, nmax-1] (returned biased by +nmax in L),
// weighted by x^2; tries 18 scales around nmax / max and keeps the least-squares best.
float fit_symmetric(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  auto clamp_l = [nmax](int l) { return std::max(-nmax, std::min(nmax - 1, l)); };
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_l(nearest_int(iscale * x[i]));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_l(nearest_int(iscale * x[i]));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + clamp_l(nearest_int(iscale * x[i])));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Q3_K's sub-block fit: start from nmax / max, then move single values to a better level while
// the weighted (x^2) least-squares objective improves. L is returned biased by +nmax.
float fit_q3(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  auto clamp_l = [nmax](int l) { return std::max(-nmax, std::min(nmax - 1, l)); };
  const float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_l(nearest_int(iscale * x[i]));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * L[i] * L[i];
        const int nl = clamp_l(nearest_int(x[i] * sl2 / slx));
        if (nl != L[i]) {
          slx += w * x[i] * nl;
          sl2 += w * nl * nl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(nl);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Asymmetric fit x ~ scale * L - min with L in [0, nmax] and min >= 0 returned in *neg_min:
// a grid of nstep + 1 candidate scales, each refined by the closed-form weighted least-squares
// (scale, min) for its rounding; the error is weighted |diff| (use_mad) or diff^2.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min,
                    uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *neg_min = -min;
    return 0.0f;
  }
  auto err = [use_mad](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    best_error += w[i] * err(scale * L[i] + min - x[i]);
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
      Laux[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) cur_error += w[i] * err(this_scale * Laux[i] + this_min - x[i]);
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

// Pack 256 2-bit values (0..3): byte l of each 32-byte group of a 128 half holds the values
// l, l + 32, l + 64, l + 96 of that half in bit pairs 0, 2, 4, 6.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQKK; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                           (L[j + l + 96] << 6));
    }
  }
}

// Store the 6-bit scale ls and min lm of sub-block j into Q4_K / Q5_K's 12 packed bytes.
void pack_k4_scale_min(int j, uint8_t ls, uint8_t lm, uint8_t* s) {
  if (j < 4) {
    s[j] = ls;
    s[j + 4] = lm;
  } else {
    s[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
    s[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
    s[j] |= static_cast<uint8_t>((lm >> 4) << 6);
  }
}

// Q4_K / Q5_K share everything but nmax, the search grid and the bit packing: fit the 8
// sub-blocks, quantize their scales and mins to 6 bits, requantize the weights into L.
template <class Block>
void quantize_k4_like(const float* x, Block& y, int nmax, float rmin, int nstep, uint8_t* L) {
  uint8_t Laux[32];
  float weights[32], mins[8], scales[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = fit_scale_min(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                              0.1f, nstep, false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(y.scales, 0, sizeof(y.scales));
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    pack_k4_scale_min(j, ls, lm, y.scales);
  }
  y.d = f32_to_f16(max_scale / 63.f);
  y.dmin = f32_to_f16(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    k4_scale_min(j, y.scales, &sc, &m);
    const float d = f16_to_f32(y.d) * sc;
    if (d == 0.0f) continue;
    const float dm = f16_to_f32(y.dmin) * m;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

}  // namespace

void q2_k_from_float(const float* src, void* dst, int64_t n) {
  BlockQ2_K* y = static_cast<BlockQ2_K*>(dst);
  uint8_t L[kQKK], Laux[16];
  float weights[16], mins[16], scales[16];
  const float q4scale = 15.f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float* x = src + i * kQKK;
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = fit_scale_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f,
                                0.1f, 15, true);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    if (max_scale > 0) {
      const float iscale = q4scale / max_scale;
      for (int j = 0; j < 16; ++j) y[i].scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      y[i].d = f32_to_f16(max_scale / q4scale);
    } else {
      for (int j = 0; j < 16; ++j) y[i].scales[j] = 0;
      y[i].d = f32_to_f16(0.f);
    }
    if (max_min > 0) {
      const float iscale = q4scale / max_min;
      for (int j = 0; j < 16; ++j) y[i].scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
      y[i].dmin = f32_to_f16(max_min / q4scale);
    } else {
      y[i].dmin = f32_to_f16(0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = f16_to_f32(y[i].d) * (y[i].scales[j] & 0xF);
      if (d == 0.0f) continue;
      const float dm = f16_to_f32(y[i].dmin) * (y[i].scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int((x[16 * j + ii] + dm) / d);
        L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
      }
    }
    pack_2bit(L, y[i].qs);
  }
}

void q3_k_from_float(const float* src, void* dst, int64_t n) {
  BlockQ3_K* y = static_cast<BlockQ3_K*>(dst);
  int8_t L[kQKK];
  float scales[16];
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float* x = src + i * kQKK;
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_q3(16, 4, x + 16 * j, L + 16 * j);
      const float a = std::fabs(scales[j]);
      if (a > amax) {
        amax = a;
        max_scale = scales[j];
      }
    }
    std::memset(y[i].scales, 0, 12);
    if (max_scale != 0.0f) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        int l = std::max(-32, std::min(31, static_cast<int>(static_cast<int8_t>(nearest_int(iscale * scales[j]))))) + 32;
        if (j < 8) {
          y[i].scales[j] = static_cast<uint8_t>(l & 0xF);
        } else {
          y[i].scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
        }
        l >>= 4;
        y[i].scales[j % 4 + 8] |= static_cast<uint8_t>(l << (2 * (j / 4)));
      }
      y[i].d = f32_to_f16(1 / iscale);
    } else {
      y[i].d = f32_to_f16(0.f);
    }
    int8_t sc[16];
    q3k_scales(y[i].scales, sc);
    for (int j = 0; j < 16; ++j) {
      const float d = f16_to_f32(y[i].d) * sc[j];
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = std::max(-4, std::min(3, nearest_int(x[16 * j + ii] / d)));
        L[16 * j + ii] = static_cast<int8_t>(l + 4);
      }
    }
    // High bit of value j goes to bit (j / 32) of hmask[j % 32].
    std::memset(y[i].hmask, 0, 32);
    uint8_t low[kQKK];
    for (int j = 0; j < kQKK; ++j) {
      int l = L[j];
      if (l > 3) {
        y[i].hmask[j % 32] |= static_cast<uint8_t>(1u << (j / 32));
        l -= 4;
      }
      low[j] = static_cast<uint8_t>(l);
    }
    pack_2bit(low, y[i].qs);
  }
}

void q4_k_from_float(const float* src, void* dst, int64_t n) {
  BlockQ4_K* y = static_cast<BlockQ4_K*>(dst);
  uint8_t L[kQKK];
  for (int64_t i = 0; i < n / kQKK; ++i) {
    quantize_k4_like(src + i * kQKK, y[i], 15, -1.f, 20, L);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kQKK; j += 64) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
      q += 32;
    }
  }
}

void q5_k_from_float(const float* src, void* dst, int64_t n) {
  BlockQ5_K* y = static_cast<BlockQ5_K*>(dst);
  uint8_t L[kQKK];
  for (int64_t i = 0; i < n / kQKK; ++i) {
    quantize_k4_like(src + i * kQKK, y[i], 31, -0.5f, 15, L);
    uint8_t* qh = y[i].qh;
    uint8_t* ql = y[i].qs;
    std::memset(qh, 0, 32);
    uint8_t m1 = 1, m2 = 2;
    for (int b = 0; b < kQKK; b += 64) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[b + j], l2 = L[b + j + 32];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
      m1 <<= 2;
      m2 <<= 2;
      ql += 32;
    }
  }
}

void q6_k_from_float(const float* src, void* dst, int64_t n) {
  BlockQ6_K* y = static_cast<BlockQ6_K*>(dst);
  int8_t L[kQKK];
  float scales[16];
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float* x = src + i * kQKK;
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      scales[ib] = fit_symmetric(16, 32, x + 16 * ib, L + 16 * ib);
      const float a = std::fabs(scales[ib]);
      if (a > max_abs_scale) {
        max_abs_scale = a;
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = f32_to_f16(1 / iscale);
    for (int ib = 0; ib < 16; ++ib) {
      y[i].scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    }
    for (int j = 0; j < 16; ++j) {
      const float d = f16_to_f32(y[i].d) * y[i].scales[j];
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = std::max(-32, std::min(31, nearest_int(x[16 * j + ii] / d)));
        L[16 * j + ii] = static_cast<int8_t>(l + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQKK; j += 128) {
      for (int l = 0; l < 32; ++l) {
        const int v0 = L[j + l], v1 = L[j + l + 32], v2 = L[j + l + 64], v3 = L[j + l + 96];
        ql[l] = static_cast<uint8_t>((v0 & 0xF) | ((v2 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((v1 & 0xF) | ((v3 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((v0 >> 4) | ((v1 >> 4) << 2) | ((v2 >> 4) << 4) | ((v3 >> 4) << 6));
      }
      ql += 64;
      qh += 32;
    }
  }
}

// Activations for integer dot products: one f32 scale per 256 values (the value of largest
// magnitude maps to -127; the opposite side clamps at 127), plus the sums of each 16 values,
// which the K-quant dot products need for the mins.
void q8_k_from_float(const float* src, void* dst, int64_t n) {
  BlockQ8_K* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float* x = src + i * kQKK;
    float max = 0, amax = 0;
    for (int j = 0; j < kQKK; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQKK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    }
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * j + l];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

}  // namespace ll3::kernels::ref
