// The LoRA corrections of a step's products (model/lora.h): after y = W x over the batch, the
// rows of each adapter set, gathered, get y += s · B (A x) for each adapter of the set in order,
// as llama.cpp adds them (the product scaled, then added). A row's correction reads only its own
// input and its adapters, through the same products whatever the number of rows (kernels/
// matmul.h), so a request's logits are the same bits alone as beside other adapters' requests.
// The rows of one set share one pass over its A and B. Scratch is sized once; a step allocates
// nothing.
#pragma once

#include <cstdint>

#include "core/aligned.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "model/batch_plan.h"
#include "model/lora.h"

namespace ll3 {

class LoraProducts {
 public:
  // max_rows: the most rows a step has; max_width: the widest input or output of a layer's
  // products; max_rank: the largest rank an adapter may have; vocab: the LM head's outputs (its
  // corrections go a chunk of rows at a time, at least one).
  LoraProducts(int64_t max_rows, int64_t max_width, int64_t max_rank, int64_t vocab);
  static constexpr int64_t kMaxRank = 512;

  // Whether the plan has any sequence with adapters.
  static bool any(const BatchPlan& plan) { return !plan.lora_sets.empty(); }

  // y (rows, y_cols) += the corrections of target `t` of layer `layer` (-1: the output), for
  // the rows whose sequence (row_seq[r], an index into plan.seqs) has adapters; x (rows,
  // x_cols) is the product's input.
  void add(ThreadPool& pool, const MatmulScratch& scratch, const BatchPlan& plan, const int32_t* row_seq, int64_t rows,
           int64_t layer, LoraTarget t, const float* x, int64_t x_cols, float* y, int64_t y_cols);

 private:
  AlignedVector<float> gx_;   // (max_rows, max_width) the set's rows of x, gathered
  AlignedVector<float> u_;    // (max_rows, max_rank) A x
  AlignedVector<float> v_;    // (max_rows, max_width) B (A x)
  AlignedVector<int32_t> rows_;  // the set's rows
};

}  // namespace ll3
