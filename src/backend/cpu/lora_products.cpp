#include "backend/cpu/lora_products.h"

#include <algorithm>

#include "kernels/lora_kernels.h"

namespace ll3 {

namespace {

const LoraPair* pair_of(const LoraAdapter& a, int64_t layer, LoraTarget t) {
  if (layer < 0) return a.output.present() ? &a.output : nullptr;
  return a.pair(layer, t);
}

// Output columns a thread takes at a time in the second pass (whole panels).
constexpr int64_t kColumnChunk = 16 * kernels::kLoraPanel;
// Rows of A (dots of a row of x) per item of the first pass.
constexpr int64_t kRankChunk = 4;

}  // namespace

LoraProducts::LoraProducts(int64_t max_rows, int64_t max_rank) {
  u_.resize(static_cast<size_t>(max_rows * max_rank));
  rows_.resize(static_cast<size_t>(max_rows));
  y_rows_.resize(static_cast<size_t>(max_rows));
  jobs_.resize(static_cast<size_t>(kMaxJobs));
}

void LoraProducts::add(ThreadPool& pool, const BatchPlan& plan, const int32_t* row_seq, int64_t rows, int64_t layer,
                       LoraTarget t, const float* x, int64_t x_cols, float* y, int64_t y_cols) {
  // Jobs in set order, each set's adapters in its order, run in waves that fit u_ and jobs_:
  // a row's corrections are added in its adapters' order whatever the waves.
  int64_t n_jobs = 0, u_used = 0, row_end = 0;
  for (size_t k = 0; k < plan.lora_sets.size(); ++k) {
    const LoraSet& set = *plan.lora_sets[k];
    bool touches = false;
    for (const LoraUseOf& use : set.uses) touches = touches || pair_of(*use.adapter, layer, t) != nullptr;
    if (!touches) continue;
    const int64_t row0 = row_end;
    for (int64_t r = 0; r < rows; ++r) {
      if (plan.seq_lora[static_cast<size_t>(row_seq[r])] != static_cast<int32_t>(k)) continue;
      rows_[static_cast<size_t>(row_end)] = static_cast<int32_t>(r);
      y_rows_[static_cast<size_t>(row_end++)] = y + r * y_cols;
    }
    const int64_t n = row_end - row0;
    if (n == 0) continue;
    for (const LoraUseOf& use : set.uses) {
      const LoraPair* p = pair_of(*use.adapter, layer, t);
      if (p == nullptr) continue;
      const int64_t need = n * p->a.rows;
      if (n_jobs == kMaxJobs || u_used + need > static_cast<int64_t>(u_.size())) {
        run(pool, n_jobs, x, x_cols, y_cols);
        n_jobs = u_used = 0;
      }
      jobs_[static_cast<size_t>(n_jobs++)] = Job{p, use.scale * p->scale, row0, n, u_used, n * ((p->a.rows + kRankChunk - 1) / kRankChunk)};
      u_used += need;
    }
  }
  if (n_jobs > 0) run(pool, n_jobs, x, x_cols, y_cols);
}

void LoraProducts::run(ThreadPool& pool, int64_t n_jobs, const float* x, int64_t x_cols, int64_t y_cols) {
  const Job* jobs = jobs_.data();
  // u = A x: item i is kRankChunk dots of one row of one job (a row alone, as in decode, still
  // splits its adapter's A across the threads).
  int64_t items = 0;
  for (int64_t i = 0; i < n_jobs; ++i) items += jobs[i].items;
  pool.parallel_for_dynamic(items, 1, [&](int64_t begin, int64_t end, int) {
    int64_t j = 0, first = 0;  // the job holding item i, and its first item
    for (int64_t i = begin; i < end; ++i) {
      while (i >= first + jobs[j].items) first += jobs[j++].items;
      const Job& job = jobs[j];
      const WeightMatrix& a = job.pair->a;
      const int64_t per_row = job.items / job.n;
      const int64_t r = (i - first) / per_row, k0 = (i - first) % per_row * kRankChunk;
      const float* xr = x + rows_[static_cast<size_t>(job.row0 + r)] * x_cols;
      float* u = &u_[static_cast<size_t>(job.u0 + r * a.rows)];
      for (int64_t k = k0; k < std::min(a.rows, k0 + kRankChunk); ++k) {
        u[k] = a.traits->dot_f32(a.data + k * a.row_bytes, xr, x_cols);
      }
    }
  });
  // y += s Bᵀu by columns: each column of each row is one thread's, added in job order.
  const kernels::LoraExpandFn expand = kernels::lora_expand();
  pool.parallel_for_dynamic(y_cols, kColumnChunk, [&](int64_t j0, int64_t j1, int) {
    for (int64_t i = 0; i < n_jobs; ++i) {
      const Job& job = jobs[i];
      expand(job.pair->bt, job.pair->a.rows, &u_[static_cast<size_t>(job.u0)], job.n, job.scale,
             &y_rows_[static_cast<size_t>(job.row0)], j0, j1);
    }
  });
}

}  // namespace ll3
