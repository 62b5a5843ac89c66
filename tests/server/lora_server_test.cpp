// LoRA adapters through a real `ll3 serve --lora`: each adapter is a model in /v1/models and
// "model" selects it (its greedy text is the engine's with that adapter; the response names it);
// llama-server's per-request "lora" list by index or name; an unknown adapter is a 404 naming it;
// run-time load and unload (--allow-runtime-lora; 409 while a request streams with the adapter,
// 403 without the flag); per-adapter metrics; and the official OpenAI Node client listing,
// selecting and streaming adapters (tests/server/js/lora_client_test.mjs).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "ll3/engine.h"
#include "server_harness.h"
#include "test_support.h"

namespace ll3::test {
namespace {

// Two adapters of the small model, made by `ll3 make-lora` (the second as a PEFT directory).
struct Adapters {
  std::string dir, a, b;
};
const Adapters& adapters() {
  static const Adapters ad = [] {
    Adapters x;
    x.dir = temp_dir();
    x.a = x.dir + "/a.gguf";
    x.b = x.dir + "/b-peft";
    for (const std::string& args : {"-o " + x.a + " --rank 8 --seed 1", "--peft " + x.b + " --rank 16 --seed 2 --type f16"}) {
      CommandResult r = run_command(ll3_binary() + " make-lora -m " + small_model_path() + " " + args, true);
      EXPECT_EQ(r.exit_code, 0) << r.output;
    }
    return x;
  }();
  return ad;
}

ServeProcess& lora_server() {
  static ServeProcess p({"-m", small_model_path(), "-t", "2", "--ctx", "2048", "--lora", "alpha=" + adapters().a,
                         "--lora", "beta=" + adapters().b + ":0.5", "--allow-runtime-lora", "--no-access-log"});
  return p;
}

#define REQUIRE_LORA_SERVER()  \
  LL3_REQUIRE_SHARED();        \
  ASSERT_TRUE(lora_server().ok()) << "ll3 serve --lora did not start"

// The engine's greedy tokens' text for a prompt with these adapters.
std::string engine_text(const std::vector<int32_t>& prompt, std::vector<LoraUse> loras, int n) {
  EngineOptions o;
  o.threads = 1;
  o.ctx = 1024;
  o.loras = {{"alpha", adapters().a, 1.0f}, {"beta", adapters().b, 0.5f}};
  static std::unique_ptr<Engine> e = [&] {
    auto r = Engine::create(small_model_path(), o);
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? std::move(*r) : nullptr;
  }();
  Request r;
  r.tokens = prompt;
  r.max_tokens = n;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  r.loras = std::move(loras);
  Result<Engine::Completion> c = e->generate(r);
  EXPECT_TRUE(c.ok()) << c.message();
  return c.ok() ? c->text : "";
}

const std::vector<int32_t> kPrompt = {128000, 791, 6864, 315, 9822, 374, 264, 1296, 315};

json completion(HttpClient& c, json extra, int n = 8) {
  json body = {{"prompt", kPrompt}, {"max_tokens", n}, {"temperature", 0}, {"ignore_eos", true}};
  body.update(extra);
  Reply r = post(c, "/v1/completions", body);
  EXPECT_EQ(r.status, 200) << r.body;
  return r.body_json();
}

TEST(ServerLora, AdaptersAreModelsAndModelSelectsThem) {
  REQUIRE_LORA_SERVER();
  HttpClient c(lora_server().port());
  Reply m = c.request("GET", "/v1/models");
  ASSERT_EQ(m.status, 200) << m.body;
  const json data = m.body_json()["data"];
  ASSERT_EQ(data.size(), 3u) << m.body;
  EXPECT_EQ(data[1]["id"], "alpha");
  EXPECT_EQ(data[1]["root"], adapters().a);
  EXPECT_EQ(data[1]["parent"], data[0]["id"]);
  EXPECT_EQ(data[2]["id"], "beta");
  EXPECT_EQ(c.request("GET", "/v1/models/beta").status, 200);

  const std::string base = engine_text(kPrompt, {}, 8), alpha = engine_text(kPrompt, {{"alpha"}}, 8),
                    beta = engine_text(kPrompt, {{"beta"}}, 8);
  ASSERT_FALSE(base.empty());
  EXPECT_NE(alpha, base);
  EXPECT_NE(beta, base);
  json r = completion(c, {{"model", "alpha"}});
  EXPECT_EQ(r["choices"][0]["text"], alpha);
  EXPECT_EQ(r["model"], "alpha");
  r = completion(c, {{"model", "beta"}});
  EXPECT_EQ(r["choices"][0]["text"], beta) << "at its --lora scale, 0.5";
  r = completion(c, {{"model", data[0]["id"]}});
  EXPECT_EQ(r["choices"][0]["text"], base);
  // llama-server's per-request list, by index (GET /lora-adapters' order) and by name.
  Reply list = c.request("GET", "/lora-adapters");
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.body_json()[0]["name"], "alpha");
  EXPECT_EQ(list.body_json()[1]["scale"], 0.5);
  r = completion(c, {{"lora", json::array({{{"id", 0}, {"scale", 1.0}}})}});
  EXPECT_EQ(r["choices"][0]["text"], alpha);
  r = completion(c, {{"lora", json::array({{{"id", "beta"}, {"scale", 0.25}}, {{"id", "alpha"}}})}});
  EXPECT_EQ(r["choices"][0]["text"], engine_text(kPrompt, {{"beta", 0.25f}, {"alpha", 1.0f}}, 8));
  r = completion(c, {{"model", "alpha"}, {"lora", json::array({{{"id", "alpha"}, {"scale", 0.0}}})}});
  EXPECT_EQ(r["choices"][0]["text"], base) << "scale 0 turns the model's adapter off";
  // Streamed chat with an adapter equals the plain one.
  json chat = {{"model", "alpha"}, {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"max_tokens", 6}, {"temperature", 0}};
  Reply plain = post(c, "/v1/chat/completions", chat);
  ASSERT_EQ(plain.status, 200) << plain.body;
  chat["stream"] = true;
  Reply s = c.stream("/v1/chat/completions", chat.dump());
  std::string text;
  for (const std::string& ev : s.events) {
    if (ev == "[DONE]") continue;
    const json j = json::parse(ev);
    EXPECT_EQ(j["model"], "alpha");
    if (!j["choices"].empty() && j["choices"][0]["delta"].contains("content")) text += j["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text, plain.body_json()["choices"][0]["message"]["content"]);
}

TEST(ServerLora, UnknownAdaptersAre404sNamingThem) {
  REQUIRE_LORA_SERVER();
  HttpClient c(lora_server().port());
  for (const json& bad : {json{{"lora", json::array({{{"id", 7}}})}}, json{{"lora", json::array({{{"id", "gamma"}}})}}}) {
    json body = {{"prompt", "x"}, {"max_tokens", 2}};
    body.update(bad);
    Reply r = post(c, "/v1/completions", body);
    EXPECT_EQ(r.status, 404) << r.body;
    EXPECT_EQ(r.body_json()["error"]["code"], "model_not_found") << r.body;
    EXPECT_NE(r.body.find(bad["lora"][0]["id"].is_string() ? "'gamma'" : "id 7"), std::string::npos) << r.body;
  }
  Reply r = post(c, "/v1/completions", {{"prompt", "x"}, {"lora", json::array({{{"id", -1}}})}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.body_json()["error"]["param"], "lora[0].id");
  EXPECT_EQ(c.request("GET", "/v1/models/gamma").status, 404);
}

TEST(ServerLora, LoadAndUnloadAtRunTime) {
  REQUIRE_LORA_SERVER();
  HttpClient c(lora_server().port());
  auto load = [&](const std::string& name, const std::string& path) {
    return post(c, "/v1/load_lora_adapter", {{"lora_name", name}, {"lora_path", path}});
  };
  Reply ok = load("gamma", adapters().a);
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(c.request("GET", "/v1/models/gamma").status, 200);
  EXPECT_EQ(completion(c, {{"model", "gamma"}})["choices"][0]["text"], completion(c, {{"model", "alpha"}})["choices"][0]["text"]);
  EXPECT_EQ(load("gamma", adapters().a).status, 400) << "the name is taken";
  Reply bad = load("delta", small_model_path());
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("not a LoRA adapter"), std::string::npos) << bad.body;
  // In use: a stream with gamma is running.
  std::atomic<bool> streaming{false}, stop{false};
  std::thread t([&] {
    HttpClient s(lora_server().port());
    s.stream("/v1/completions",
             json({{"model", "gamma"}, {"prompt", "Go"}, {"max_tokens", 1500}, {"ignore_eos", true}, {"stream", true}}).dump(),
             [&](const std::string&) {
               streaming = true;
               return !stop.load();
             });
  });
  for (int i = 0; i < 3000 && !streaming; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(streaming.load()) << "the stream did not start within 30 s";
  Reply busy = post(c, "/v1/unload_lora_adapter", {{"lora_name", "gamma"}});
  EXPECT_EQ(busy.status, 409) << busy.body;
  Reply metrics = c.request("GET", "/metrics");
  EXPECT_EQ(metric(metrics.body, "ll3_lora_requests_running{adapter=\"gamma\"}"), 1) << metrics.body;
  EXPECT_GE(metric(metrics.body, "ll3_lora_requests_total{adapter=\"alpha\"}"), 1);
  EXPECT_EQ(metric(metrics.body, "ll3_lora_adapters_loaded"), 3);
  stop = true;
  t.join();
  Reply gone = Reply{};
  for (int i = 0; i < 500 && gone.status != 200; ++i) {  // until the cancelled stream has ended
    gone = post(c, "/v1/unload_lora_adapter", {{"lora_name", "gamma"}});
    if (gone.status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(gone.status, 200) << gone.body;
  EXPECT_EQ(c.request("GET", "/v1/models/gamma").status, 404);
  EXPECT_EQ(post(c, "/v1/unload_lora_adapter", {{"lora_name", "gamma"}}).status, 404);
}

TEST(ServerLora, RunTimeLoadingIsOffWithoutTheFlag) {
  LL3_REQUIRE_SHARED();
  ServeProcess srv({"-m", small_model_path(), "-t", "1", "--ctx", "512", "--no-access-log"});
  ASSERT_TRUE(srv.ok());
  HttpClient c(srv.port());
  Reply r = post(c, "/v1/load_lora_adapter", {{"lora_name", "x"}, {"lora_path", adapters().a}});
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("--allow-runtime-lora"), std::string::npos) << r.body;
  EXPECT_EQ(post(c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}, {"lora", json::array({{{"id", 0}}})}}).status, 404);
}

// --lora-dir: every adapter of the directory, named by its file or directory; adapters loaded
// at run time must lie under it.
TEST(ServerLora, LoraDirLoadsEveryAdapterAndBoundsRunTimePaths) {
  LL3_REQUIRE_SHARED();
  ServeProcess srv({"-m", small_model_path(), "-t", "1", "--ctx", "512", "--lora-dir", adapters().dir, "--allow-runtime-lora",
                    "--no-access-log"});
  ASSERT_TRUE(srv.ok());
  HttpClient c(srv.port());
  const json data = c.request("GET", "/v1/models").body_json()["data"];
  ASSERT_EQ(data.size(), 3u) << data.dump();
  EXPECT_EQ(data[1]["id"], "a");
  EXPECT_EQ(data[2]["id"], "b-peft");
  Reply out = post(c, "/v1/load_lora_adapter", {{"lora_name", "x"}, {"lora_path", adapters().dir + "/../outside.gguf"}});
  EXPECT_EQ(out.status, 403) << out.body;
  EXPECT_NE(out.body.find("--lora-dir"), std::string::npos) << out.body;
  Reply in = post(c, "/v1/load_lora_adapter", {{"lora_name", "again"}, {"lora_path", adapters().a}});
  EXPECT_EQ(in.status, 200) << in.body;
}

TEST(ServerLora, OfficialOpenAiClient) {
  REQUIRE_LORA_SERVER();
  const std::string js = source_dir() + "/tests/server/js";
  if (run_command("command -v node").exit_code != 0 || !std::filesystem::exists(js + "/node_modules/openai/package.json")) {
    if (in_ci()) FAIL() << "node or the openai package is missing (scripts/setup.sh runs npm ci in tests/server/js)";
    GTEST_SKIP() << "node or tests/server/js/node_modules is missing";
  }
  const std::string expect = temp_dir() + "/expect.json";
  write_file(expect, json({{"prompt_tokens", kPrompt}, {"alpha", engine_text(kPrompt, {{"alpha"}}, 8)}, {"base", engine_text(kPrompt, {}, 8)}}).dump());
  CommandResult res = run_command("node " + js + "/lora_client_test.mjs " + lora_server().url() + " " + expect, true, 240);
  std::printf("%s", res.output.c_str());
  EXPECT_EQ(res.exit_code, 0) << res.output;
  EXPECT_EQ(res.output.find("FAIL"), std::string::npos) << res.output;
  EXPECT_NE(res.output.find("ok   adapters are listed as models"), std::string::npos) << res.output;
}

}  // namespace
}  // namespace ll3::test
