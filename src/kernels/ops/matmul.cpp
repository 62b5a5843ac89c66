#include "kernels/matmul.h"

namespace ll3 {

namespace {

// Integer path: quantize each activation row once, then dot every weight row with each of them.
void matmul_q(ThreadPool& pool, const WeightMatrix& W, const float* x, float* y, int64_t n,
              const MatmulScratch& scratch) {
  const TypeTraits& tr = *W.traits;
  const TypeTraits& act = *type_traits(tr.vec_dot_type);
  const int64_t rows = W.rows, cols = W.cols;
  const size_t xq_bytes = dtype_row_bytes(tr.vec_dot_type, cols);
  pool.parallel_for(n, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) act.from_float(x + t * cols, scratch.xq + t * xq_bytes, cols);
  });
  pool.parallel_for(rows, [&](int64_t begin, int64_t end, int) {
    if (n == 1) {
      for (int64_t r = begin; r < end; ++r) y[r] = tr.dot_q(W.row(r), scratch.xq, cols);
      return;
    }
    // Each weight row is unpacked once for all activation rows (y is (n, rows): stride rows).
    for (int64_t r = begin; r < end; ++r) {
      tr.dot_q_rows(W.row(r), scratch.xq, xq_bytes, n, cols, y + r, static_cast<size_t>(rows));
    }
  });
}

}  // namespace

void matmul(ThreadPool& pool, const WeightMatrix& W, const float* x, float* y, int64_t n,
            const MatmulScratch& scratch) {
  const TypeTraits& tr = *W.traits;
  if (scratch.int8_activations && tr.dot_q != nullptr && tr.vec_dot_type != DType::F32) {
    matmul_q(pool, W, x, y, n, scratch);
    return;
  }
  static const TypeTraits* f32 = type_traits(DType::F32);
  const int64_t rows = W.rows, cols = W.cols;
  pool.parallel_for(rows, [&](int64_t begin, int64_t end, int thread) {
    if (n == 1) {
      for (int64_t r = begin; r < end; ++r) y[r] = tr.dot_f32(W.row(r), x, cols);
      return;
    }
    // Several activation rows: dequantize each weight row once, then dot it with every row.
    float* wrow = scratch.rows + static_cast<size_t>(thread) * scratch.max_cols;
    for (int64_t r = begin; r < end; ++r) {
      const void* w = W.row(r);
      if (W.type != DType::F32) {
        tr.to_float(w, wrow, cols);
        w = wrow;
      }
      for (int64_t t = 0; t < n; ++t) y[t * rows + r] = f32->dot_f32(w, x + t * cols, cols);
    }
  });
}

}  // namespace ll3
