// LoRA adapters in the engine: 16 requests at once over four adapters and the base each get
// their solo tokens, bit for bit; adapter sets never share KV (prefix cache and sessions) with
// each other or the base; an adapter in use cannot be unloaded, an unknown one is refused, the
// bounded cache unloads the least recently used adapter no request runs with.
#include <gtest/gtest.h>

#include <future>
#include <set>

#include "engine_fixtures.h"
#include "model/llama_model.h"
#include "model/lora_write.h"

namespace ll3 {
namespace {

// Four adapters of the engine model (ranks 4..32, one F16, one of the LM head too), written once.
const std::vector<LoraSpec>& adapters() {
  static const std::vector<LoraSpec> specs = [] {
    std::vector<LoraSpec> out;
    auto base = LlamaModel::load(test::engine_model_path());
    if (!base.ok()) return out;
    const std::string dir = test::temp_dir();
    for (int k = 0; k < 4; ++k) {
      RandomLoraOptions o;
      o.rank = 4 << k;
      o.seed = 100 + static_cast<uint32_t>(k);
      o.type = k == 2 ? DType::F16 : DType::F32;
      o.output = k == 3;
      const std::string path = dir + "/a" + std::to_string(k) + ".gguf";
      if (!write_random_lora(**base, o, path, "").ok()) return std::vector<LoraSpec>();
      out.push_back({"ad" + std::to_string(k), path, k == 1 ? 0.5f : 1.0f});
    }
    return out;
  }();
  return specs;
}

std::unique_ptr<Engine> engine_with_adapters(EngineOptions o = {}) {
  o.threads = 2;
  o.ctx = 2048;
  o.loras = adapters();
  o.lora_runtime = true;
  auto e = Engine::create(test::engine_model(), o);
  EXPECT_TRUE(e.ok()) << e.message();
  return e.ok() ? std::move(*e) : nullptr;
}

Request with(std::vector<int32_t> prompt, std::vector<std::string> names, int64_t n = 12) {
  Request r = test::greedy(std::move(prompt), n);
  for (const std::string& name : names) r.loras.push_back({name});
  return r;
}

TEST(EngineLora, SixteenRequestsOverFourAdaptersGetTheirSoloTokens) {
  LL3_REQUIRE_ENGINE_MODEL();
  ASSERT_EQ(adapters().size(), 4u);
  std::unique_ptr<Engine> e = engine_with_adapters();
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->loras().size(), 4u);
  std::vector<Request> reqs;
  for (int i = 0; i < 16; ++i) {
    std::vector<std::string> names;
    if (i % 5 < 4) names.push_back("ad" + std::to_string(i % 5));
    if (i == 9) names.push_back("ad0");  // two adapters in one set
    reqs.push_back(with(test::random_prompt(10 + i % 7, 1 + static_cast<uint32_t>(i % 3)), names));
  }
  std::vector<std::vector<int32_t>> solo;
  for (const Request& r : reqs) {
    Result<Engine::Completion> c = e->generate(r);
    ASSERT_TRUE(c.ok()) << c.message();
    ASSERT_EQ(c->tokens.size(), 12u);
    solo.push_back(c->tokens);
  }
  std::set<std::vector<int32_t>> distinct(solo.begin(), solo.end());
  EXPECT_GE(distinct.size(), 8u) << "the adapters change the tokens (prompts repeat across them)";
  std::vector<std::future<Result<Engine::Completion>>> runs;
  for (const Request& r : reqs) runs.push_back(std::async(std::launch::async, [&e, r] { return e->generate(r); }));
  for (size_t i = 0; i < runs.size(); ++i) {
    Result<Engine::Completion> c = runs[i].get();
    ASSERT_TRUE(c.ok()) << c.message();
    EXPECT_EQ(c->tokens, solo[i]) << "request " << i;
  }
  for (const LoraInfo& l : e->loras()) {
    EXPECT_EQ(l.running, 0) << l.name;
    EXPECT_GE(l.requests, 2 * 3) << l.name;
  }
}

TEST(EngineLora, AdapterSetsNeverShareKv) {
  LL3_REQUIRE_ENGINE_MODEL();
  std::unique_ptr<Engine> e = engine_with_adapters();
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> prompt = test::random_prompt(70, 9);
  auto cached = [&](std::vector<std::string> names, const std::string& session = "") {
    Request r = with(prompt, std::move(names), 2);
    r.session_id = session;
    Result<Engine::Completion> c = e->generate(r);
    EXPECT_TRUE(c.ok()) << c.message();
    return c.ok() ? c->finish.cached_tokens : -1;
  };
  EXPECT_EQ(cached({}), 0);
  EXPECT_GE(cached({}), 64) << "the base's second request finds its blocks";
  EXPECT_EQ(cached({"ad0"}), 0) << "not the base's blocks";
  EXPECT_GE(cached({"ad0"}), 64);
  EXPECT_EQ(cached({"ad1"}), 0) << "not ad0's blocks";
  EXPECT_EQ(cached({"ad0", "ad1"}), 0) << "a set is its own";
  Request r = with(prompt, {"ad0"}, 2);
  r.loras[0].scale = 0.25f;
  Result<Engine::Completion> c = e->generate(r);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->finish.cached_tokens, 0) << "another scale is another set";
  // A session of one adapter is not the base's session of the same name.
  EXPECT_EQ(cached({"ad2"}, "s"), 0);
  EXPECT_GE(cached({}, "s"), 64) << "the base finds its own prefix cache, not ad2's session";
}

TEST(EngineLora, LoadingAndUnloading) {
  LL3_REQUIRE_ENGINE_MODEL();
  EngineOptions o;
  o.max_loras = 4;
  std::unique_ptr<Engine> e = engine_with_adapters(o);
  ASSERT_NE(e, nullptr);
  // Unknown adapters are refused at submit, naming them.
  Result<RequestId> bad = e->submit(with(test::random_prompt(5, 1), {"nope"}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.message().find("'nope'"), std::string::npos) << bad.message();
  // In use: a long request holds ad1.
  std::promise<void> first;
  bool told = false;
  Request r = with(test::random_prompt(5, 2), {"ad1"}, 400);
  r.on_token = [&](const TokenEvent&) {
    if (!told) first.set_value();
    told = true;
    return true;
  };
  std::promise<FinishInfo> done;
  r.on_finish = [&](const FinishInfo& f) { done.set_value(f); };
  Result<RequestId> id = e->submit(std::move(r));
  ASSERT_TRUE(id.ok());
  first.get_future().wait();
  Status st = e->unload_lora("ad1");
  EXPECT_EQ(st.code(), StatusCode::kConflict) << st.message();
  EXPECT_NE(st.message().find("in use"), std::string::npos) << st.message();
  // The cache is full (4 of 4): a fifth adapter unloads the least recently used one not in use.
  const std::vector<LoraSpec>& specs = adapters();
  ASSERT_TRUE(e->generate(with(test::random_prompt(5, 3), {"ad0"}, 1)).ok());  // ad0 recently used
  ASSERT_TRUE(e->load_lora({"again", specs[3].path, 1.0f}).ok());
  std::set<std::string> names;
  for (const LoraInfo& l : e->loras()) names.insert(l.name);
  EXPECT_EQ(names, (std::set<std::string>{"ad0", "ad1", "ad3", "again"})) << "ad2 was the least recently used";
  EXPECT_FALSE(e->load_lora({"again", specs[0].path, 1.0f}).ok()) << "a name loaded twice";
  EXPECT_EQ(e->unload_lora("ad2").code(), StatusCode::kNotFound);
  e->cancel(id.value());
  done.get_future().wait();
  EXPECT_TRUE(e->unload_lora("ad1").ok());
  EXPECT_EQ(e->loras().size(), 3u);
  // A file that does not fit the model: what and where.
  Status wrong = e->load_lora({"tiny", test::shared_dir() + "/models/tiny-llama3-f32.gguf", 1.0f});
  EXPECT_EQ(wrong.code(), StatusCode::kInvalid);
  EXPECT_NE(wrong.message().find("not a LoRA adapter"), std::string::npos) << wrong.message();
}

TEST(EngineLora, AnEngineWithoutLoraRefusesAdapters) {
  LL3_REQUIRE_ENGINE_MODEL();
  auto e = Engine::create(test::engine_model(), EngineOptions{});
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE((*e)->submit(with(test::random_prompt(5, 1), {"ad0"})).ok());
  Status st = (*e)->load_lora({"x", "y", 1.0f});
  EXPECT_NE(st.message().find("takes no LoRA adapters"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace ll3
