// A model read into huge pages computes exactly what the memory-mapped one computes (same
// bytes, same kernels); a 20-token prompt covers the decode and the AMX prompt paths.
#include <gtest/gtest.h>

#include <algorithm>

#include "eval/sequence_evaluator.h"
#include "reference_llama.h"
#include "test_support.h"

namespace ll3 {
namespace {

std::vector<float> logits_of(const std::string& path, WeightMemory mode, bool* copied) {
  LoadOptions lo;
  lo.weights = mode;
  auto m = LlamaModel::load(path, lo);
  EXPECT_TRUE(m.ok()) << m.message();
  if (!m.ok()) return {};
  *copied = (*m)->weights_copied();
  EvaluatorOptions so;
  so.context = 64;
  auto s = SequenceEvaluator::create(**m, so);
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<int32_t> tokens = {128000, 791, 6864, 315, 9822, 374, 12366, 13, 578, 6864, 315, 9822, 374, 1101,
                                 279, 1888, 3363, 304, 279, 1917};
  EXPECT_TRUE((*s)->eval(tokens, true).ok());
  return (*s)->logits();
}

TEST(WeightMemory, HugePageCopyGivesIdenticalLogits) {
  LL3_REQUIRE_SHARED();
  const std::string path = test::shared_dir() + "/models/small-llama32-mixed.gguf";
  bool copied_map = true, copied_huge = false;
  std::vector<float> a = logits_of(path, WeightMemory::kMap, &copied_map);
  std::vector<float> b = logits_of(path, WeightMemory::kHugePages, &copied_huge);
  EXPECT_FALSE(copied_map);
  EXPECT_TRUE(copied_huge);
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(a, b);
}

// Prompt logits, then the logits after each of `steps` greedy decode steps, and the tokens.
struct Decoded {
  std::vector<float> logits;  // (steps + 1, n_vocab)
  std::vector<int32_t> tokens;
  int panel_matrices = -1;
};

Decoded decode(const std::string& path, bool panels, int steps) {
  Decoded d;
  LoadOptions lo;
  lo.weights = WeightMemory::kHugePages;
  lo.decode_panels = panels;
  auto m = LlamaModel::load(path, lo);
  EXPECT_TRUE(m.ok()) << m.message();
  if (!m.ok()) return d;
  d.panel_matrices = (*m)->panel_matrices();
  EvaluatorOptions so;
  so.context = 64;
  auto s = SequenceEvaluator::create(**m, so);
  EXPECT_TRUE(s.ok()) << s.message();
  const std::vector<int32_t> prompt = {128000, 791, 6864, 315, 9822, 374, 12366, 13, 578, 6864, 315, 9822, 374, 1101,
                                       279, 1888, 3363, 304, 279, 1917};
  EXPECT_TRUE((*s)->eval(prompt).ok());
  for (int step = 0;; ++step) {
    const float* l = (*s)->last_logits();
    d.logits.insert(d.logits.end(), l, l + (*s)->n_vocab());
    if (step == steps) break;
    const int32_t next = static_cast<int32_t>(std::max_element(l, l + (*s)->n_vocab()) - l);
    d.tokens.push_back(next);
    EXPECT_TRUE((*s)->eval({&next, 1}).ok());
  }
  return d;
}

// Decode panels (LoadOptions::decode_panels): the prompt paths read the rows back exactly, so
// the prompt's logits are identical; decoding runs the panel kernels, which sum in another
// order, so its logits agree to float rounding and the greedy tokens are the same. (The mixed
// model, random weights of 13 types, amplifies rounding after a few steps: one step there.)
TEST(WeightMemory, DecodePanelsMatchTheRowLayout) {
  LL3_REQUIRE_SHARED();
  if (type_traits(DType::Q8_0)->dot_q_panels == nullptr) GTEST_SKIP() << "no panel kernels on this CPU";
  for (const auto& [file, steps] : {std::pair{"small-llama31-q4_k_m.gguf", 8}, std::pair{"small-llama32-mixed.gguf", 1}}) {
    const std::string path = test::shared_dir() + "/models/" + file;
    const Decoded rows = decode(path, false, steps), panels = decode(path, true, steps);
    EXPECT_EQ(rows.panel_matrices, 0) << file;
    EXPECT_GT(panels.panel_matrices, 0) << file;
    ASSERT_EQ(rows.logits.size(), panels.logits.size()) << file;
    const size_t V = rows.logits.size() / static_cast<size_t>(steps + 1);
    EXPECT_TRUE(std::equal(rows.logits.begin(), rows.logits.begin() + V, panels.logits.begin())) << file;
    const std::vector<double> ref(rows.logits.begin(), rows.logits.end());
    EXPECT_LE(test::rel_l2(panels.logits.data(), ref.data(), static_cast<int64_t>(ref.size())), 1e-5) << file;
    EXPECT_EQ(rows.tokens, panels.tokens) << file;
  }
}

}  // namespace
}  // namespace ll3
