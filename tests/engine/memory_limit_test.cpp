// The engine within a container's memory limit (a fake cgroup tree through the test hook): the
// default KV pool shrinks to what fits beside the weights, a pool asked for is kept, and a
// limit that leaves no room for a KV cache is a clear error at create.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/model_impl.h"  // the weights' size and whether they were copied
#include "engine_fixtures.h"
#include "ll3/engine.h"
#include "test_support.h"

namespace ll3 {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<const Model> model() { return test::engine_model(); }

// A cgroup v2 tree with this memory limit and usage, in force while it lives.
struct FakeCgroup {
  FakeCgroup(int64_t limit, int64_t usage) : root(test::temp_dir() + "/cg") {
    fs::create_directories(root);
    std::ofstream(root / "cgroup.controllers") << "memory\n";
    std::ofstream(root / "memory.max") << limit << "\n";
    std::ofstream(root / "memory.current") << usage << "\n";
    std::ofstream(root / "self") << "0::/\n";
    setenv("LL3_CGROUP_ROOT", root.c_str(), 1);
    setenv("LL3_PROC_SELF_CGROUP", (root / "self").c_str(), 1);
  }
  ~FakeCgroup() {
    unsetenv("LL3_CGROUP_ROOT");
    unsetenv("LL3_PROC_SELF_CGROUP");
  }
  fs::path root;
};

int64_t kv_bytes_per_token() {
  const LlamaConfig& c = model_impl(*model()).llama->config;
  return 2 * c.n_layers * c.n_kv_heads * c.head_dim * 2;  // K and V, F16
}

// What the engine leaves for weights it holds as mapped pages (copied ones are in the usage).
int64_t weights_charged() {
  const LlamaModel& m = *model_impl(*model()).llama;
  return m.weights_copied() ? 0 : static_cast<int64_t>(m.weight_bytes());
}

constexpr int64_t kReserve = int64_t{256} << 20;  // the engine's floor for scratch and the heap

TEST(MemoryLimit, TheDefaultKvPoolShrinksToFitBesideTheWeights) {
  LL3_REQUIRE_SHARED();
  ASSERT_NE(model(), nullptr);
  const int64_t per_token = kv_bytes_per_token();
  // Room for exactly 1000 positions beside the weights, the usage and the reserve.
  const int64_t usage = 100 << 20;
  const int64_t limit = usage + weights_charged() + kReserve + 1000 * per_token;
  ASSERT_LT(limit / 10, kReserve) << "the reserve is the floor at this size";
  FakeCgroup cg(limit, usage);
  std::vector<std::pair<LogLevel, std::string>> logged;
  EngineOptions o;
  o.log = [&](LogLevel l, const std::string& m) { logged.push_back({l, m}); };
  Result<std::unique_ptr<Engine>> e = Engine::create(model(), o);
  ASSERT_TRUE(e.ok()) << e.message();
  const EngineStats st = (*e)->stats();
  EXPECT_EQ(st.kv_blocks, (1000 + 15) / 16);
  EXPECT_EQ(st.max_seq_tokens, 1000);
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_NE(logged[0].second.find("KV pool of 1000 tokens"), std::string::npos) << logged[0].second;
  // It runs.
  Request r;
  r.text = "The limit";
  r.max_tokens = 3;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  Result<Engine::Completion> c = (*e)->generate(r);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->tokens.size(), 3u);
}

TEST(MemoryLimit, APoolAskedForIsKeptWithAWarning) {
  LL3_REQUIRE_SHARED();
  ASSERT_NE(model(), nullptr);
  const int64_t usage = 100 << 20;
  FakeCgroup cg(usage + weights_charged() + kReserve + 1000 * kv_bytes_per_token(), usage);
  std::vector<std::pair<LogLevel, std::string>> logged;
  EngineOptions o;
  o.ctx = 2048;
  o.log = [&](LogLevel l, const std::string& m) { logged.push_back({l, m}); };
  Result<std::unique_ptr<Engine>> e = Engine::create(model(), o);
  ASSERT_TRUE(e.ok()) << e.message();
  EXPECT_EQ((*e)->stats().kv_blocks, 2048 / 16);
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_EQ(logged[0].first, LogLevel::kWarning);
}

TEST(MemoryLimit, NoRoomForAKvCacheIsAClearError) {
  LL3_REQUIRE_SHARED();
  ASSERT_NE(model(), nullptr);
  const int64_t usage = 100 << 20;
  FakeCgroup cg(usage + weights_charged() + kReserve + 10 * kv_bytes_per_token(), usage);
  Result<std::unique_ptr<Engine>> e = Engine::create(model(), EngineOptions{});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("leaves no room for a KV cache within the memory limit"), std::string::npos) << e.message();
}

}  // namespace
}  // namespace ll3
