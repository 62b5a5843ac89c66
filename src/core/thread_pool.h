// A persistent pool of worker threads for the forward pass. Workers spin briefly between jobs
// (ops follow each other within microseconds during decode) and then sleep on an atomic wait,
// so an idle engine costs no CPU. Dispatching a job allocates nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace ll3 {

// A non-owning reference to a callable (no allocation, unlike std::function).
template <class Sig>
class FunctionRef;
template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& f)  // NOLINT: implicit by design
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, Args... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(a...); }) {}
  R operator()(Args... a) const { return call_(obj_, a...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads <= 0: all hardware threads
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(thread_index, n_threads) on every thread (the caller is thread 0) and returns when
  // all have finished.
  void run(FunctionRef<void(int, int)> fn);

  // Hands out [0, n) in chunks of `chunk` from a shared counter: fn(begin, end, thread_index)
  // per chunk. A thread that runs faster (or is not preempted) takes more chunks, so one slow
  // thread does not hold the others at the barrier.
  template <class F>
  void parallel_for_dynamic(int64_t n, int64_t chunk, F&& fn) {
    if (chunk < 1) chunk = 1;
    if (n_threads_ == 1 || n <= chunk) {
      if (n > 0) fn(int64_t{0}, n, 0);
      return;
    }
    std::atomic<int64_t> next{0};
    auto body = [&](int t, int) {
      for (;;) {
        const int64_t begin = next.fetch_add(chunk, std::memory_order_relaxed);
        if (begin >= n) return;
        fn(begin, begin + chunk < n ? begin + chunk : n, t);
      }
    };
    run(body);
  }

  // Splits [0, n) into one contiguous range per thread, which its owner walks front to back in
  // chunks of `chunk`; a thread done with its own range takes over the back half of the
  // fullest other one. Each thread streams contiguous memory (like parallel_for; decode
  // measured 2-7% faster than with interleaved chunks), yet a preempted thread does not hold
  // the others at the barrier (like parallel_for_dynamic). fn(begin, end, thread_index) per
  // chunk; with one thread, or n <= chunk, one call covers [0, n).
  template <class F>
  void parallel_for_stealing(int64_t n, int64_t chunk, F&& fn) {
    parallel_for_stealing(n, chunk, [n](int t, int nt) { return n * t / nt; }, fn);
  }

  // The same with the threads' first ranges bounded by split(t, n_threads) (nondecreasing,
  // split(0) = 0; n is the end of the last), so items of unequal cost can start with equal
  // shares of the work.
  template <class S, class F>
  void parallel_for_stealing(int64_t n, int64_t chunk, S&& split, F&& fn) {
    constexpr int kMaxRanges = 64;
    if (chunk < 1) chunk = 1;
    if (n_threads_ == 1 || n <= chunk) {
      if (n > 0) fn(int64_t{0}, n, 0);
      return;
    }
    if (n_threads_ > kMaxRanges || n >= (int64_t{1} << 31)) {
      parallel_for_dynamic(n, chunk, fn);
      return;
    }
    // Per thread: front (low 32 bits, advanced by the owner) and back (high 32, lowered by
    // thieves) in one word, so one compare-exchange settles a race between them.
    struct alignas(64) Range {
      std::atomic<uint64_t> front_back{0};
    };
    Range ranges[kMaxRanges];
    auto pack = [](int64_t f, int64_t b) { return static_cast<uint64_t>(f) | static_cast<uint64_t>(b) << 32; };
    for (int t = 0; t < n_threads_; ++t) {
      const int64_t lo = split(t, n_threads_), hi = t + 1 < n_threads_ ? split(t + 1, n_threads_) : n;
      ranges[t].front_back.store(pack(lo, hi), std::memory_order_relaxed);
    }
    auto body = [&](int t, int nt) {
      std::atomic<uint64_t>& own = ranges[t].front_back;
      for (;;) {
        // Walk the own range from the front; a failed exchange (a thief took part of the back)
        // has reloaded v, so just try again.
        uint64_t v = own.load(std::memory_order_relaxed);
        for (;;) {
          const int64_t f = static_cast<int64_t>(v & 0xffffffffu), b = static_cast<int64_t>(v >> 32);
          if (f >= b) break;
          const int64_t hi = f + chunk < b ? f + chunk : b;
          if (!own.compare_exchange_weak(v, pack(hi, b), std::memory_order_relaxed)) continue;
          fn(f, hi, t);
          v = own.load(std::memory_order_relaxed);
        }
        // Then take the back half of the fullest other range (all of it when at most a chunk
        // is left) and make it the own range: few thefts, each a long stream, and what is
        // taken can be taken back in part by whoever runs out next.
        int victim = -1;
        int64_t most = 0;
        for (int k = 1; k < nt; ++k) {
          const uint64_t w = ranges[(t + k) % nt].front_back.load(std::memory_order_relaxed);
          const int64_t left = static_cast<int64_t>(w >> 32) - static_cast<int64_t>(w & 0xffffffffu);
          if (left > most) most = left, victim = (t + k) % nt;
        }
        if (victim < 0) return;
        std::atomic<uint64_t>& r = ranges[victim].front_back;
        uint64_t w = r.load(std::memory_order_relaxed);
        int64_t lo = 0, hi = 0;
        for (;;) {
          const int64_t f = static_cast<int64_t>(w & 0xffffffffu), b = static_cast<int64_t>(w >> 32);
          if (f >= b) break;
          lo = b - f <= chunk ? f : b - (b - f) / 2;
          if (r.compare_exchange_weak(w, pack(f, lo), std::memory_order_relaxed)) {
            hi = b;
            break;
          }
        }
        // The own range is empty, so no thief can be changing it.
        if (lo < hi) own.store(pack(lo, hi), std::memory_order_relaxed);
      }
    };
    run(body);
  }

  // Splits [0, n) into one contiguous range per thread: fn(begin, end, thread_index).
  template <class F>
  void parallel_for(int64_t n, F&& fn) {
    if (n_threads_ == 1 || n <= 1) {
      if (n > 0) fn(int64_t{0}, n, 0);
      return;
    }
    auto body = [&](int t, int nt) {
      int64_t begin = n * t / nt, end = n * (t + 1) / nt;
      if (begin < end) fn(begin, end, t);
    };
    run(body);
  }

 private:
  void worker(int index);

  int n_threads_ = 1;
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  FunctionRef<void(int, int)>* job_ = nullptr;
};

// The number of threads to use by default: the cores this process may run on.
int default_thread_count();

}  // namespace ll3
