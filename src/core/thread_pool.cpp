#include "core/thread_pool.h"

#include <sched.h>

#include "core/resource_limits.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define LL3_PAUSE() _mm_pause()
#else
#define LL3_PAUSE() ((void)0)
#endif

namespace ll3 {

namespace {
constexpr int kSpinIterations = 1 << 16;  // ~ tens of microseconds before sleeping
}

int default_thread_count() {
  // The affinity mask's CPUs, within a container's CPU quota (core/resource_limits.h).
  ResourceLimits limits = read_resource_limits();
  if (limits.affinity_cpus <= 0) limits.affinity_cpus = static_cast<int>(std::thread::hardware_concurrency());
  return threads_within(limits);
}

ThreadPool::ThreadPool(int n_threads) {
  n_threads_ = n_threads > 0 ? n_threads : default_thread_count();
  threads_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::run(FunctionRef<void(int, int)> fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  fn(0, n_threads_);
  // Wait for the workers: spin first, then sleep.
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations) {
      LL3_PAUSE();
    } else {
      int p = pending_.load(std::memory_order_acquire);
      if (p != 0) pending_.wait(p, std::memory_order_acquire);
    }
  }
  job_ = nullptr;
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g;
    for (int spin = 0;; ++spin) {
      g = generation_.load(std::memory_order_acquire);
      if (g != seen) break;
      if (spin < kSpinIterations) {
        LL3_PAUSE();
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(index, n_threads_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace ll3
