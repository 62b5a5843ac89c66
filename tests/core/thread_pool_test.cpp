// ThreadPool's work splitters: every index of [0, n) handed out exactly once, whatever the
// chunk and thread counts, including when one thread is slow and the others steal its work.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace ll3 {
namespace {

TEST(ThreadPool, StealingCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 64, 1000, 4099}) {
      for (int64_t chunk : {1, 3, 16, 5000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for_stealing(n, chunk, [&](int64_t b, int64_t e, int t) {
          ASSERT_LT(b, e);
          if (threads > 1 && n > chunk) {  // else one call covers [0, n)
            ASSERT_LE(e - b, chunk);
          }
          ASSERT_GE(t, 0);
          ASSERT_LT(t, threads);
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << chunk << " " << i;
      }
    }
  }
}

TEST(ThreadPool, StealingWithAnUnevenSplitCoversEveryIndexOnce) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    const int64_t n = 1000;
    // Thread 0 starts with almost everything, the last thread with nothing.
    auto split = [&](int t, int nt) { return t == 0 ? int64_t{0} : t + 1 == nt ? n : n - 7; };
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for_stealing(n, 5, split, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << threads << " " << i;
  }
}

TEST(ThreadPool, StealingTakesOverFromASlowThread) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> by_thread(2);
  // Thread 0 (the caller) sleeps on its first chunk; thread 1 must take over the rest of
  // thread 0's range from the back.
  std::atomic<bool> slept{false};
  pool.parallel_for_stealing(200, 10, [&](int64_t b, int64_t e, int t) {
    if (t == 0 && !slept.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    by_thread[static_cast<size_t>(t)].fetch_add(static_cast<int>(e - b));
  });
  EXPECT_EQ(by_thread[0].load() + by_thread[1].load(), 200);
  EXPECT_GT(by_thread[1].load(), 100) << "thread 1 should have stolen from thread 0's half";
}

}  // namespace
}  // namespace ll3
