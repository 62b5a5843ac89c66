#include "backend/cpu/lora_products.h"

#include <algorithm>
#include <cstring>

namespace ll3 {

LoraProducts::LoraProducts(int64_t max_rows, int64_t max_width, int64_t max_rank, int64_t vocab) {
  gx_.resize(static_cast<size_t>(max_rows * max_width));
  u_.resize(static_cast<size_t>(max_rows * max_rank));
  v_.resize(static_cast<size_t>(std::max(max_rows * max_width, vocab)));
  rows_.resize(static_cast<size_t>(max_rows));
}

void LoraProducts::add(ThreadPool& pool, const MatmulScratch& scratch, const BatchPlan& plan, const int32_t* row_seq,
                       int64_t rows, int64_t layer, LoraTarget t, const float* x, int64_t x_cols, float* y,
                       int64_t y_cols) {
  for (size_t k = 0; k < plan.lora_sets.size(); ++k) {
    const LoraSet& set = *plan.lora_sets[k];
    bool touches = false;
    for (const LoraUseOf& use : set.uses) {
      touches = touches || (layer < 0 ? use.adapter->output.present() : use.adapter->pair(layer, t) != nullptr);
    }
    if (!touches) continue;
    int64_t n = 0;
    for (int64_t r = 0; r < rows; ++r) {
      if (plan.seq_lora[static_cast<size_t>(row_seq[r])] == static_cast<int32_t>(k)) rows_[static_cast<size_t>(n++)] = static_cast<int32_t>(r);
    }
    if (n == 0) continue;
    // In chunks whose corrections fit v_ (the LM head's rows are as wide as the vocabulary).
    const int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(v_.size()) / y_cols);
    for (int64_t c0 = 0; c0 < n; c0 += chunk) {
      const int64_t m = std::min(chunk, n - c0);
      const int32_t* rows = &rows_[static_cast<size_t>(c0)];
      for (int64_t i = 0; i < m; ++i) {
        std::memcpy(&gx_[i * x_cols], x + rows[i] * x_cols, static_cast<size_t>(x_cols) * sizeof(float));
      }
      for (const LoraUseOf& use : set.uses) {
        const LoraPair* p = layer < 0 ? (use.adapter->output.present() ? &use.adapter->output : nullptr) : use.adapter->pair(layer, t);
        if (p == nullptr) continue;
        matmul(pool, p->a, gx_.data(), u_.data(), m, scratch);  // (m, rank)
        matmul(pool, p->b, u_.data(), v_.data(), m, scratch);   // (m, y_cols)
        const float s = use.scale * p->scale;
        for (int64_t i = 0; i < m; ++i) {
          float* yr = y + rows[i] * y_cols;
          const float* vr = &v_[i * y_cols];
          for (int64_t j = 0; j < y_cols; ++j) yr[j] += vr[j] * s;
        }
      }
    }
  }
}

}  // namespace ll3
