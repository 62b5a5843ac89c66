// y = W x for a batch of activation rows, with W in any supported type, split by output rows
// across the thread pool (each thread streams its own part of W once for all the rows).
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/weight_matrix.h"

namespace ll3 {

// Per-thread scratch the matmul needs: one dequantized weight row per thread.
struct MatmulScratch {
  float* rows = nullptr;  // (n_threads, max_cols)
  int64_t max_cols = 0;
};

// x: (n, W.cols) row-major; y: (n, W.rows) row-major.
void matmul(ThreadPool& pool, const WeightMatrix& W, const float* x, float* y, int64_t n,
            const MatmulScratch& scratch);

}  // namespace ll3
