// The step sizes the CUDA runner captures a graph for (LL3_CUDA_GRAPHS=1): a decode step launches
// some 500 kernels, a few microseconds each, which a graph replays as one launch. A graph is fixed
// to its row count, so a step runs the graph of the smallest bucket that holds it, its extra rows
// padded (they write a scratch KV block and are not read back; every product is batch-invariant,
// so the real rows get the same bits). Larger steps are prompts, bound by their products, and
// launch kernel by kernel. Plain C++, tested on the CPU.
#pragma once

#include <cstdint>

namespace ll3 {

inline constexpr int64_t kGraphBuckets[] = {1, 2, 4, 8, 12, 16, 24, 32, 48, 64};

// The bucket for a step of `rows` rows, or 0 (no graph) past the last bucket or past max_rows,
// the most rows the runner's buffers hold.
inline int64_t graph_bucket(int64_t rows, int64_t max_rows) {
  if (rows <= 0) return 0;
  for (int64_t b : kGraphBuckets) {
    if (b > max_rows) return 0;
    if (rows <= b) return b;
  }
  return 0;
}

// The bucket's index in kGraphBuckets (b one of them).
inline int graph_bucket_index(int64_t b) {
  int i = 0;
  while (kGraphBuckets[i] != b) ++i;
  return i;
}

}  // namespace ll3
