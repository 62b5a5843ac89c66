// Random inputs shared by the kernel microbenchmarks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/type_traits.h"

namespace ll3::bench {

// n floats from N(0, sd^2), seeded.
inline std::vector<float> random_floats(int64_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, sd);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = g(rng);
  return v;
}

// rows x n weights of type t (row-major, dtype_row_bytes(t, n) per row) quantized by the
// type's quantizer from small Gaussian values, as trained weights look.
inline std::vector<uint8_t> make_weights(DType t, int64_t n, int64_t rows) {
  const size_t row_bytes = dtype_row_bytes(t, n);
  std::vector<uint8_t> w(row_bytes * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> x = random_floats(n, 42u + static_cast<uint32_t>(r), 0.02f);
    type_traits(t)->from_float(x.data(), w.data() + r * row_bytes, n);
  }
  return w;
}

// As make_weights, but only the first `unique` rows are quantized and the rest repeat them: a
// matrix larger than the last-level cache (what decode streams) without minutes of quantizing.
inline std::vector<uint8_t> make_weights_tiled(DType t, int64_t n, int64_t rows, int64_t unique = 2048) {
  if (rows <= unique) return make_weights(t, n, rows);
  const std::vector<uint8_t> u = make_weights(t, n, unique);
  std::vector<uint8_t> w(dtype_row_bytes(t, n) * static_cast<size_t>(rows));
  for (size_t off = 0; off < w.size(); off += u.size()) std::copy_n(u.begin(), std::min(u.size(), w.size() - off), w.begin() + off);
  return w;
}

// x quantized to the activation type of weights of type t (the integer path's input).
inline std::vector<uint8_t> quantized_activations(DType t, const std::vector<float>& x) {
  const TypeTraits* act = type_traits(type_traits(t)->vec_dot_type);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> xq(dtype_row_bytes(type_traits(t)->vec_dot_type, n));
  act->from_float(x.data(), xq.data(), n);
  return xq;
}

}  // namespace ll3::bench
