// A Hugging Face directory holding the same weights as a GGUF file gives the same logits.
// The directory is written from the GGUF by export_hf_directory, which undoes GGUF's Q/K row
// permutation, so this also checks that rotate-half RoPE on the HF layout matches adjacent-pair
// RoPE on the GGUF layout.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "eval/sequence_evaluator.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/hf_export.h"
#include "reference_llama.h"
#include "test_support.h"

namespace ll3 {
namespace {

std::vector<float> all_logits(const LlamaModel& m, const std::vector<int32_t>& tokens) {
  EvaluatorOptions o;
  o.kv_type = DType::F32;
  o.context = static_cast<int64_t>(tokens.size());
  o.batch = 64;
  auto s = SequenceEvaluator::create(m, o);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE((*s)->eval(tokens, true).ok());
  return (*s)->logits();
}

std::vector<int32_t> prompt_tokens() {
  std::ifstream f(test::shared_dir() + "/models/golden/tiny-llama3-f32/P3.json");
  return nlohmann::json::parse(f)["tokens"].get<std::vector<int32_t>>();
}

// rope_scaled: the file has Llama 3.1's rope factors, which both loaders must give.
void expect_same_logits(const std::string& gguf_path, const std::string& hf_dir, bool rope_scaled = false) {
  auto g = LlamaModel::load(gguf_path);
  ASSERT_TRUE(g.ok()) << g.message();
  auto h = LlamaModel::load(hf_dir);
  ASSERT_TRUE(h.ok()) << h.message();
  if (rope_scaled) ASSERT_FALSE((*g)->rope_factors.empty()) << gguf_path;
  EXPECT_TRUE((*h)->config.rope_half_pairs);
  EXPECT_EQ((*h)->config.tied_embeddings, (*g)->config.tied_embeddings);
  ASSERT_EQ((*h)->rope_factors.size(), (*g)->rope_factors.size());
  for (size_t i = 0; i < (*g)->rope_factors.size(); ++i) {
    EXPECT_NEAR((*h)->rope_factors[i], (*g)->rope_factors[i], 1e-5 * (*g)->rope_factors[i]) << i;
  }
  std::vector<int32_t> tokens = prompt_tokens();
  std::vector<float> a = all_logits(**g, tokens), b = all_logits(**h, tokens);
  ASSERT_EQ(a.size(), b.size());
  const int64_t V = (*g)->config.n_vocab;
  for (size_t p = 0; p < tokens.size(); ++p) {
    std::vector<double> ref(a.begin() + p * V, a.begin() + (p + 1) * V);
    EXPECT_LE(test::rel_l2(b.data() + p * V, ref.data(), V), 1e-5) << "position " << p;
  }
}

TEST(HfParity, TiedLlama32StyleModel) {
  LL3_REQUIRE_SHARED();
  const std::string gguf = test::shared_dir() + "/models/tiny-llama3-f32.gguf";
  auto f = GgufFile::open(gguf);
  ASSERT_TRUE(f.ok()) << f.message();
  for (int shards : {1, 3}) {
    std::string dir = test::temp_dir() + "/hf" + std::to_string(shards);
    Status st = export_hf_directory(**f, dir, shards, test::shared_dir() + "/tokenizers/llama3");
    ASSERT_TRUE(st.ok()) << st.message();
    expect_same_logits(gguf, dir);
  }
}

// An untied Llama 3.1 model with rope_freqs: the shared Q4_K_M file dequantized to F32 (the
// export keeps float types only), then exported; config.json gets rope_scaling.
TEST(HfParity, UntiedLlama31WithRopeScaling) {
  LL3_REQUIRE_SHARED();
  auto q = GgufFile::open(test::shared_dir() + "/models/small-llama31-q4_k_m.gguf");
  ASSERT_TRUE(q.ok()) << q.message();
  GgufWriter w;
  for (const auto& [key, v] : (*q)->metadata()) {
    if (key.rfind("llama.", 0) == 0 || key == "general.architecture" || key == "general.name") {
      if (v.type == GgufType::STRING) {
        w.set_string(key, v.str);
      } else if (v.is_float()) {
        w.set_f32(key, static_cast<float>(v.f));
      } else if (v.is_integer()) {
        w.set_u32(key, static_cast<uint32_t>(*v.as_int()));
      }
    }
  }
  std::vector<std::vector<float>> data;
  data.reserve((*q)->tensors().size());
  for (const GgufTensorInfo& t : (*q)->tensors()) {
    data.emplace_back(static_cast<size_t>(t.n_elements()));
    const TypeTraits* tr = type_traits_ref(t.type);
    ASSERT_NE(tr, nullptr) << t.name;
    tr->to_float(t.data, data.back().data(), t.n_elements());
    ASSERT_TRUE(w.add_tensor(t.name, DType::F32, std::vector<int64_t>(t.ne, t.ne + t.n_dims), data.back().data()).ok());
  }
  std::string dir = test::temp_dir();
  std::string gguf = dir + "/small-llama31-f32.gguf";
  ASSERT_TRUE(w.write(gguf).ok());
  auto f = GgufFile::open(gguf);
  ASSERT_TRUE(f.ok()) << f.message();
  Status st = export_hf_directory(**f, dir + "/hf", 2, test::shared_dir() + "/tokenizers/llama3");
  ASSERT_TRUE(st.ok()) << st.message();
  expect_same_logits(gguf, dir + "/hf", /*rope_scaled=*/true);
}

}  // namespace
}  // namespace ll3
