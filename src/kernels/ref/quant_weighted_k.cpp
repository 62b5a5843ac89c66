// The K-quants quantized against an importance matrix (llama-quantize --imatrix). Per sub-block
// the search weights column c by qw[c] * sqrt(sigma2 + x[c]^2) (Q6_K: by qw[c] alone), and the
// sub-block scales (and mins) are themselves fitted with the sub-blocks' summed weights, where
// the unweighted quantizers simply scale them to the largest. Both choices are ggml's.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant_blocks.h"
#include "kernels/ref/quant_common.h"
#include "kernels/ref/quant_weighted.h"

namespace ll3::kernels::ref {

using namespace ll3::quant;
using detail::fit_positive_weighted;
using detail::fit_scale_min_weighted;
using detail::fit_symmetric_weighted;
using detail::nearest_int;

namespace {

constexpr float kGroupMaxEps = 1e-15f;

float sum_squares(const float* x, int n) {
  float s = 0;
  for (int j = 0; j < n; ++j) s += x[j] * x[j];
  return s;
}

// The weights of one sub-block of n columns; returns their sum.
float column_weights(const float* x, const float* qw, float sigma2, int n, float* w) {
  for (int l = 0; l < n; ++l) w[l] = qw[l] * std::sqrt(sigma2 + x[l] * x[l]);
  float sum = 0;
  for (int l = 0; l < n; ++l) sum += w[l];
  return sum;
}

// Byte l of each 32-byte group of a 128 half holds values l, l+32, l+64, l+96 in bit pairs.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQKK; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                           (L[j + l + 96] << 6));
    }
  }
}

// Q4_K / Q5_K's 12 scale bytes from the 6-bit scales Ls and mins Lm of the 8 sub-blocks.
void pack_k4_scales(const uint8_t* Ls, const uint8_t* Lm, uint8_t* s) {
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = Ls[j], lm = Lm[j];
    if (j < 4) {
      s[j] = ls;
      s[j + 4] = lm;
    } else {
      s[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      s[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      s[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
}

// Fit the 8 sub-blocks of a Q4_K / Q5_K super-block, fit their scales and mins to 6 bits with
// the sub-block weights, then requantize the values into L (0..nmax) against the rounded scales.
template <class Block>
void quantize_k4_like_weighted(const float* x, const float* qw, Block& y, int nmax, uint8_t* L) {
  uint8_t Laux[32], Ls[8], Lm[8];
  float weights[32], sw[8], mins[8], scales[8];
  const float sigma2 = 2 * sum_squares(x, kQKK) / kQKK;
  for (int j = 0; j < 8; ++j) {
    sw[j] = column_weights(x + 32 * j, qw + 32 * j, sigma2, 32, weights);
    scales[j] = fit_scale_min_weighted(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                       -0.9f, 0.05f, 36);
  }
  const float d_block = fit_positive_weighted(8, 63, scales, Ls, sw);
  const float m_block = fit_positive_weighted(8, 63, mins, Lm, sw);
  for (int j = 0; j < 8; ++j) {
    // Q4_K's ggml code stores them unclamped, Q5_K's clamps: equal for fits in 0..63.
    if (nmax == 31) {
      Ls[j] = std::min<uint8_t>(63, Ls[j]);
      Lm[j] = std::min<uint8_t>(63, Lm[j]);
    }
  }
  pack_k4_scales(Ls, Lm, y.scales);
  y.d = f32_to_f16(d_block);
  y.dmin = f32_to_f16(m_block);
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

void q2_k_from_float_weighted(const float* src, void* dst, int64_t n, const float* qw_row) {
  BlockQ2_K* y = static_cast<BlockQ2_K*>(dst);
  uint8_t L[kQKK], Laux[16], Ls[16], Lm[16];
  float weights[16], sw[16], mins[16], scales[16];
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float* x = src + i * kQKK;
    const float* qw = qw_row + i * kQKK;
    const float sigma2 = sum_squares(x, kQKK) / kQKK;  // Q2_K alone does not double it
    for (int j = 0; j < 16; ++j) {
      sw[j] = column_weights(x + 16 * j, qw + 16 * j, sigma2, 16, weights);
      scales[j] = fit_scale_min_weighted(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                         -0.9f, 0.05f, 36);
    }
    const float dm0 = fit_positive_weighted(16, 15, scales, Ls, sw);
    const float mm0 = fit_positive_weighted(16, 15, mins, Lm, sw);
    y[i].d = f32_to_f16(dm0);
    y[i].dmin = f32_to_f16(mm0);
    const float dm = f16_to_f32(y[i].d), mm = f16_to_f32(y[i].dmin);
    for (int j = 0; j < 16; ++j) y[i].scales[j] = static_cast<uint8_t>(Ls[j] | (Lm[j] << 4));
    for (int j = 0; j < 16; ++j) {
      const float d = dm * (y[i].scales[j] & 0xF);
      if (d == 0.0f) continue;
      const float m = mm * (y[i].scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int((x[16 * j + ii] + m) / d);
        L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
      }
    }
    pack_2bit(L, y[i].qs);
  }
}

void q3_k_from_float_weighted(const float* src, void* dst, int64_t n, const float* qw_row) {
  BlockQ3_K* y = static_cast<BlockQ3_K*>(dst);
  int8_t L[kQKK], Ls[16];
  float weights[16], sw[16], scales[16];
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float* x = src + i * kQKK;
    const float* qw = qw_row + i * kQKK;
    const float sigma2 = 2 * sum_squares(x, kQKK) / kQKK;
    for (int j = 0; j < 16; ++j) {
      sw[j] = column_weights(x + 16 * j, qw + 16 * j, sigma2, 16, weights);
      scales[j] = fit_symmetric_weighted(16, 4, x + 16 * j, L + 16 * j, weights);
    }
    // The 16 scales as 6-bit signed values (biased by 32) against one f16 scale.
    const float d_block = fit_symmetric_weighted(16, 32, scales, Ls, sw);
    std::memset(y[i].scales, 0, 12);
    for (int j = 0; j < 16; ++j) {
      int l = Ls[j];
      if (j < 8) {
        y[i].scales[j] = static_cast<uint8_t>(l & 0xF);
      } else {
        y[i].scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
      }
      l >>= 4;
      y[i].scales[j % 4 + 8] |= static_cast<uint8_t>(l << (2 * (j / 4)));
    }
    y[i].d = f32_to_f16(d_block);
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

void q4_k_from_float_weighted(const float* src, void* dst, int64_t n, const float* qw) {
  BlockQ4_K* y = static_cast<BlockQ4_K*>(dst);
  uint8_t L[kQKK];
  for (int64_t i = 0; i < n / kQKK; ++i) {
    quantize_k4_like_weighted(src + i * kQKK, qw + i * kQKK, y[i], 15, L);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kQKK; j += 64) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
      q += 32;
    }
  }
}

void q5_k_from_float_weighted(const float* src, void* dst, int64_t n, const float* qw) {
  BlockQ5_K* y = static_cast<BlockQ5_K*>(dst);
  uint8_t L[kQKK];
  for (int64_t i = 0; i < n / kQKK; ++i) {
    quantize_k4_like_weighted(src + i * kQKK, qw + i * kQKK, y[i], 31, L);
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

void q6_k_from_float_weighted(const float* src, void* dst, int64_t n, const float* qw) {
  BlockQ6_K* y = static_cast<BlockQ6_K*>(dst);
  int8_t L[kQKK];
  float scales[16];
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float* x = src + i * kQKK;
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      // ggml weights Q6_K's sub-blocks by the importance alone (no sigma2 term).
      scales[ib] =
          fit_symmetric_weighted(16, 32, x + 16 * ib, L + 16 * ib, qw + i * kQKK + 16 * ib);
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
        qh[l] = static_cast<uint8_t>((v0 >> 4) | ((v1 >> 4) << 2) | ((v2 >> 4) << 4) |
                                     ((v3 >> 4) << 6));
      }
      ql += 64;
      qh += 32;
    }
  }
}

}  // namespace ll3::kernels::ref
