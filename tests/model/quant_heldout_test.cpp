// Quantized files and prompts no golden file covers: the engine against the naive
// double-precision reference forward pass (which dequantizes with the scalar reference kernels).
// Files: the two shared quantized models with random prompts, and new files made here by
// `ll3 make-model --preset small` + `ll3 quantize` in types of every family.
#include <gtest/gtest.h>

#include <random>

#include "eval/sequence_evaluator.h"
#include "reference_llama.h"
#include "test_support.h"

namespace ll3 {
namespace {

std::vector<int32_t> random_prompt(std::mt19937& rng, int64_t len) {
  std::vector<int32_t> t{128000};
  while (static_cast<int64_t>(t.size()) < len) t.push_back(static_cast<int32_t>(rng() % 128000));
  return t;
}

// Float activations: within 2e-3 of the reference (in practice ~1e-6). 8-bit activations: the
// same prediction wherever the reference is decisive (top-1 ahead of top-2 by at least 0.5), and
// close logits. *decisive counts the positions whose prediction was compared, so that the callers
// can require enough of them (the margin is the reference's: it does not depend on the CPU).
void check_against_reference(const std::string& path, int64_t len, uint32_t seed, int* decisive) {
  auto m = LlamaModel::load(path);
  ASSERT_TRUE(m.ok()) << m.message();
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens = random_prompt(rng, len);
  std::vector<int64_t> positions = {0, len / 3, len - 1};
  auto ref = test::reference_logits(**m, tokens, positions);
  const int64_t V = (*m)->config.n_vocab;
  for (bool int8 : {false, true}) {
    EvaluatorOptions o;
    o.kv_type = DType::F32;
    o.context = len;
    o.batch = 48;
    o.int8_activations = int8;
    auto s = SequenceEvaluator::create(**m, o);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_TRUE((*s)->eval(tokens, true).ok());
    for (size_t i = 0; i < positions.size(); ++i) {
      const float* row = (*s)->logits().data() + positions[i] * V;
      const double err = test::rel_l2(row, ref[i].data(), V);
      if (!int8) {
        EXPECT_LE(err, 2e-3) << path << " position " << positions[i];
        continue;
      }
      EXPECT_LE(err, 5e-2) << path << " position " << positions[i] << " (8-bit activations)";
      std::vector<double> sorted(ref[i]);
      std::nth_element(sorted.begin(), sorted.begin() + 1, sorted.end(), std::greater<>());
      const int64_t best = std::max_element(ref[i].begin(), ref[i].end()) - ref[i].begin();
      if (sorted[0] - sorted[1] >= 0.5) {
        EXPECT_EQ(std::max_element(row, row + V) - row, best) << path << " position " << positions[i];
        ++*decisive;
      }
    }
  }
}

TEST(QuantHeldOut, SharedFilesOnRandomPrompts) {
  LL3_REQUIRE_SHARED();
  int decisive = 0;
  check_against_reference(test::shared_dir() + "/models/small-llama31-q4_k_m.gguf", 150, 11, &decisive);
  check_against_reference(test::shared_dir() + "/models/small-llama32-mixed.gguf", 120, 12, &decisive);
  // Measured: all 6 positions (3 per file) have a margin of at least 0.5.
  EXPECT_GE(decisive, 3) << "too few decisive positions: the top-1 check compared almost nothing";
}

TEST(QuantHeldOut, FilesMadeByOurQuantizer) {
  LL3_REQUIRE_SHARED();  // make-model needs the Llama-3 tokenizer
  const std::string dir = test::temp_dir();
  const std::string base = dir + "/small-f32.gguf";
  auto mk = test::run_command(test::ll3_binary() + " make-model --preset small --type f32 --seed 5 --out " + base, true);
  ASSERT_EQ(mk.exit_code, 0) << mk.output;
  uint32_t seed = 20;
  int decisive = 0;
  for (const char* type : {"q8_0", "q5_1", "q4_1", "q3_k_m", "q2_k", "q5_k_m"}) {
    const std::string out = dir + "/small-" + type + ".gguf";
    auto q = test::run_command(test::ll3_binary() + " quantize " + base + " " + out + " " + type + " -t 2", true);
    ASSERT_EQ(q.exit_code, 0) << q.output;
    check_against_reference(out, 40, seed++, &decisive);
    std::remove(out.c_str());
  }
  // Measured: 11 of the 18 positions (3 per file, 6 files) have a margin of at least 0.5.
  EXPECT_GE(decisive, 6) << "too few decisive positions: the top-1 check compared almost nothing";
}

}  // namespace
}  // namespace ll3
