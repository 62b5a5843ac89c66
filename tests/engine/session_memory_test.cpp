// Sessions under a memory budget (EngineOptions::session_memory, `--session-memory`), through the
// public engine API on the shared small model: pinning a session beyond the budget unpins the
// least recently used one; an evicted session comes back from its file when there is a session
// directory and is recomputed when there is none; and the greedy tokens are the same either way,
// and the same as with no session at all.
#include <gtest/gtest.h>

#include <iterator>
#include <map>
#include <random>

#include "engine/model_impl.h"  // the model's KV shape, to state the budget in blocks
#include "engine_fixtures.h"
#include "ll3/engine.h"
#include "test_support.h"

namespace ll3 {
namespace {

std::shared_ptr<const Model> shared_model() { return test::engine_model(); }
#define REQUIRE_MODEL() LL3_REQUIRE_ENGINE_MODEL()

constexpr int64_t kBlock = 16;
constexpr int64_t kPoolBlocks = 15;   // the whole KV pool
constexpr int64_t kBudgetBlocks = 7;  // what sessions may pin: two of three conversations

// Bytes of KV one position takes in the F16 cache: K and V of every layer.
int64_t kv_bytes_per_position() {
  const LlamaConfig& c = model_impl(*shared_model()).llama->config;
  return 2 * c.n_layers * c.n_kv_heads * c.head_dim * 2;
}

// Random token ids, without BOS: no two prompts share a leading token, so a recomputed session
// finds nothing cached (not even a shared BOS) and its cached_tokens is 0.
std::vector<int32_t> random_tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t;
  while (static_cast<int>(t.size()) < n) t.push_back(static_cast<int32_t>(1000 + rng() % 100000));
  return t;
}

// The turns every test runs, in order: {conversation, new prompt tokens, tokens to generate}.
// A first turn of 40 + 9 tokens leaves 48 computed positions, 3 blocks; a second turn (49 +
// 6 + 10) leaves 64, 4 blocks. "filler" is no session: 128 prompt tokens need the 8 blocks
// that are not pinned, so it pushes every unpinned block out of the prefix cache.
struct Turn {
  const char* conversation;
  int new_tokens;
  int max_tokens;
};
const Turn kTurns[] = {
    {"a", 40, 9},        // a: 3 blocks pinned
    {"b", 40, 9},        // b: 3, 6 in all
    {"a", 6, 10},        // a again (now 4 blocks, 7 in all): b is the least recently used
    {"c", 40, 9},        // c: 3, over the budget: b is unpinned
    {"filler", 128, 1},  // b's blocks leave the prefix cache
    {"b", 6, 10},        // b again: from its file, or recomputed; now 4 blocks: a is unpinned
    {"c", 6, 10},        // c was pinned all along; now 4, and b's 4 are over: b is unpinned
};

struct TurnResult {
  Engine::Completion out;
  EngineStats stats;  // after the turn
};

// Runs kTurns on one engine, each conversation's prompt being its history so far plus new
// tokens. sessions: the requests carry their conversation as session id ("filler" never);
// without, nothing is cached between requests (the reference).
std::vector<TurnResult> run_turns(const std::string& session_dir, bool sessions) {
  EngineOptions o;
  o.block_size = kBlock;
  o.ctx = kPoolBlocks * kBlock;
  o.session_memory = kBudgetBlocks * kBlock * kv_bytes_per_position();
  o.session_dir = session_dir;
  o.prefix_cache = sessions;
  Result<std::unique_ptr<Engine>> e = Engine::create(shared_model(), o);
  EXPECT_TRUE(e.ok()) << e.message();
  if (!e.ok()) return {};
  EXPECT_EQ((*e)->stats().kv_blocks, kPoolBlocks);
  std::map<std::string, std::vector<int32_t>> history;
  std::vector<TurnResult> out;
  for (const Turn& t : kTurns) {
    std::vector<int32_t>& h = history[t.conversation];
    Request r;
    r.tokens = h;
    for (int32_t x : random_tokens(t.new_tokens, static_cast<uint32_t>(out.size() + 1)))
      r.tokens.push_back(x);
    r.max_tokens = t.max_tokens;
    r.sampling.temperature = 0;
    r.ignore_eos = true;
    if (sessions && std::string(t.conversation) != "filler") r.session_id = t.conversation;
    h = r.tokens;
    Result<Engine::Completion> c = (*e)->generate(std::move(r));
    EXPECT_TRUE(c.ok()) << c.message();
    if (!c.ok()) return {};
    h.insert(h.end(), c->tokens.begin(), c->tokens.end());
    (*e)->wait_idle();
    out.push_back({std::move(c.value()), (*e)->stats()});
  }
  return out;
}

// Each turn's greedy tokens, every prompt computed whole (no sessions, no prefix cache).
const std::vector<TurnResult>& reference() {
  static const std::vector<TurnResult> r = run_turns("", false);
  return r;
}

// What both modes share: the pins after each turn (their count and blocks), c pinned from its
// first turn to its second, and the reference's tokens.
void expect_budget_and_tokens(const std::vector<TurnResult>& got) {
  ASSERT_EQ(got.size(), std::size(kTurns));
  ASSERT_EQ(reference().size(), std::size(kTurns));
  const int64_t sessions[] = {1, 2, 2, 2, 2, 2, 1};
  const int64_t blocks[] = {3, 6, 7, 7, 7, 7, 4};
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].stats.sessions, sessions[i]) << "after turn " << i;
    EXPECT_EQ(got[i].stats.session_blocks, blocks[i]) << "after turn " << i;
    EXPECT_EQ(got[i].stats.preemptions, 0) << "after turn " << i;
    EXPECT_FALSE(got[i].out.tokens.empty());
    EXPECT_EQ(got[i].out.tokens, reference()[i].out.tokens)
        << "turn " << i << " (" << kTurns[i].conversation << ")";
  }
  EXPECT_EQ(got[2].out.finish.cached_tokens, 48);  // a, pinned
  EXPECT_EQ(got[6].out.finish.cached_tokens, 48);  // c, pinned
}

TEST(SessionMemory, OverBudgetTheLeastRecentlyUsedSessionComesBackFromItsFile) {
  REQUIRE_MODEL();
  const std::vector<TurnResult> got = run_turns(test::temp_dir() + "/sessions", true);
  expect_budget_and_tokens(got);
  if (HasFatalFailure()) return;
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(got[i].stats.sessions_restored, 0) << "after turn " << i;
  // b was unpinned (saved first) and its blocks were reused: its file gives back all 48
  // positions, and only the new prompt tokens run through the model.
  EXPECT_EQ(got[5].stats.sessions_restored, 1);
  EXPECT_EQ(got[5].out.finish.cached_tokens, 48);
  EXPECT_EQ(got[5].out.finish.session_warning, "");
  EXPECT_EQ(got[5].stats.prompt_tokens_computed - got[4].stats.prompt_tokens_computed, 55 - 48);
  EXPECT_EQ(got[6].stats.sessions_restored, 1);  // c was in memory
  EXPECT_GE(got[6].stats.sessions_saved, 1);
  EXPECT_EQ(got[6].stats.session_files_rejected, 0);
}

TEST(SessionMemory, OverBudgetTheLeastRecentlyUsedSessionIsRecomputedWithoutADirectory) {
  REQUIRE_MODEL();
  const std::vector<TurnResult> got = run_turns("", true);
  expect_budget_and_tokens(got);
  if (HasFatalFailure()) return;
  // b's blocks are gone: its whole 55-token prompt runs again.
  EXPECT_EQ(got[5].out.finish.cached_tokens, 0);
  EXPECT_EQ(got[5].stats.prompt_tokens_computed - got[4].stats.prompt_tokens_computed, 55);
  EXPECT_EQ(got[6].stats.sessions_restored, 0);
  EXPECT_EQ(got[6].stats.sessions_saved, 0);
}

}  // namespace
}  // namespace ll3
