// POST /v1/embeddings on the main test server (the small Q4_K_M model): the response's shape,
// vectors against llama.cpp's references (tests/fixtures/embeddings), base64 that decodes to the
// float vectors, token-id inputs, usage, errors with their `param`, and the official OpenAI Node
// client (tests/server/js/embeddings_client_test.mjs). Plus the pure parts on their own.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>

#include "ll3/engine.h"

#include "server/embeddings.h"
#include "server_harness.h"
#include "test_support.h"

namespace ll3::test {
namespace {

#define REQUIRE_SERVER() \
  LL3_REQUIRE_SHARED();  \
  ASSERT_NE(main_server(), nullptr) << "ll3 serve did not start"

// The small model with an F32 KV cache, as the references were made: with F16 K and V,
// llama.cpp's attention also rounds Q and the softmax weights to F16, which ll3's does not
// (tests/engine/embedding_test.cpp). The main server (F16) is checked against an engine here.
ServeProcess* ref_server() {
  static std::unique_ptr<ServeProcess> p = [] {
    if (shared_dir().empty()) return std::unique_ptr<ServeProcess>();
    return std::make_unique<ServeProcess>(std::vector<std::string>{"-m", small_model_path(), "-t", "2", "--ctx", "4096",
                                                                   "--kv-type", "f32", "--api-key", kKey, "--no-access-log"});
  }();
  return p && p->ok() ? p.get() : nullptr;
}

#define REQUIRE_REF_SERVER() \
  LL3_REQUIRE_SHARED();      \
  ASSERT_NE(ref_server(), nullptr) << "ll3 serve (F32 KV) did not start"

std::string reference_path() { return source_dir() + "/tests/fixtures/embeddings/small-llama31-q4_k_m.json"; }
json reference() { return json::parse(read_file(reference_path())); }

std::vector<float> decode_base64_floats(const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    acc = (acc << 6) | static_cast<uint32_t>(val(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

void expect_error(const Reply& r, const std::string& param, const std::string& code = "") {
  EXPECT_EQ(r.status, 400) << r.body;
  const json j = r.body_json();
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  EXPECT_EQ(j["error"]["type"], "invalid_request_error") << r.body;
  EXPECT_EQ(j["error"]["param"], param) << r.body;
  if (!code.empty()) EXPECT_EQ(j["error"]["code"], code) << r.body;
}

TEST(ServerEmbeddings, ShapeUsageAndReferenceVectors) {
  REQUIRE_REF_SERVER();
  const json ref = reference();
  HttpClient c(ref_server()->port());
  c.set_key(kKey);
  json texts = json::array();
  int64_t tokens = 0;
  for (const json& k : ref["cases"]) {
    texts.push_back(k["text"]);
    tokens += static_cast<int64_t>(k["tokens"].size());
  }
  for (const char* pooling : {"mean", "last"}) {
    Reply r = post(c, "/v1/embeddings", {{"model", "whatever"}, {"input", texts}, {"pooling", pooling}});
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = r.body_json();
    EXPECT_EQ(j["object"], "list");
    EXPECT_TRUE(j["model"].is_string());
    EXPECT_EQ(j["usage"]["prompt_tokens"], tokens);
    EXPECT_EQ(j["usage"]["total_tokens"], tokens);
    ASSERT_EQ(j["data"].size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      const json& d = j["data"][i];
      EXPECT_EQ(d["object"], "embedding");
      EXPECT_EQ(d["index"], i);
      const std::vector<float> got = d["embedding"].get<std::vector<float>>();
      EXPECT_LE(max_abs_diff(got, ref["cases"][i][pooling].get<std::vector<float>>()), ref["cases"][i]["tolerance"].get<float>())
          << pooling << " " << i;
    }
  }
}

// The main server (F16 KV cache, other work beside) gives the vector an engine of the same
// model and cache type gives in this process, normalized: the same bits.
TEST(ServerEmbeddings, MainServerMatchesAnEngine) {
  REQUIRE_SERVER();
  const json ref = reference();
  const json& k = ref["cases"][3];
  HttpClient c = main_client();
  Reply r = post(c, "/v1/embeddings", {{"input", k["text"]}, {"pooling", "last"}});
  ASSERT_EQ(r.status, 200) << r.body;
  Request q;
  q.tokens = k["tokens"].get<std::vector<int32_t>>();
  q.pooling = Pooling::kLast;
  auto vec = std::make_shared<std::vector<float>>();
  auto done = std::make_shared<std::promise<void>>();
  q.on_embedding = [vec](const std::vector<float>& v) { *vec = v; };
  q.on_finish = [done](const FinishInfo&) { done->set_value(); };
  std::future<void> f = done->get_future();
  ASSERT_TRUE(reference_engine().submit(std::move(q)).ok());
  f.wait();
  ASSERT_EQ(vec->size(), 256u) << "the engine gave no vector";
  server::l2_normalize(vec.get());
  EXPECT_EQ(r.body_json()["data"][0]["embedding"].get<std::vector<float>>(), *vec);
}

TEST(ServerEmbeddings, Base64DecodesToTheFloats) {
  REQUIRE_SERVER();
  HttpClient c = main_client();
  const json body = {{"input", {"Hello world", "The quick brown fox jumps over the lazy dog."}}};
  Reply f = post(c, "/v1/embeddings", body);
  json b64_body = body;
  b64_body["encoding_format"] = "base64";
  Reply b = post(c, "/v1/embeddings", b64_body);
  ASSERT_EQ(f.status, 200) << f.body;
  ASSERT_EQ(b.status, 200) << b.body;
  const json bj = b.body_json();
  for (size_t i = 0; i < 2; ++i) {
    const json& e = bj["data"][i]["embedding"];
    ASSERT_TRUE(e.is_string()) << b.body;
    const std::vector<float> want = f.body_json()["data"][i]["embedding"].get<std::vector<float>>();
    const std::vector<float> got = decode_base64_floats(e.get<std::string>());
    ASSERT_EQ(got.size(), 256u);
    ASSERT_EQ(want.size(), got.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << i;
  }
}

TEST(ServerEmbeddings, TokenIdInputs) {
  REQUIRE_REF_SERVER();
  const json ref = reference();
  HttpClient c(ref_server()->port());
  c.set_key(kKey);
  const json& k0 = ref["cases"][0];
  const json& k1 = ref["cases"][1];
  // One array of ids, and an array of arrays: as given (the BOS is in them already).
  Reply one = post(c, "/v1/embeddings", {{"input", k0["tokens"]}, {"dimensions", 256}});
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(one.body_json()["usage"]["prompt_tokens"], k0["tokens"].size());
  EXPECT_LE(max_abs_diff(one.body_json()["data"][0]["embedding"].get<std::vector<float>>(), k0["mean"].get<std::vector<float>>()), 1e-4f);
  Reply many = post(c, "/v1/embeddings", {{"input", {k0["tokens"], k1["tokens"]}}, {"pooling", "last"}});
  ASSERT_EQ(many.status, 200) << many.body;
  ASSERT_EQ(many.body_json()["data"].size(), 2u);
  EXPECT_LE(max_abs_diff(many.body_json()["data"][1]["embedding"].get<std::vector<float>>(), k1["last"].get<std::vector<float>>()), 1e-4f);
}

TEST(ServerEmbeddings, ErrorsNameTheParam) {
  REQUIRE_SERVER();
  HttpClient c = main_client();
  expect_error(post(c, "/v1/embeddings", {{"model", "m"}}), "input");
  expect_error(post(c, "/v1/embeddings", {{"input", ""}}), "input");
  expect_error(post(c, "/v1/embeddings", {{"input", json::array()}}), "input");
  expect_error(post(c, "/v1/embeddings", {{"input", {"a", ""}}}), "input[1]");
  expect_error(post(c, "/v1/embeddings", {{"input", {"a", 5}}}), "input[1]");
  expect_error(post(c, "/v1/embeddings", {{"input", {{1, 2}, json::array()}}}), "input[1]");
  expect_error(post(c, "/v1/embeddings", {{"input", {1, 999999999}}}), "input[1]");
  expect_error(post(c, "/v1/embeddings", {{"input", 7}}), "input");
  expect_error(post(c, "/v1/embeddings", {{"input", "a"}, {"dimensions", 128}}), "dimensions");
  expect_error(post(c, "/v1/embeddings", {{"input", "a"}, {"encoding_format", "int8"}}), "encoding_format");
  expect_error(post(c, "/v1/embeddings", {{"input", "a"}, {"pooling", "cls"}}), "pooling");
  expect_error(post(c, "/v1/embeddings", {{"input", "a"}, {"model", 3}}), "model");
  // Longer than the context (4096): refused up front, with the numbers.
  std::vector<int32_t> ids(4097, 1000);
  Reply r = post(c, "/v1/embeddings", {{"input", json::array({json(ids)})}});
  expect_error(r, "input", "context_length_exceeded");
  const std::string msg = r.body_json()["error"]["message"].get<std::string>();
  EXPECT_NE(msg.find("4097"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4096"), std::string::npos) << msg;
  r = post(c, "/v1/embeddings", {{"input", json::array({json(std::vector<int32_t>{1, 2}), json(ids)})}});
  expect_error(r, "input[1]", "context_length_exceeded");
  // The method and the key are checked like any route's.
  EXPECT_EQ(c.request("GET", "/v1/embeddings").status, 405);
  HttpClient anon(main_server()->port());
  EXPECT_EQ(post(anon, "/v1/embeddings", {{"input", "a"}}).status, 401);
}

TEST(ServerEmbeddings, CountedInMetrics) {
  REQUIRE_SERVER();
  HttpClient c = main_client();
  const double before = metric(c.request("GET", "/metrics").body, "ll3_embedding_inputs_total");
  ASSERT_FALSE(std::isnan(before));
  ASSERT_EQ(post(c, "/v1/embeddings", {{"input", {"a", "b", "c"}}}).status, 200);
  const std::string m = c.request("GET", "/metrics").body;
  EXPECT_EQ(metric(m, "ll3_embedding_inputs_total"), before + 3);
  EXPECT_GE(metric(m, "ll3_embedding_requests_total"), 1);
}

TEST(ServerEmbeddingsNode, OfficialClient) {
  REQUIRE_REF_SERVER();
  const std::string js = source_dir() + "/tests/server/js";
  if (run_command("command -v node").exit_code != 0 || !std::filesystem::exists(js + "/node_modules/openai/package.json")) {
    if (in_ci()) FAIL() << "node or the openai package is missing (scripts/setup.sh runs npm ci in tests/server/js)";
    GTEST_SKIP() << "node or tests/server/js/node_modules is missing; run: (cd tests/server/js && npm ci)";
  }
  CommandResult res =
      run_command("node " + js + "/embeddings_client_test.mjs " + ref_server()->url() + " " + kKey + " " + reference_path(), true);
  std::printf("%s", res.output.c_str());
  EXPECT_EQ(res.exit_code, 0) << res.output;
  EXPECT_EQ(res.output.find("FAIL"), std::string::npos) << res.output;
  EXPECT_NE(res.output.find("ok   embeddings.create default"), std::string::npos) << res.output;
}

// The pure parts, without a server.
TEST(EmbeddingsJson, Base64IsLittleEndianFloat32) {
  EXPECT_EQ(server::base64_floats({1.0f}), "AACAPw==");  // 00 00 80 3f
  EXPECT_EQ(server::base64_floats({}), "");
  const std::vector<float> v = {0.5f, -2.25f, 3.0e-7f, 1e30f, -0.0f};
  EXPECT_EQ(decode_base64_floats(server::base64_floats(v)), v);
}

TEST(EmbeddingsJson, ParseDefaultsAndNormalize) {
  server::ModelInfo mi;
  mi.n_vocab = 100;
  server::EmbeddingRequest r;
  ASSERT_TRUE(server::parse_embedding_request(R"({"input":"hi"})", mi, 8, Pooling::kLast, &r).ok());
  EXPECT_EQ(r.pooling, Pooling::kLast);  // the server's default
  EXPECT_FALSE(r.base64);
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].text, "hi");
  ASSERT_TRUE(server::parse_embedding_request(R"({"input":[[1,2],[3]],"pooling":"mean","encoding_format":"base64","dimensions":8})",
                                              mi, 8, Pooling::kLast, &r)
                  .ok());
  EXPECT_EQ(r.pooling, Pooling::kMean);
  EXPECT_TRUE(r.base64);
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[1].tokens, std::vector<int32_t>{3});
  EXPECT_EQ(server::parse_embedding_request(R"({"input":[100]})", mi, 8, Pooling::kMean, &r).param, "input[0]");
  EXPECT_EQ(server::parse_embedding_request("[1]", mi, 8, Pooling::kMean, &r).status, 400);
  EXPECT_EQ(server::parse_embedding_request("{", mi, 8, Pooling::kMean, &r).status, 400);
  std::vector<float> v = {3, 4};
  server::l2_normalize(&v);
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], 0.8f);
  std::vector<float> z = {0, 0};
  server::l2_normalize(&z);
  EXPECT_EQ(z, std::vector<float>({0, 0}));
}

}  // namespace
}  // namespace ll3::test
