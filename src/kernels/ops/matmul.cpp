#include "kernels/matmul.h"

#include <algorithm>

#include "kernels/gemm_f32.h"

namespace ll3 {

namespace {

// Rows per work item: small enough that threads finish together (a preempted thread leaves
// its share to the others), large enough that the shared counter is touched rarely.
int64_t row_chunk(const ThreadPool& pool, int64_t rows) {
  return std::max<int64_t>(16, rows / (static_cast<int64_t>(pool.size()) * 16));
}

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
  pool.parallel_for_stealing(rows, row_chunk(pool, rows), [&](int64_t begin, int64_t end, int) {
    if (n == 1) {
      if (tr.dot_q_wrows != nullptr) {
        tr.dot_q_wrows(W.row(begin), W.row_bytes, end - begin, scratch.xq, cols, y + begin);
      } else {
        for (int64_t r = begin; r < end; ++r) y[r] = tr.dot_q(W.row(r), scratch.xq, cols);
      }
      return;
    }
    // Each weight row is unpacked once for all activation rows (y is (n, rows): stride rows).
    for (int64_t r = begin; r < end; ++r) {
      tr.dot_q_rows(W.row(r), scratch.xq, xq_bytes, n, cols, y + r, static_cast<size_t>(rows));
    }
  });
}

// AMX path: pack the activations once (per group of 16 tokens), then hand each thread blocks
// of 32 weight rows, which the kernel unpacks chunk by chunk and multiplies with all tokens.
void matmul_bf16(ThreadPool& pool, const WeightMatrix& W, const float* x, float* y, int64_t n,
                 const MatmulScratch& scratch) {
  const kernels::Bf16Gemm& k = *scratch.bf16;
  const int64_t rows = W.rows, cols = W.cols, G = kernels::kBf16TokenGroup, R = kernels::kBf16RowBlock;
  pool.parallel_for((n + G - 1) / G, [&](int64_t begin, int64_t end, int) {
    for (int64_t g = begin; g < end; ++g) {
      k.pack_x(x + g * G * cols, static_cast<size_t>(cols), std::min(G, n - g * G), cols, scratch.xbf + g * G * cols);
    }
  });
  kernels::Bf16WeightRows block;
  block.row_bytes = W.row_bytes;
  block.chunk_bytes = dtype_row_bytes(W.type, kernels::kBf16ChunkK);
  block.to_bf16 = W.traits->to_bf16;
  block.to_float = W.traits->to_float;
  // Runs of blocks per thread, so each block can prefetch the next one's weights.
  const int64_t blocks = (rows + R - 1) / R;
  const int64_t run = std::max<int64_t>(1, blocks / (4 * static_cast<int64_t>(pool.size())));
  pool.parallel_for_dynamic(blocks, run, [&](int64_t begin, int64_t end, int) {
    for (int64_t b = begin; b < end; ++b) {
      kernels::Bf16WeightRows w = block;
      const int64_t r0 = b * R;
      w.rows = W.row(r0);
      w.nr = std::min(R, rows - r0);
      if (b + 1 < end) {
        w.next = W.row(r0 + R);
        w.next_bytes = static_cast<size_t>(std::min(R, rows - r0 - R)) * W.row_bytes;
      }
      k.gemm(w, scratch.xbf, n, cols, y + r0, static_cast<size_t>(rows));
    }
  });
}

}  // namespace

void matmul(ThreadPool& pool, const WeightMatrix& W, const float* x, float* y, int64_t n,
            const MatmulScratch& scratch) {
  const TypeTraits& tr = *W.traits;
  if (scratch.bf16 != nullptr && n >= kBf16MinTokens && W.type != DType::F32 && W.cols % 32 == 0) {
    matmul_bf16(pool, W, x, y, n, scratch);
    return;
  }
  if (scratch.int8_activations && tr.dot_q != nullptr && tr.vec_dot_type != DType::F32) {
    matmul_q(pool, W, x, y, n, scratch);
    return;
  }
  const int64_t rows = W.rows, cols = W.cols;
  if (n == 1) {
    pool.parallel_for_stealing(rows, row_chunk(pool, rows), [&](int64_t begin, int64_t end, int) {
      for (int64_t r = begin; r < end; ++r) y[r] = tr.dot_f32(W.row(r), x, cols);
    });
    return;
  }
  // Several activation rows: a float GEMM over blocks of kRowBlock weight rows, dequantized
  // once per block into the thread's scratch (F32 weights are used in place).
  static const kernels::GemmF32Fn gemm = kernels::gemm_f32();
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  pool.parallel_for_dynamic(blocks, 1, [&](int64_t begin, int64_t end, int thread) {
    float* wrows = scratch.rows + static_cast<size_t>(thread) * kRowBlock * scratch.max_cols;
    for (int64_t b = begin; b < end; ++b) {
      const int64_t r0 = b * kRowBlock, nr = std::min<int64_t>(kRowBlock, rows - r0);
      const float* w = reinterpret_cast<const float*>(W.row(r0));
      if (W.type != DType::F32) {
        for (int64_t r = 0; r < nr; ++r) tr.to_float(W.row(r0 + r), wrows + r * cols, cols);
        w = wrows;
      }
      gemm(w, static_cast<size_t>(cols), x, static_cast<size_t>(cols), y + r0, static_cast<size_t>(rows), nr, n, cols);
    }
  });
}

}  // namespace ll3
