// Embedding requests (Request::pooling): the pooled final hidden state against llama.cpp's
// llama-embedding on the shared models (tests/fixtures/embeddings, made as its README says),
// the same bits whether a request runs alone or batched beside generations and other
// embeddings, generations untouched by them, and the combinations submit refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <chrono>
#include <future>
#include <thread>
#include <nlohmann/json.hpp>

#include "engine_fixtures.h"
#include "ll3/grammar.h"

namespace ll3 {
namespace {

struct RefCase {
  std::string text;
  std::vector<int32_t> tokens;
  float tolerance = 0;            // per component (see the README: where and why not 1e-4)
  std::vector<float> mean, last;  // L2-normalized
};

std::vector<RefCase> load_refs(const std::string& model) {
  const std::string path = test::source_dir() + "/tests/fixtures/embeddings/" + model + ".json";
  const nlohmann::json j = nlohmann::json::parse(test::read_file(path));
  std::vector<RefCase> out;
  for (const auto& c : j.at("cases")) {
    out.push_back({c.at("text").get<std::string>(), c.at("tokens").get<std::vector<int32_t>>(), c.at("tolerance").get<float>(),
                   c.at("mean").get<std::vector<float>>(), c.at("last").get<std::vector<float>>()});
  }
  return out;
}

std::vector<float> normalized(std::vector<float> v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  for (float& x : v) x = static_cast<float>(x / std::sqrt(s));
  return v;
}

Request embedding_request(std::vector<int32_t> tokens, Pooling pooling) {
  Request r;
  r.tokens = std::move(tokens);
  r.pooling = pooling;
  return r;
}

// An embedding request in flight: its vector and finish, once it ends.
struct Pending {
  std::shared_ptr<std::vector<float>> vec = std::make_shared<std::vector<float>>();
  std::shared_ptr<std::promise<FinishInfo>> done = std::make_shared<std::promise<FinishInfo>>();
  std::future<FinishInfo> fin = done->get_future();
};

Pending submit_embedding(Engine& e, Request r) {
  Pending p;
  r.on_embedding = [v = p.vec](const std::vector<float>& x) { *v = x; };
  r.on_finish = [d = p.done](const FinishInfo& f) { d->set_value(f); };
  Result<RequestId> id = e.submit(std::move(r));
  EXPECT_TRUE(id.ok()) << id.message();
  if (!id.ok()) p.done->set_value(FinishInfo{});
  return p;
}

std::vector<float> embed(Engine& e, Request r) {
  Pending p = submit_embedding(e, std::move(r));
  const FinishInfo f = p.fin.get();
  EXPECT_EQ(f.reason, FinishReason::kStop);
  EXPECT_EQ(f.completion_tokens, 0);
  return *p.vec;
}

std::unique_ptr<Engine> make_engine(std::shared_ptr<const Model> m, int64_t batch_tokens = 256, KvType kv = KvType::kF16) {
  EngineOptions o;
  o.threads = 2;
  o.ctx = 1024;
  o.batch_tokens = batch_tokens;
  o.kv_type = kv;
  Result<std::unique_ptr<Engine>> e = Engine::create(std::move(m), o);
  EXPECT_TRUE(e.ok()) << e.message();
  return e.ok() ? std::move(e.value()) : nullptr;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

class EmbeddingParity : public ::testing::TestWithParam<const char*> {};

// Each text's mean- and last-pooled vector, normalized, within 1e-4 of llama.cpp's, component
// by component (the engine tokenizes the text itself, BOS added, as llama-embedding does). Both
// with an F32 KV cache: with F16 K and V, llama.cpp's CPU attention also rounds Q and the
// softmax weights to F16 for its dot products, which ll3's does not, and these random-weight
// models amplify that to 1.5e-4 (F32 model) and 4e-3 (Q4_K_M) per component; with F32 both
// agree to the references' printed 7 decimals. The references come from llama.cpp's AVX2 build:
// its AVX-512 build differs from it by up to 2.3e-3 on the Q4_K_M file's paragraph, and ll3
// agrees with the AVX2 build to 1e-7 there. Except for the mixed file, whose products ll3 sums
// in another order than llama.cpp (docs/DESIGN.md, "One answer per model"): its cases carry a
// tolerance of 5e-3 (the README gives the measured differences).
TEST_P(EmbeddingParity, MatchesLlamaCpp) {
  LL3_REQUIRE_SHARED();
  const std::string name = GetParam();
  Result<std::shared_ptr<const Model>> m = Model::load(test::shared_dir() + "/models/" + name + ".gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  std::unique_ptr<Engine> e = make_engine(m.value(), 256, KvType::kF32);
  ASSERT_NE(e, nullptr);
  for (const RefCase& c : load_refs(name)) {
    ASSERT_EQ(m.value()->encode(c.text, true, true), c.tokens) << c.text;
    ASSERT_EQ(static_cast<int64_t>(c.mean.size()), m.value()->n_embd());
    for (Pooling p : {Pooling::kMean, Pooling::kLast}) {
      Request r;
      r.text = c.text;
      r.pooling = p;
      const std::vector<float> v = embed(*e, std::move(r));
      ASSERT_EQ(v.size(), c.mean.size());
      const std::vector<float>& ref = p == Pooling::kMean ? c.mean : c.last;
      EXPECT_LE(max_abs_diff(normalized(v), ref), c.tolerance) << name << " " << (p == Pooling::kMean ? "mean" : "last") << ": " << c.text;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EmbeddingParity,
                         ::testing::Values("tiny-llama3-f32", "small-llama31-q4_k_m", "small-llama32-mixed"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return s;
                         });

// A request's vector is the same bits alone and beside running generations and other
// embeddings (prompts chunked differently), and the generations' tokens are those they make
// alone.
TEST(EmbeddingEngine, BatchedEqualsAloneAndLeavesGenerationsAlone) {
  LL3_REQUIRE_ENGINE_MODEL();
  std::unique_ptr<Engine> e = make_engine(test::engine_model(), 48);
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> a = test::random_prompt(150, 1), b = test::random_prompt(37, 2), g = test::random_prompt(20, 3);
  const std::vector<float> mean_alone = embed(*e, embedding_request(a, Pooling::kMean));
  const std::vector<float> last_alone = embed(*e, embedding_request(a, Pooling::kLast));
  const std::vector<float> b_alone = embed(*e, embedding_request(b, Pooling::kMean));
  Result<Engine::Completion> gen_alone = e->generate(test::greedy(g, 24));
  ASSERT_TRUE(gen_alone.ok());

  // Generations first (decoding when the embeddings arrive), then the embeddings together.
  const int64_t generated_before = e->stats().generated_tokens;
  std::vector<std::future<Result<Engine::Completion>>> gens;
  for (int i = 0; i < 3; ++i) gens.push_back(std::async(std::launch::async, [&] { return e->generate(test::greedy(g, 24)); }));
  // Until all three decode (each has a token; none can have its 24 by then on a busy machine
  // either: the embeddings' prompts arrive within a step or two).
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       e->stats().generated_tokens < generated_before + 3 && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GE(e->stats().generated_tokens, generated_before + 3) << "the generations did not start within 60 s";
  Pending pb = submit_embedding(*e, embedding_request(b, Pooling::kMean));
  Pending pm = submit_embedding(*e, embedding_request(a, Pooling::kMean));
  Pending pl = submit_embedding(*e, embedding_request(a, Pooling::kLast));
  for (Pending* p : {&pb, &pm, &pl}) EXPECT_EQ(p->fin.get().reason, FinishReason::kStop);
  for (auto& f : gens) {
    Result<Engine::Completion> c = f.get();
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c.value().tokens, gen_alone.value().tokens);
  }
  const size_t n_embd = static_cast<size_t>(test::engine_model()->n_embd());
  ASSERT_EQ(mean_alone.size(), n_embd);
  ASSERT_EQ(last_alone.size(), n_embd);
  ASSERT_EQ(b_alone.size(), n_embd);
  ASSERT_EQ(pm.vec->size(), n_embd);
  ASSERT_EQ(pl.vec->size(), n_embd);
  ASSERT_EQ(pb.vec->size(), n_embd);
  EXPECT_EQ(std::memcmp(pm.vec->data(), mean_alone.data(), mean_alone.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(pl.vec->data(), last_alone.data(), last_alone.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(pb.vec->data(), b_alone.data(), b_alone.size() * sizeof(float)), 0);
  EXPECT_NE(mean_alone, last_alone);
}

// The prefix cache is not used for an embedding (a cached position has no hidden row): a
// prompt whose blocks are cached still gives the same vector, every token computed.
TEST(EmbeddingEngine, CachedPrefixIsRecomputed) {
  LL3_REQUIRE_ENGINE_MODEL();
  std::unique_ptr<Engine> e = make_engine(test::engine_model());
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> a = test::random_prompt(100, 4);
  const std::vector<float> first = embed(*e, embedding_request(a, Pooling::kMean));
  ASSERT_EQ(first.size(), static_cast<size_t>(test::engine_model()->n_embd()));
  ASSERT_TRUE(e->generate(test::greedy(a, 2)).ok());  // its blocks cached
  Pending p = submit_embedding(*e, embedding_request(a, Pooling::kMean));
  const FinishInfo f = p.fin.get();
  EXPECT_EQ(f.cached_tokens, 0);
  EXPECT_EQ(f.prompt_tokens, 100);
  EXPECT_EQ(*p.vec, first);
}

TEST(EmbeddingEngine, RefusesWhatItCannotDo) {
  LL3_REQUIRE_ENGINE_MODEL();
  std::unique_ptr<Engine> e = make_engine(test::engine_model());
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> t = test::random_prompt(10, 5);
  Request r = embedding_request(t, Pooling::kMean);
  r.grammar = Grammar::json_object();
  Result<RequestId> id = e->submit(r);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().field(), "grammar");
  r = embedding_request(t, Pooling::kLast);
  r.prompt_logprobs = 0;
  id = e->submit(r);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().field(), "prompt_logprobs");
  r = embedding_request(t, Pooling::kMean);
  r.session_id = "s";
  id = e->submit(r);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().field(), "session_id");
  // Longer than a sequence can hold (ctx 1024): refused with the numbers; exactly that fits.
  id = e->submit(embedding_request(test::random_prompt(1025, 6), Pooling::kMean));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kTooLong);
  EXPECT_NE(id.message().find("1025"), std::string::npos) << id.message();
  EXPECT_NE(id.message().find("1024"), std::string::npos) << id.message();
  EXPECT_EQ(embed(*e, embedding_request(test::random_prompt(1024, 6), Pooling::kLast)).size(),
            static_cast<size_t>(test::engine_model()->n_embd()));
  EXPECT_FALSE(e->submit(embedding_request({}, Pooling::kMean)).ok());
}

}  // namespace
}  // namespace ll3
