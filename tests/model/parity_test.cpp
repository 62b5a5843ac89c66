// Parity with llama.cpp's logits (../shared/models/golden) and with an independent naive
// reference on prompts no golden file covers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/sampler.h"
#include "eval/sequence_evaluator.h"
#include "reference_llama.h"
#include "test_support.h"

namespace ll3 {
namespace {

using test::rel_l2;

std::unique_ptr<LlamaModel> load(const std::string& name) {
  auto m = LlamaModel::load(test::shared_dir() + "/models/" + name);
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? std::move(m.value()) : nullptr;
}

nlohmann::json golden(const std::string& model, const std::string& prompt) {
  std::ifstream f(test::shared_dir() + "/models/golden/" + model + "/" + prompt + ".json");
  return nlohmann::json::parse(f);
}

std::unique_ptr<SequenceEvaluator> make_session(const LlamaModel& m, DType kv, int64_t ctx, int64_t batch = 256,
                                      bool int8_activations = true) {
  EvaluatorOptions o;
  o.int8_activations = int8_activations;
  o.kv_type = kv;
  o.context = ctx;
  o.batch = batch;
  auto s = SequenceEvaluator::create(m, o);
  EXPECT_TRUE(s.ok()) << s.message();
  return std::move(s.value());
}

// Relative L2 between our logits and the reference's at the reference's top-K ids.
double topk_rel_l2(const float* ours, const nlohmann::json& ids, const nlohmann::json& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    double r = ref[i].get<double>(), o = ours[ids[i].get<int64_t>()];
    num += (o - r) * (o - r);
    den += r * r;
  }
  return std::sqrt(num / den);
}

double logsumexp(const float* row, int64_t n) {
  double mx = *std::max_element(row, row + n), s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(row[i] - mx);
  return mx + std::log(s);
}

class GoldenF32 : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenF32, EveryPositionAndGreedyMatchLlamaCpp) {
  LL3_REQUIRE_SHARED();
  const std::string model = "tiny-llama3-f32";
  auto m = load(model + ".gguf");
  ASSERT_TRUE(m);
  nlohmann::json g = golden(model, GetParam());
  std::vector<int32_t> tokens = g["tokens"].get<std::vector<int32_t>>();
  const int64_t V = m->config.n_vocab, n = static_cast<int64_t>(tokens.size());
  auto s = make_session(*m, DType::F32, n + 32, 64);  // batch 64: P3 spans several steps
  ASSERT_TRUE(s->eval(tokens, /*all_logits=*/true).ok());
  const std::vector<float> all = s->logits();
  for (int64_t p = 0; p < n; ++p) {
    const float* row = all.data() + p * V;
    EXPECT_LE(topk_rel_l2(row, g["topk_ids"][p], g["topk_logits"][p]), 1e-4) << "position " << p;
    EXPECT_NEAR(logsumexp(row, V), g["logsumexp"][p].get<double>(), 1e-3) << "position " << p;
    EXPECT_EQ(argmax(row, static_cast<int32_t>(V)), g["topk_ids"][p][0].get<int32_t>()) << "position " << p;
  }
  // The full last row.
  test::Npy last = test::read_npy(test::shared_dir() + "/models/golden/" + model + "/" + GetParam() + ".last.npy");
  ASSERT_EQ(static_cast<int64_t>(last.data.size()), V);
  std::vector<double> ref(last.data.begin(), last.data.end());
  EXPECT_LE(rel_l2(all.data() + (n - 1) * V, ref.data(), V), 1e-4);

  // 32 greedy tokens, one at a time.
  std::vector<int32_t> greedy;
  int32_t next = argmax(all.data() + (n - 1) * V, static_cast<int32_t>(V));
  for (int i = 0; i < 32; ++i) {
    greedy.push_back(next);
    ASSERT_TRUE(s->eval(std::span<const int32_t>(&next, 1)).ok());
    next = argmax(s->last_logits(), static_cast<int32_t>(V));
  }
  EXPECT_EQ(greedy, g["greedy"].get<std::vector<int32_t>>());
}

INSTANTIATE_TEST_SUITE_P(Prompts, GoldenF32, ::testing::Values("P1", "P2", "P3"));

// Quantized files against the matching llama.cpp reference: with 8-bit activations (integer
// dot products) against llama.cpp as it runs the file, with float activations against its run
// on the dequantized weights. Every position within 2e-3 and the same top-1 wherever the
// reference's margin is >= 0.1.
struct QuantCase {
  const char* model;
  const char* prompt;
  bool int8;
  // Positions checked (0: all, and the full last row): see the P3 case below.
  int64_t positions = 0;
};
class GoldenQuant : public ::testing::TestWithParam<QuantCase> {};

TEST_P(GoldenQuant, EveryPositionMatchesFloatActivationReference) {
  LL3_REQUIRE_SHARED();
  const std::string model = GetParam().model, prompt = GetParam().prompt;
  auto m = load(model + ".gguf");
  ASSERT_TRUE(m);
  const std::string ref_dir = model + (GetParam().int8 ? "" : ".f32act");
  nlohmann::json g = golden(ref_dir, prompt);
  std::vector<int32_t> tokens = g["tokens"].get<std::vector<int32_t>>();
  const int64_t V = m->config.n_vocab, n = static_cast<int64_t>(tokens.size());
  auto s = make_session(*m, DType::F32, n, 256, GetParam().int8);
  ASSERT_TRUE(s->eval(tokens, true).ok());
  const std::vector<float>& all = s->logits();
  int64_t decisive = 0;
  const int64_t checked = GetParam().positions > 0 ? GetParam().positions : n;
  for (int64_t p = 0; p < checked; ++p) {
    const float* row = all.data() + p * V;
    EXPECT_LE(topk_rel_l2(row, g["topk_ids"][p], g["topk_logits"][p]), 2e-3) << "position " << p;
    EXPECT_NEAR(logsumexp(row, V), g["logsumexp"][p].get<double>(), 2e-2) << "position " << p;
    if (g["topk_logits"][p][0].get<double>() - g["topk_logits"][p][1].get<double>() >= 0.1) {
      EXPECT_EQ(argmax(row, static_cast<int32_t>(V)), g["topk_ids"][p][0].get<int32_t>()) << "position " << p;
      ++decisive;
    }
  }
  // In every golden file here at least 10 of 11 (P1), 26 of 29 (P2) and 179 of 194 (P3)
  // positions have a margin of at least 0.1.
  EXPECT_GE(decisive, checked / 2) << "too few decisive positions: the top-1 check compared almost nothing";
  if (checked < n) return;
  test::Npy last = test::read_npy(test::shared_dir() + "/models/golden/" + ref_dir + "/" + prompt + ".last.npy");
  std::vector<double> ref(last.data.begin(), last.data.end());
  EXPECT_LE(rel_l2(all.data() + (n - 1) * V, ref.data(), V), 2e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Files, GoldenQuant,
    // 8-bit activations: P1 and P2 of the Q4_K_M file match llama.cpp's native run to 1.5e-7.
    // P3 matches up to position 96; from 97 on one quantization step rounds the other way. The
    // build that made the golden files (a September 2026 llama.cpp, AVX-512 kernels) reproduces
    // them bit for bit, and the same build's AVX2 kernels miss P3 from position 97 as ll3 does,
    // and the mixed file's P2 / P3 by 1.2-1.3e-2: the references hold that build's float order of
    // several ops (measured op by op: docs/DESIGN.md, "Which build made the golden files").
    // Every reference is met in float-activation mode (.f32act) to ~1e-6.
    ::testing::Values(QuantCase{"small-llama31-q4_k_m", "P1", true}, QuantCase{"small-llama31-q4_k_m", "P2", true},
                      QuantCase{"small-llama31-q4_k_m", "P3", true, 97},
                      QuantCase{"small-llama31-q4_k_m", "P1", false}, QuantCase{"small-llama31-q4_k_m", "P2", false},
                      QuantCase{"small-llama31-q4_k_m", "P3", false}, QuantCase{"small-llama32-mixed", "P1", false},
                      QuantCase{"small-llama32-mixed", "P2", false}, QuantCase{"small-llama32-mixed", "P3", false}),
    [](const ::testing::TestParamInfo<QuantCase>& i) {
      std::string n = std::string(i.param.model) + "_" + i.param.prompt + (i.param.int8 ? "_int8" : "_f32act") +
                      (i.param.positions > 0 ? "_first" + std::to_string(i.param.positions) : "");
      for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return n;
    });

TEST(GoldenF16Kv, LastRowCloseAndSameTop1) {
  LL3_REQUIRE_SHARED();
  auto m = load("tiny-llama3-f32.gguf");
  ASSERT_TRUE(m);
  for (const char* p : {"P1", "P2", "P3"}) {
    nlohmann::json g = golden("tiny-llama3-f32", p);
    std::vector<int32_t> tokens = g["tokens"].get<std::vector<int32_t>>();
    auto s = make_session(*m, DType::F16, static_cast<int64_t>(tokens.size()));
    ASSERT_TRUE(s->eval(tokens).ok());
    test::Npy last = test::read_npy(test::shared_dir() + "/models/golden/tiny-llama3-f32/" + p + ".last.npy");
    std::vector<double> ref(last.data.begin(), last.data.end());
    EXPECT_LE(rel_l2(s->last_logits(), ref.data(), m->config.n_vocab), 2e-3) << p;
    EXPECT_EQ(argmax(s->last_logits(), m->config.n_vocab), g["greedy"][0].get<int32_t>()) << p;
  }
}

// The 8-bit KV cache (Q8_0) on the Q4_K_M file (head_dim 32: one block per head) against the F32
// cache, P3's first 62 tokens in one batch. Float activations: with 8-bit ones this random-weight
// file turns any rounding difference into flipped activation steps (an F16 cache is already
// 3.0e-2 from F32 here; docs/DESIGN.md, "One answer per model"), which would hide what the
// cache's own rounding does. Measured (AVX-512): relative L2 of the last row 1.64e-2, of the
// worst position 1.80e-2 (F16 cache: 7.0e-4, 7.9e-4); bound 4e-2 for every position. The top-1
// token agrees wherever the F32 cache's top two differ by at least 0.25 (logits of rms 6.5 move
// by ~0.1 rms: nearer pairs may swap, 0.035 and 0.09 apart did at positions 63 and 52), and in
// the last row (0.72 apart).
TEST(Q8_0Kv, LogitsCloseToF32KvAndSameTop1) {
  LL3_REQUIRE_SHARED();
  auto m = load("small-llama31-q4_k_m.gguf");
  ASSERT_TRUE(m);
  std::vector<int32_t> tokens = golden("small-llama31-q4_k_m", "P3")["tokens"].get<std::vector<int32_t>>();
  ASSERT_GE(tokens.size(), 62u);
  tokens.resize(62);
  const int64_t V = m->config.n_vocab, n = static_cast<int64_t>(tokens.size());
  auto logits = [&](DType kv) {
    auto s = make_session(*m, kv, n, 256, false);
    EXPECT_TRUE(s->eval(tokens, true).ok());
    return s->logits();  // (n, V)
  };
  const std::vector<float> f32 = logits(DType::F32), q8 = logits(DType::Q8_0);
  ASSERT_EQ(q8.size(), static_cast<size_t>(n * V));
  double worst = 0.0;
  for (int64_t p = 0; p < n; ++p) {
    const float* r = f32.data() + p * V;
    const float* x = q8.data() + p * V;
    const std::vector<double> ref(r, r + V);
    const double rel = rel_l2(x, ref.data(), V);
    worst = std::max(worst, rel);
    EXPECT_LE(rel, 4e-2) << "position " << p;
    std::vector<float> top(r, r + V);
    std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
    if (top[0] - top[1] >= 0.25f || p == n - 1) {
      EXPECT_EQ(argmax(x, static_cast<int32_t>(V)), argmax(r, static_cast<int32_t>(V)))
          << "position " << p << ", top-2 gap " << top[0] - top[1];
    }
  }
  EXPECT_GT(worst, 0.0);  // the Q8_0 cache is really in use
  RecordProperty("worst_rel_l2", std::to_string(worst));
}

TEST(Q8_0Kv, HeadDimNotAMultipleOf32IsAnError) {
  LL3_REQUIRE_SHARED();
  auto m = load("tiny-llama3-f32.gguf");  // head_dim 16
  ASSERT_TRUE(m);
  EvaluatorOptions o;
  o.kv_type = DType::Q8_0;
  o.context = 16;
  auto s = SequenceEvaluator::create(*m, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "KV cache type q8_0 needs a head dimension that is a multiple of 32 (blocks of 32 per "
                         "head); this model's is 16");
}

// Random prompts up to 1,000 tokens against the naive double-precision reference.
TEST(HeldOut, RandomPromptsMatchNaiveReference) {
  LL3_REQUIRE_SHARED();
  auto m = load("tiny-llama3-f32.gguf");
  ASSERT_TRUE(m);
  std::mt19937 rng(1234);
  for (int64_t len : {7, 300, 1000}) {
    std::vector<int32_t> tokens{128000};
    std::uniform_int_distribution<int32_t> id(0, 127999);
    while (static_cast<int64_t>(tokens.size()) < len) tokens.push_back(id(rng));
    std::vector<int64_t> positions;
    for (int64_t p = 0; p < len; p += std::max<int64_t>(1, len / 5)) positions.push_back(p);
    positions.push_back(len - 1);
    auto ref = test::reference_logits(*m, tokens, positions);
    auto s = make_session(*m, DType::F32, len, 128);
    ASSERT_TRUE(s->eval(tokens, true).ok());
    const int64_t V = m->config.n_vocab;
    for (size_t i = 0; i < positions.size(); ++i) {
      EXPECT_LE(rel_l2(s->logits().data() + positions[i] * V, ref[i].data(), V), 1e-4)
          << "length " << len << " position " << positions[i];
    }
  }
}

// Prompt in one pass == prompt token by token (the KV cache and positions are consistent).
TEST(KvCache, IncrementalEqualsBatched) {
  LL3_REQUIRE_SHARED();
  auto m = load("tiny-llama3-f32.gguf");
  ASSERT_TRUE(m);
  std::mt19937 rng(99);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 50; ++i) tokens.push_back(static_cast<int32_t>(rng() % 128000));
  auto a = make_session(*m, DType::F32, 64);
  ASSERT_TRUE(a->eval(tokens).ok());
  auto b = make_session(*m, DType::F32, 64, 7);
  for (int32_t t : tokens) ASSERT_TRUE(b->eval(std::span<const int32_t>(&t, 1)).ok());
  const int64_t V = m->config.n_vocab;
  std::vector<double> ref(a->last_logits(), a->last_logits() + V);
  EXPECT_LE(rel_l2(b->last_logits(), ref.data(), V), 1e-5);
  // truncate + re-eval gives the same again.
  b->truncate(20);
  ASSERT_TRUE(b->eval(std::span<const int32_t>(tokens).subspan(20)).ok());
  EXPECT_LE(rel_l2(b->last_logits(), ref.data(), V), 1e-5);
}

TEST(KvCache, ContextFullIsAnError) {
  LL3_REQUIRE_SHARED();
  auto m = load("tiny-llama3-f32.gguf");
  ASSERT_TRUE(m);
  auto s = make_session(*m, DType::F16, 16);
  std::vector<int32_t> tokens(17, 100);
  Status st = s->eval(tokens);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "context full: 0 tokens in the cache + 17 new exceed the context of 16");
  EXPECT_EQ(s->n_past(), 0);
  std::vector<int32_t> bad{1, 999999};
  st = s->eval(bad);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "forward: token id 999999 is out of range (vocabulary of 128256)");
}

}  // namespace
}  // namespace ll3
