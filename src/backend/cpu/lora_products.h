// The LoRA corrections of a step's products (model/lora.h): after y = W x over the batch, the
// rows of each adapter set get y += s · B (A x) for each adapter of the set in order, as
// llama.cpp adds them (the product scaled, then added). A row's correction reads only its own
// input and its adapters, with the same operations in the same order whatever the other rows,
// so a request's logits are the same bits alone as beside other adapters' requests.
//
// All the sets of a step go through two passes over the thread pool per product, not two per
// adapter: u = A x for every (adapter, row), by the type's dot kernel, four rows of A an item; then the
// output columns split across the threads, each adding Bᵀu into its columns for every adapter
// (kernels/lora_kernels.h). At rank 16 the corrections are 1.6% of a 2048 x 2048 product's
// multiply-adds; through the general matmul, two calls per adapter (a GEMM for K = 16, its
// packing and two barriers each), a 128-token prompt ran at 0.86x the base's speed, and at
// 0.93-1.01x this way (Zen 3, docs/PERFORMANCE.md). Scratch is sized once; a step allocates
// nothing.
#pragma once

#include <cstdint>

#include "core/aligned.h"
#include "core/thread_pool.h"
#include "model/batch_plan.h"
#include "model/lora.h"

namespace ll3 {

class LoraProducts {
 public:
  // max_rows: the most rows a step has; max_rank: the largest rank an adapter may have.
  LoraProducts(int64_t max_rows, int64_t max_rank);
  static constexpr int64_t kMaxRank = 512;

  // Whether the plan has any sequence with adapters.
  static bool any(const BatchPlan& plan) { return !plan.lora_sets.empty(); }

  // y (rows, y_cols) += the corrections of target `t` of layer `layer` (-1: the output), for
  // the rows whose sequence (row_seq[r], an index into plan.seqs) has adapters; x (rows,
  // x_cols) is the product's input.
  void add(ThreadPool& pool, const BatchPlan& plan, const int32_t* row_seq, int64_t rows, int64_t layer, LoraTarget t,
           const float* x, int64_t x_cols, float* y, int64_t y_cols);

 private:
  // One adapter's correction of one set's rows: rows_[row0, row0 + n), their A x at u_[u0],
  // computed as `items` items of the first pass (n times the rank's chunks of 4 rows of A).
  struct Job {
    const LoraPair* pair;
    float scale;
    int64_t row0, n, u0, items;
  };
  static constexpr int64_t kMaxJobs = 256;

  // The passes over the jobs [0, n_jobs) (their u within u_).
  void run(ThreadPool& pool, int64_t n_jobs, const float* x, int64_t x_cols, int64_t y_cols);

  AlignedVector<float> u_;          // (max_rows, max_rank) A x of a wave of jobs
  AlignedVector<int32_t> rows_;     // the rows of each set, set after set
  AlignedVector<float*> y_rows_;    // their rows of y
  AlignedVector<Job> jobs_;         // (kMaxJobs)
};

}  // namespace ll3
