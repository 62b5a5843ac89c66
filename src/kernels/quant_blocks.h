// Block layouts of the ggml / GGUF quantized types, byte for byte as the file format stores them.
// Legacy types hold 32 weights per block with one (or two) f16 factors; K-quants hold 256 weights
// per super-block split into 16 or 8 sub-blocks whose scales are themselves quantized.
// All multi-byte fields are little-endian f16 bit patterns (uint16_t) or plain bytes, so a block
// pointer can be aimed straight into an mmapped file (alignment 2 is enough).
#pragma once

#include <cstdint>

// The helpers below are also compiled into the CUDA kernels (kernels/cuda), from this header.
#if defined(__CUDACC__)
#define LL3_HOST_DEVICE __host__ __device__
#else
#define LL3_HOST_DEVICE
#endif

namespace ll3::quant {

constexpr int kQK = 32;    // weights per legacy block
constexpr int kQKK = 256;  // weights per K-quant super-block
constexpr int kKScaleBytes = 12;  // packed 6-bit scales + mins of Q4_K / Q5_K

// Q4_0: w = d * (q - 8), q in [0, 15]; qs[j] holds element j (low nibble) and j + 16 (high).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_0) == 2 + 16);

// Q4_1: w = d * q + m.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_1) == 4 + 16);

// Q5_0: w = d * (q - 16); bit 4 of element j is bit j of qh (a little-endian u32).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_0) == 2 + 4 + 16);

// Q5_1: w = d * q + m.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_1) == 4 + 4 + 16);

// Q8_0: w = d * q.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_0) == 2 + 32);

// Q8_1 (activation type of the legacy "_1" types): s = d * sum(qs).
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_1) == 4 + 32);

// Q2_K: 16 sub-blocks of 16; scales[j] = scale (low nibble) | min (high nibble);
// w = d * scale * q - dmin * min, q in [0, 3]. qs: 2 halves of 128, 4 two-bit planes of 32 bytes.
struct BlockQ2_K {
  uint8_t scales[kQKK / 16];
  uint8_t qs[kQKK / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 16 + 64 + 4);

// Q3_K: 16 sub-blocks of 16 with signed 6-bit scales (biased by 32, packed into 12 bytes);
// w = d * (scale - 32) * (q - 4 * !high_bit), low 2 bits in qs, high bit in hmask.
struct BlockQ3_K {
  uint8_t hmask[kQKK / 8];
  uint8_t qs[kQKK / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 32 + 64 + 12 + 2);

// Q4_K: 8 sub-blocks of 32 with 6-bit scales and mins; w = d * scale * q - dmin * min.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQKK / 2];
};
static_assert(sizeof(BlockQ4_K) == 4 + 12 + 128);

// Q5_K: as Q4_K with a fifth bit per weight in qh.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};
static_assert(sizeof(BlockQ5_K) == 4 + 12 + 32 + 128);

// Q6_K: 16 sub-blocks of 16 with int8 scales; w = d * scale * (q - 32), q 6 bits (4 in ql, 2 in qh).
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 128 + 64 + 16 + 2);

// Q8_K (activation type of the K-quants): f32 scale, bsums[j] = sum of qs[16j .. 16j+15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};
static_assert(sizeof(BlockQ8_K) == 4 + 256 + 32);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block.
LL3_HOST_DEVICE inline void k4_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// The 16 signed scales (already minus 32) of a Q3_K block.
inline void q3k_scales(const uint8_t* packed, int8_t out[16]) {
  for (int j = 0; j < 16; ++j) {
    int lo = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
    int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

}  // namespace ll3::quant
