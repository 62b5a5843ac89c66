// ll3 perplexity end to end on the tiny model: flags, the final estimate, a saved base and KL
// of a Q8_0 copy (made with ll3 quantize) against it, and a base from another text rejected.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>

#include "test_support.h"

namespace ll3 {
namespace {

using test::run_command;

std::string ll3() { return test::ll3_binary(); }
std::string tiny() { return test::shared_dir() + "/models/tiny-llama3-f32.gguf"; }

// The number after `key` in `out`, or NaN.
double value_after(const std::string& out, const std::string& key) {
  size_t p = out.find(key);
  if (p == std::string::npos) return std::nan("");
  return std::strtod(out.c_str() + p + key.size(), nullptr);
}

std::string words(int n, uint32_t seed) {
  static const char* kWords[] = {"a", "quick", "brown", "fox", "jumps", "over", "lazy", "dogs", "while", "nine",
                                 "bright", "stars", "turn", "slowly", "above", "the", "harbour", "lights"};
  std::mt19937 rng(seed);
  std::string s;
  for (int i = 0; i < n; ++i) s += std::string(i ? " " : "") + kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
  return s;
}

TEST(PerplexityCli, HelpListsFlagsAndBadFlagsExit2) {
  auto h = run_command(ll3() + " perplexity --help", true);
  EXPECT_EQ(h.exit_code, 0);
  for (const char* f : {"--model", "--file", "--ctx", "--chunks", "--threads", "--save-logits", "--kl-base",
                        "--float-act", "--batch"}) {
    EXPECT_NE(h.output.find(f), std::string::npos) << f;
  }
  auto bad = run_command(ll3() + " perplexity --no-such-flag 2>&1", true);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--no-such-flag"), std::string::npos) << bad.output;
  EXPECT_EQ(run_command(ll3() + " perplexity -m x.gguf 2>&1").exit_code, 2);  // no -f
  EXPECT_EQ(run_command(ll3() + " perplexity -m x.gguf -f y --chunks 0 2>&1").exit_code, 2);
  EXPECT_EQ(run_command(ll3() + " perplexity -m x.gguf -f y --save-logits a --kl-base b 2>&1").exit_code, 2);
}

TEST(PerplexityCli, SaveBaseThenKlOfQ8Copy) {
  LL3_REQUIRE_SHARED();
  const std::string dir = test::temp_dir();
  test::write_file(dir + "/text.txt", words(140, 9));
  test::write_file(dir + "/other.txt", words(140, 10));
  const std::string common = " -f " + dir + "/text.txt --ctx 32 -t 2";

  auto base = run_command(ll3() + " perplexity -m " + tiny() + common + " --save-logits " + dir + "/base.bin", true);
  ASSERT_EQ(base.exit_code, 0) << base.output;
  const double ppl = value_after(base.output, "Final estimate: PPL = ");
  // Random weights, confidently wrong: a huge perplexity (~1e13 here), but a finite one.
  EXPECT_GT(ppl, 100.0) << base.output;
  EXPECT_LT(ppl, 1e20) << base.output;
  EXPECT_NE(base.output.find("chunk 1/"), std::string::npos) << "plain progress lines when not a terminal";

  auto q = run_command(ll3() + " quantize " + tiny() + " " + dir + "/q8.gguf q8_0 --threads 2", true);
  ASSERT_EQ(q.exit_code, 0) << q.output;
  auto kl = run_command(ll3() + " perplexity -m " + dir + "/q8.gguf" + common + " --kl-base " + dir + "/base.bin", true);
  ASSERT_EQ(kl.exit_code, 0) << kl.output;
  const double kld = value_after(kl.output, "Mean    KLD: ");
  const double same_top = value_after(kl.output, "Same top p: ");
  const double ppl_base = value_after(kl.output, "Mean PPL(base)                : ");
  EXPECT_GT(kld, 0.0) << kl.output;
  EXPECT_LT(kld, 0.1) << kl.output;
  EXPECT_GT(same_top, 80.0) << kl.output;
  // The base file clamps log-probabilities 16 nats below the best (llama.cpp's format), so the
  // base perplexity read back from it can only be lower than the base run's own.
  EXPECT_LE(ppl_base, ppl * (1 + 1e-4)) << kl.output;
  EXPECT_GT(ppl_base, 1.0) << kl.output;
  EXPECT_FALSE(std::isnan(value_after(kl.output, "99.0%   KLD: ")));
  EXPECT_FALSE(std::isnan(value_after(kl.output, "Maximum KLD: ")));
  EXPECT_FALSE(std::isnan(value_after(kl.output, "Median  KLD: ")));
  EXPECT_FALSE(std::isnan(value_after(kl.output, "Mean PPL(Q)-PPL(base)         : ")));

  // A coarser quantization moves further from the base.
  q = run_command(ll3() + " quantize " + tiny() + " " + dir + "/q4.gguf q4_0 --threads 2", true);
  ASSERT_EQ(q.exit_code, 0) << q.output;
  auto kl4 = run_command(ll3() + " perplexity -m " + dir + "/q4.gguf" + common + " --kl-base " + dir + "/base.bin", true);
  ASSERT_EQ(kl4.exit_code, 0) << kl4.output;
  EXPECT_GT(value_after(kl4.output, "Mean    KLD: "), 2 * kld) << kl4.output;

  auto other = run_command(
      ll3() + " perplexity -m " + tiny() + " -f " + dir + "/other.txt --ctx 32 -t 2 --kl-base " + dir + "/base.bin",
      true);
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.output.find("different text"), std::string::npos) << other.output;
  test::write_file(dir + "/junk.bin", "not a base file at all");
  auto junk = run_command(ll3() + " perplexity -m " + tiny() + common + " --kl-base " + dir + "/junk.bin", true);
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_NE(junk.output.find("not a log-probability file"), std::string::npos) << junk.output;
}

}  // namespace
}  // namespace ll3
