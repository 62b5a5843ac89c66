// The CUDA runner's graph buckets (backend/graph_buckets.h): the smallest bucket holding a step,
// none past the last one or past what the runner's buffers hold.
#include <gtest/gtest.h>

#include "backend/graph_buckets.h"

namespace ll3 {
namespace {

TEST(GraphBuckets, SmallestBucketThatHoldsTheStep) {
  EXPECT_EQ(graph_bucket(1, 256), 1);
  EXPECT_EQ(graph_bucket(3, 256), 4);
  EXPECT_EQ(graph_bucket(8, 256), 8);
  EXPECT_EQ(graph_bucket(9, 256), 12);
  EXPECT_EQ(graph_bucket(33, 256), 48);
  EXPECT_EQ(graph_bucket(64, 256), 64);
  EXPECT_EQ(graph_bucket(65, 256), 0) << "a prompt-sized step launches op by op";
  EXPECT_EQ(graph_bucket(0, 256), 0);
  EXPECT_EQ(graph_bucket(10, 10), 0) << "bucket 12 is past the runner's 10 rows";
  EXPECT_EQ(graph_bucket(8, 10), 8);
  for (int64_t rows = 1; rows <= 64; ++rows) {
    const int64_t b = graph_bucket(rows, 64);
    ASSERT_GE(b, rows);
    EXPECT_EQ(kGraphBuckets[graph_bucket_index(b)], b);
    EXPECT_LE(b, rows + rows / 2 + 1) << "padding at most half the step";
  }
}

}  // namespace
}  // namespace ll3
