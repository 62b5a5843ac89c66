// The per-token path allocates nothing: a decode step (forward pass + sampling) and a prompt
// step within the session's batch size make no heap allocation once the session exists.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include <future>

#include "engine/sampler.h"
#include "eval/sequence_evaluator.h"
#include "ll3/engine.h"
#include "test_support.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};
}  // namespace

// Counting replacements of the global allocation functions (this test executable only).
// GCC inlines the deletes below into `new T` expressions and then reports free() of memory
// from operator new (-Wmismatched-new-delete), not seeing that this operator new is malloc.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace ll3 {
namespace {

class AllocationCounter {
 public:
  AllocationCounter() {
    g_allocations = 0;
    g_counting = true;
  }
  ~AllocationCounter() { g_counting = false; }
  long count() const { return g_allocations.load(); }
};

void check_model(const std::string& file, bool int8) {
  auto m = LlamaModel::load(test::shared_dir() + "/models/" + file);
  ASSERT_TRUE(m.ok()) << m.message();
  EvaluatorOptions o;
  o.context = 128;
  o.batch = 32;
  o.threads = 2;
  o.int8_activations = int8;
  auto s = SequenceEvaluator::create(**m, o);
  ASSERT_TRUE(s.ok()) << s.message();
  SamplingParams sp;
  sp.seed = 1;
  sp.repeat_penalty = 1.1f;
  sp.presence_penalty = 0.2f;
  Sampler sampler(sp, static_cast<int32_t>((*m)->config.n_vocab));
  std::vector<int32_t> prompt(20);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(1000 + 37 * i);
  ASSERT_TRUE((*s)->eval(prompt).ok());  // first use: warm-up of lazily initialised statics
  int32_t tok = sampler.sample((*s)->last_logits(), (*s)->history());
  ASSERT_TRUE((*s)->eval(std::span<const int32_t>(&tok, 1)).ok());

  AllocationCounter counter;
  for (int i = 0; i < 16; ++i) {
    tok = sampler.sample((*s)->last_logits(), (*s)->history());
    ASSERT_TRUE((*s)->eval(std::span<const int32_t>(&tok, 1)).ok());
  }
  ASSERT_TRUE((*s)->eval(std::span<const int32_t>(prompt).subspan(0, 16)).ok());
  EXPECT_EQ(counter.count(), 0) << file;
}

TEST(NoAllocation, CounterSeesAllocations) {
  AllocationCounter counter;
  // Through a volatile pointer, so the compiler cannot pair the new with the delete and leave
  // the allocation out, which C++ permits (GCC 12 at -O2 left one of the two out here).
  std::vector<int>* volatile v = new std::vector<int>(100);
  delete v;
  EXPECT_EQ(counter.count(), 2);  // the vector object and its buffer
}

TEST(NoAllocation, DecodeAndPromptStepsF32Model) {
  LL3_REQUIRE_SHARED();
  check_model("tiny-llama3-f32.gguf", true);
}

TEST(NoAllocation, DecodeAndPromptStepsQuantizedModel) {
  LL3_REQUIRE_SHARED();
  check_model("small-llama32-mixed.gguf", true);
  check_model("small-llama32-mixed.gguf", false);
}

// The engine's loop between tokens: batched decode steps of 4 sequences, sampling (with
// penalties and top-k), stop-string matching, UTF-8 assembly and the token callbacks. Counted
// on every thread from request 0's 8th token to its 56th.
TEST(NoAllocation, EngineDecodeStepsOfFourSequences) {
  LL3_REQUIRE_SHARED();
  Result<std::unique_ptr<Engine>> e =
      Engine::create(test::shared_dir() + "/models/small-llama31-q4_k_m.gguf", EngineOptions{});
  ASSERT_TRUE(e.ok()) << e.message();
  std::atomic<long> counted{-1};
  std::vector<std::promise<void>> done(4);
  for (int i = 0; i < 4; ++i) {
    Request r;
    for (int k = 0; k < 20; ++k) r.tokens.push_back(1000 + 37 * k + i);
    r.max_tokens = 64;
    r.ignore_eos = true;
    r.stop = {"never appears in this text"};
    r.sampling.seed = 5 + i;
    r.sampling.repeat_penalty = 1.1f;
    if (i == 0) {
      r.on_token = [&](const TokenEvent& ev) {
        if (ev.index == 8) {
          g_allocations = 0;
          g_counting = true;
        } else if (ev.index == 56) {
          g_counting = false;
          counted = g_allocations.load();
        }
        return true;
      };
    }
    r.on_finish = [&done, i](const FinishInfo&) { done[i].set_value(); };
    ASSERT_TRUE((*e)->submit(std::move(r)).ok());
  }
  for (auto& d : done) d.get_future().wait();
  EXPECT_EQ(counted.load(), 0);
}

}  // namespace
}  // namespace ll3
