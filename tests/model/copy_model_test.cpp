// The hand-built copying model (model/copy_model.h) at a small shape: its greedy continuation of
// random tokens X followed by X's first tokens is the rest of X, in F16 and after Q4_K_M; shapes
// that cannot hold the construction are refused with the reason.
#include "model/copy_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <string>

#include "eval/sequence_evaluator.h"
#include "io/gguf.h"
#include "quant/quantize.h"
#include "test_support.h"
#include "tokenizer/vocab.h"

namespace ll3 {
namespace {

// 2 KV heads of 64 (the fewest that hold the construction: 3 layers of previous-token heads,
// then the induction heads), dim 512 so that Q4_K rows fit, a full-size vocabulary so that
// the tied output must single the copied token out of 128256.
ModelPreset small_copy_preset() {
  LlamaConfig c;
  c.dim = 512;
  c.n_layers = 4;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.head_dim = 64;
  c.ffn_dim = 256;
  c.tied_embeddings = true;
  c.context_length = 8192;
  c.rope_theta = 500000.0f;
  return {"copy-test", "copy model test shape", c, false};
}

// A made-up vocabulary (the model file needs token strings, not a real BPE); the Llama-3 size
// unless a test only compares bytes.
TokenizerVocab synthetic_vocab(int n = 128256) {
  TokenizerVocab v;
  for (int i = 0; i < n; ++i) {
    v.tokens.push_back("t" + std::to_string(i));
    v.token_types.push_back(kTokenNormal);
  }
  v.bos_id = 128000;
  v.eos_id = 128001;
  return v;
}

std::string write_model(uint64_t seed, int threads, int n_vocab = 128256) {
  static int n = 0;
  const std::string path = test::temp_dir() + "/copy" + std::to_string(n++) + ".gguf";
  MakeModelOptions opt;
  opt.type = DType::F16;
  opt.seed = seed;
  opt.threads = threads;
  Status s = write_copy_model(small_copy_preset(), synthetic_vocab(n_vocab), opt, path);
  EXPECT_TRUE(s.ok()) << s.message();
  return path;
}

// A model and one sequence on it.
struct Session {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<SequenceEvaluator> seq;
};

Session open(const std::string& path) {
  Session s;
  auto m = LlamaModel::load(path);
  EXPECT_TRUE(m.ok()) << m.message();
  if (!m.ok()) return s;
  s.model = std::move(*m);
  EvaluatorOptions o;
  o.threads = 2;
  o.context = 256;
  auto e = SequenceEvaluator::create(*s.model, o);
  EXPECT_TRUE(e.ok()) << e.message();
  if (e.ok()) s.seq = std::move(*e);
  return s;
}

// Greedy: `prompt`, then n tokens, each the argmax of the last logits.
std::vector<int32_t> greedy(SequenceEvaluator& s, const std::vector<int32_t>& prompt, int n) {
  s.truncate(0);
  std::vector<int32_t> out;
  Status st = s.eval(prompt);
  for (int i = 0; i < n && st.ok(); ++i) {
    const float* l = s.last_logits();
    const int32_t next = static_cast<int32_t>(std::max_element(l, l + s.n_vocab()) - l);
    out.push_back(next);
    st = s.eval({&next, 1});
  }
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

TEST(CopyModel, GreedyContinuationCopiesTheContext) {
  const std::string f16 = write_model(3, 2);
  const std::string q4 = test::temp_dir() + "/copy-q4_k_m.gguf";
  {
    auto in = GgufFile::open(f16);
    ASSERT_TRUE(in.ok()) << in.message();
    quant::QuantizeOptions qo;
    qo.threads = 2;
    auto r = quant::quantize_gguf(**in, q4, *quant::find_quant_mix("q4_k_m"), qo);
    ASSERT_TRUE(r.ok()) << r.message();
  }
  Session a = open(f16), b = open(q4);
  ASSERT_TRUE(a.seq && b.seq);
  std::mt19937 rng(11);
  for (int trial = 0; trial < 3; ++trial) {
    // X: 40 distinct ordinary tokens; the prompt is <bos> X X[0..5).
    std::vector<int32_t> x;
    std::set<int32_t> seen;
    while (x.size() < 40) {
      const int32_t t = static_cast<int32_t>(rng() % 128000);
      if (seen.insert(t).second) x.push_back(t);
    }
    std::vector<int32_t> prompt{128000};
    prompt.insert(prompt.end(), x.begin(), x.end());
    prompt.insert(prompt.end(), x.begin(), x.begin() + 5);
    const std::vector<int32_t> want(x.begin() + 5, x.end());
    EXPECT_EQ(greedy(*a.seq, prompt, 35), want) << "f16, trial " << trial;
    EXPECT_EQ(greedy(*b.seq, prompt, 35), want) << "q4_k_m, trial " << trial;
  }
}

TEST(CopyModel, SameSeedSameBytesAnyThreadCount) {
  const std::string a = test::read_file(write_model(5, 1, 4096));
  const std::string b = test::read_file(write_model(5, 3, 4096));
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(a == b);
}

TEST(CopyModel, RefusesShapesThatCannotHoldIt) {
  for (const ModelPreset& p : model_presets()) {  // the real sizes fit; tiny and small do not
    if (p.config.head_dim >= 64) EXPECT_TRUE(check_copy_shape(p.config).ok()) << p.name;
  }
  Status tiny = check_copy_shape(find_preset("tiny")->config);
  EXPECT_NE(tiny.message().find("head size 64"), std::string::npos) << tiny.message();
  LlamaConfig c = small_copy_preset().config;
  c.n_layers = 2;
  Status layers = check_copy_shape(c);
  EXPECT_NE(layers.message().find("needs 4 layers"), std::string::npos) << layers.message();
  c = small_copy_preset().config;
  c.dim = 256;
  c.n_heads = 4;
  Status dim = check_copy_shape(c);
  EXPECT_NE(dim.message().find("needs dim 416"), std::string::npos) << dim.message();
}

}  // namespace
}  // namespace ll3
