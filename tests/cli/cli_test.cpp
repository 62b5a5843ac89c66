// The ll3 binary as a user runs it: flags, exit codes, outputs.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/cpu_features.h"
#include "kernels/type_traits.h"
#include "test_support.h"

namespace ll3 {
namespace {

using test::run_command;

std::string ll3() { return test::ll3_binary(); }
std::string tiny() { return test::shared_dir() + "/models/tiny-llama3-f32.gguf"; }

nlohmann::json golden(const std::string& p) {
  std::ifstream f(test::shared_dir() + "/models/golden/tiny-llama3-f32/" + p + ".json");
  return nlohmann::json::parse(f);
}

std::string join(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

TEST(Cli, HelpListsCommandsAndFlags) {
  auto r = run_command(ll3() + " --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* c : {"run", "logits", "inspect", "make-model", "tokenize"}) {
    EXPECT_NE(r.output.find(std::string("  ") + c + " "), std::string::npos) << c;
  }
  auto h = run_command(ll3() + " logits --help");
  EXPECT_EQ(h.exit_code, 0);
  for (const char* f : {"--tokens", "--prompt", "--all", "--top", "--greedy", "--kv-type", "--out", "--json"}) {
    EXPECT_NE(h.output.find(f), std::string::npos) << f;
  }
  auto rh = run_command(ll3() + " run --help");
  EXPECT_EQ(rh.exit_code, 0);
  for (const char* f : {"--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--presence-penalty",
                        "--frequency-penalty", "--seed", "--stop", "--max-tokens", "--threads"}) {
    EXPECT_NE(rh.output.find(f), std::string::npos) << f;
  }
}

// Each `flags` after `base` is a usage error (exit 2) whose output holds `message`.
void expect_usage_errors(const std::string& base, const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& [flags, message] : cases) {
    auto r = run_command(base + flags, true);
    EXPECT_EQ(r.exit_code, 2) << flags << ": " << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << flags << ": " << r.output;
  }
}

// Out-of-range or non-finite sampling values are usage errors naming the flag (the engine's
// validate(SamplingParams), which the server shares), not silently odd sampling.
TEST(Cli, BadSamplingValuesAreUsageErrors) {
  LL3_REQUIRE_SHARED();
  const std::string base = ll3() + " run -m " + tiny() + " -p hi -q ";
  expect_usage_errors(base, {{"--temp nan", "--temp must be a finite number >= 0"},
                             {"--temp -1", "--temp must be a finite number >= 0"},
                             {"-n -5", "-n must be >= 0, or -1"},
                             {"--top-p 0", "--top-p must be in (0, 1]"},
                             {"--top-p inf", "--top-p must be in (0, 1]"},
                             {"--min-p 1.5", "--min-p must be in [0, 1]"},
                             {"--repeat-penalty 0", "--repeat-penalty must be a finite number > 0"},
                             {"--repeat-last-n -2", "--repeat-last-n must be >= -1"},
                             {"--presence-penalty 3", "--presence-penalty must be in [-2, 2]"},
                             {"--frequency-penalty nan", "--frequency-penalty must be in [-2, 2]"}});
  auto ok = run_command(base + "-n 2 --temp 0 --top-p 1 --min-p 0 --presence-penalty -2", true);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

// The GPU placement flags: bad values are usage errors; a GPU asked for (all, a split, or host
// weights) where none is usable is an error that says so, never a silent CPU run.
TEST(Cli, GpuPlacementFlagsAreChecked) {
  LL3_REQUIRE_SHARED();
  const std::string base = ll3() + " run -m " + tiny() + " -p hi -n 1 -q ";
  expect_usage_errors(base, {{"-ngl -2", "--gpu-layers must be -1 (all), 0 (none) or a layer count"},
                             {"--gpu-memory -1", "--gpu-memory must not be negative"},
                             {"--host-weights mapped", "--host-weights must be cpu or pinned"}});
  const std::string backends = run_command(ll3() + " --version").output;
  if (backends.find("cuda (") != std::string::npos && backends.find("no device") == std::string::npos) {
    GTEST_SKIP() << "a CUDA device is usable here: the GPU-less errors are not run";
  }
  for (const char* flags : {"-ngl 1", "-ngl 1 --host-weights pinned", "-ngl 99 --gpu-memory 1000000"}) {
    auto r = run_command(base + flags, true);
    EXPECT_NE(r.exit_code, 0) << flags << ": " << r.output;
    EXPECT_NE(r.output.find("--gpu-layers"), std::string::npos) << flags << ": " << r.output;
  }
  EXPECT_EQ(run_command(base + "-ngl 0 --host-weights pinned", true).exit_code, 0) << "no GPU asked for";
}

TEST(Cli, WrongFlagNamesItselfAndExits2) {
  auto r = run_command(ll3() + " run --bogus-flag 3", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown flag '--bogus-flag'"), std::string::npos) << r.output;
  auto v = run_command(ll3() + " logits -m x.gguf --tokens 1 --top abc", true);
  EXPECT_EQ(v.exit_code, 2);
  EXPECT_NE(v.output.find("--top: expected an integer, got 'abc'"), std::string::npos) << v.output;
  auto c = run_command(ll3() + " frobnicate", true);
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_NE(c.output.find("unknown command 'frobnicate'"), std::string::npos);
}

TEST(Cli, MissingModelIsAClearError) {
  auto r = run_command(ll3() + " logits -m /nonexistent.gguf --tokens 1,2", true);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent.gguf: cannot open: No such file or directory"), std::string::npos)
      << r.output;
}

TEST(Cli, WeightMemoryFlags) {
  auto both = run_command(ll3() + " logits -m /nonexistent.gguf --tokens 1,2 --mmap --no-mmap", true);
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.output.find("--mmap and --no-mmap exclude each other"), std::string::npos) << both.output;
  LL3_REQUIRE_SHARED();
  for (const char* flag : {"--mmap", "--no-mmap"}) {
    auto r = run_command(ll3() + " logits -m " + tiny() + " --tokens 1,2 " + flag, true);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(std::string(flag) == "--mmap" ? "MiB mmapped" : "MiB in huge pages"), std::string::npos)
        << r.output;
  }
  // The mixed model has Q4_K / Q8_0 matrices that take the decode panels, unless --row-layout.
  const std::string mixed = test::shared_dir() + "/models/small-llama32-mixed.gguf";
  auto panels = run_command(ll3() + " logits -m " + mixed + " --tokens 1,2 --no-mmap", true);
  auto rows = run_command(ll3() + " logits -m " + mixed + " --tokens 1,2 --no-mmap --row-layout", true);
  ASSERT_EQ(panels.exit_code, 0) << panels.output;
  ASSERT_EQ(rows.exit_code, 0) << rows.output;
  // Both ways: panels exactly where this CPU's table has panel kernels (AVX2 and up; not under
  // LL3_CPU=scalar), so neither branch can pass by not running.
  const bool has_panel_kernels = type_traits(DType::Q8_0)->dot_q_panels != nullptr;
  EXPECT_EQ(has_panel_kernels, cpu_features().has_avx2_set());
  EXPECT_EQ(panels.output.find("matrices in decode panels") != std::string::npos, has_panel_kernels) << panels.output;
  EXPECT_EQ(rows.output.find("decode panels"), std::string::npos) << rows.output;
}

// The AVX2 kernels end to end (LL3_CPU=avx2 caps the dispatch): decode panels and the panel
// transposes of the prompt path give the row layout's greedy tokens and logits.
TEST(Cli, Avx2DecodePanelsMatchTheRowLayout) {
  LL3_REQUIRE_SHARED();
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2";
  const std::string mixed = test::shared_dir() + "/models/small-llama32-mixed.gguf";
  const std::string cmd = "LL3_CPU=avx2 " + ll3() + " logits -m " + mixed +
                          " --tokens 128000,791,6864,315,9822,374 --all --json --top 3 --greedy 12 --no-mmap -t 2";
  auto panels = run_command(cmd);
  auto rows = run_command(cmd + " --row-layout");
  ASSERT_EQ(panels.exit_code, 0) << panels.output;
  ASSERT_EQ(rows.exit_code, 0) << rows.output;
  // The AVX2 table has panel kernels, so the first run did use them (else this compares the row
  // layout with itself).
  auto load = run_command(cmd + " 2>&1 >/dev/null");
  ASSERT_EQ(load.exit_code, 0) << load.output;
  EXPECT_NE(load.output.find("matrices in decode panels"), std::string::npos) << load.output;
  nlohmann::json p = nlohmann::json::parse(panels.output), r = nlohmann::json::parse(rows.output);
  ASSERT_EQ(p["greedy"].size(), 12u) << panels.output;
  ASSERT_EQ(p["positions"].size(), 6u) << panels.output;
  EXPECT_EQ(p["greedy"], r["greedy"]);
  ASSERT_EQ(p["positions"].size(), r["positions"].size());
  for (size_t i = 0; i < p["positions"].size(); ++i) {
    EXPECT_EQ(p["positions"][i]["top_ids"], r["positions"][i]["top_ids"]) << i;
    const double a = p["positions"][i]["top_logits"][0].get<double>(), b = r["positions"][i]["top_logits"][0].get<double>();
    EXPECT_NEAR(a, b, 1e-4 * (1 + std::fabs(b))) << i;
  }
}

TEST(Cli, LogitsJsonMatchesGolden) {
  LL3_REQUIRE_SHARED();
  nlohmann::json g = golden("P1");
  std::string tokens = join(g["tokens"].get<std::vector<int32_t>>());
  auto r = run_command(ll3() + " logits -m " + tiny() + " --tokens " + tokens +
                       " --kv-type f32 --all --json --top 5 --greedy 32 -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["tokens"], g["tokens"]);
  EXPECT_EQ(j["greedy"], g["greedy"]);
  ASSERT_EQ(j["positions"].size(), g["tokens"].size());
  for (size_t p = 0; p < j["positions"].size(); ++p) {
    const auto& pos = j["positions"][p];
    ASSERT_EQ(pos["top_ids"].size(), 5u);
    EXPECT_EQ(pos["top_ids"][0], g["topk_ids"][p][0]) << p;
    EXPECT_NEAR(pos["top_logits"][0].get<double>(), g["topk_logits"][p][0].get<double>(), 1e-3) << p;
    EXPECT_NEAR(pos["logsumexp"].get<double>(), g["logsumexp"][p].get<double>(), 1e-3) << p;
  }
}

TEST(Cli, LogitsNpyAndPromptTokenization) {
  LL3_REQUIRE_SHARED();
  nlohmann::json g = golden("P3");
  std::string out = test::temp_dir() + "/l.npy";
  // --prompt goes through the model's tokenizer (BOS added, specials not parsed, as P3 was made).
  std::string text = g["text"].get<std::string>();
  std::string file = test::temp_dir() + "/prompt.txt";
  test::write_file(file, text);
  auto r = run_command(ll3() + " logits -m " + tiny() + " --file " + file + " --kv-type f32 --all --out " +
                       out + " --json --top 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["tokens"], g["tokens"]);
  test::Npy npy = test::read_npy(out);
  ASSERT_EQ(npy.shape.size(), 2u);
  EXPECT_EQ(npy.shape[0], static_cast<int64_t>(g["tokens"].size()));
  EXPECT_EQ(npy.shape[1], 128256);
  test::Npy last = test::read_npy(test::shared_dir() + "/models/golden/tiny-llama3-f32/P3.last.npy");
  const float* ours = npy.data.data() + (npy.shape[0] - 1) * npy.shape[1];
  double num = 0, den = 0;
  for (size_t i = 0; i < last.data.size(); ++i) {
    num += (ours[i] - last.data[i]) * (ours[i] - last.data[i]);
    den += last.data[i] * last.data[i];
  }
  EXPECT_LE(std::sqrt(num / den), 1e-4);
}

TEST(Cli, RunIsReproducibleWithASeedAndStopsAtStopString) {
  LL3_REQUIRE_SHARED();
  std::string cmd = ll3() + " run -m " + tiny() + " -p 'Once upon a time' -n 24 --seed 7 --temp 0.9 -q";
  auto a = run_command(cmd), b = run_command(cmd);
  ASSERT_EQ(a.exit_code, 0);
  ASSERT_EQ(b.exit_code, 0);
  EXPECT_EQ(a.output, b.output);
  EXPECT_GT(a.output.size(), 10u);
  auto c = run_command(ll3() + " run -m " + tiny() + " -p 'Once upon a time' -n 24 --seed 8 --temp 0.9 -q");
  ASSERT_EQ(c.exit_code, 0);  // else the next line compares with a failed run's output
  EXPECT_GT(c.output.size(), 10u);
  EXPECT_NE(a.output, c.output);
  // Greedy output equals the greedy tokens of the parity interface (`logits --greedy`, the same
  // prompt, KV type and activations), decoded.
  auto g = run_command(ll3() + " run -m " + tiny() + " -p 'Once upon a time' -n 8 --temp 0 -q");
  ASSERT_EQ(g.exit_code, 0);
  auto parity = run_command(ll3() + " logits -m " + tiny() + " -p 'Once upon a time' --greedy 8 --json --top 1");
  ASSERT_EQ(parity.exit_code, 0) << parity.output;
  const std::vector<int32_t> parity_ids = nlohmann::json::parse(parity.output)["greedy"].get<std::vector<int32_t>>();
  ASSERT_EQ(parity_ids.size(), 8u);
  auto parity_text = run_command(ll3() + " detokenize -m " + tiny() + " --ids " + join(parity_ids));
  ASSERT_EQ(parity_text.exit_code, 0);
  EXPECT_EQ(g.output, parity_text.output + "\n");
  // Cut at a stop string taken from the middle of the greedy text: output is the text before it.
  std::string text = g.output.substr(0, g.output.size() - 1);  // trailing newline
  ASSERT_GT(text.size(), 6u);
  std::string stop = text.substr(text.size() / 2, 3);
  auto s = run_command(ll3() + " run -m " + tiny() + " -p 'Once upon a time' -n 8 --temp 0 -q --stop '" + stop + "'");
  ASSERT_EQ(s.exit_code, 0);
  EXPECT_EQ(s.output, text.substr(0, text.find(stop)) + "\n");
}

// `ll3 run --temp 0` writes exactly llama.cpp's 32 greedy tokens after P1 (F32 KV cache, as the
// golden file was made), decoded.
TEST(Cli, RunGreedyEqualsGoldenGreedyTokens) {
  LL3_REQUIRE_SHARED();
  nlohmann::json g = golden("P1");
  const std::vector<int32_t> want = g["greedy"].get<std::vector<int32_t>>();
  ASSERT_EQ(want.size(), 32u);
  std::string file = test::temp_dir() + "/p1.txt";
  test::write_file(file, g["text"].get<std::string>());  // BOS added, specials not parsed, as P1 was made
  auto r = run_command(ll3() + " run -m " + tiny() + " -f " + file + " -n 32 --temp 0 --kv-type f32 -t 2 -q");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto text = run_command(ll3() + " detokenize -m " + tiny() + " --ids " + join(want));
  ASSERT_EQ(text.exit_code, 0);
  ASSERT_FALSE(text.output.empty());
  EXPECT_EQ(r.output, text.output + "\n");
}

TEST(Cli, RunRejectsOverlongPrompt) {
  LL3_REQUIRE_SHARED();
  auto r = run_command(ll3() + " run -m " + tiny() + " -p 'one two three four five six seven eight nine ten' -c 4 -n 2",
                       true);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("the prompt has 11 tokens; a sequence holds at most 4"), std::string::npos) << r.output;
}

TEST(Cli, ChatUsesTemplateAndReusesThePrefix) {
  LL3_REQUIRE_SHARED();
  std::string err = test::temp_dir() + "/chat.err";
  std::string cmd = "printf 'Hello!\\nHow are you?\\n' | " + ll3() + " chat -m " + tiny() +
                    " --system 'Be brief.' -n 6 --seed 1 2>" + err;
  auto a = run_command(cmd);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  std::string stats = test::read_file(err);
  auto b = run_command(cmd);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(a.output, b.output);  // seeded: the same conversation
  EXPECT_GT(a.output.size(), 4u);
  // First turn: system + user rendered by the Llama-3 template = 20 tokens, nothing cached yet.
  size_t first = stats.find("[20 prompt tokens (0 reused), 6 generated");
  ASSERT_NE(first, std::string::npos) << stats;
  // Second turn: the first turn's tokens come from the KV cache.
  size_t second = stats.find("[", first + 1);
  ASSERT_NE(second, std::string::npos) << stats;
  EXPECT_EQ(stats.find("(0 reused)", second), std::string::npos) << stats;
  EXPECT_NE(stats.find("reused), 6 generated", second), std::string::npos) << stats;
}

TEST(Cli, BenchJsonHasLlamaBenchKeys) {
  LL3_REQUIRE_SHARED();
  std::string home = test::temp_dir();  // the roofline cache goes here, not in the real HOME
  auto r = run_command("HOME=" + home + " " + ll3() + " bench -m " + tiny() + " -p 16 -n 4 -r 2 -t 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["test"], "pp16");
  EXPECT_EQ(j[0]["n_prompt"], 16);
  EXPECT_EQ(j[0]["n_gen"], 0);
  EXPECT_EQ(j[1]["test"], "tg4");
  EXPECT_EQ(j[1]["n_prompt"], 0);
  EXPECT_EQ(j[1]["n_gen"], 4);
  for (const auto& t : j) {
    EXPECT_EQ(t["threads"], 2);
    EXPECT_GT(t["avg_ts"].get<double>(), 0.0);
    EXPECT_GE(t["stddev_ts"].get<double>(), 0.0);
    EXPECT_EQ(t["model_type"], "f32");
    EXPECT_GT(t["model_bytes"].get<int64_t>(), 30000000);
  }
  EXPECT_GT(j[1]["read_bandwidth_gbps"].get<double>(), 0.0);
  EXPECT_GT(j[1]["bandwidth_pct"].get<double>(), 0.0);
  EXPECT_EQ(j[1]["n_depth"], 0);
  // -d: the tests start with that many tokens in the cache, named as llama-bench does.
  auto deep = run_command("HOME=" + home + " " + ll3() + " bench -m " + tiny() + " -p 8 -n 4 -d 40 -r 1 -t 2 --json");
  ASSERT_EQ(deep.exit_code, 0) << deep.output;
  nlohmann::json d = nlohmann::json::parse(deep.output);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0]["test"], "pp8 @ d40");
  EXPECT_EQ(d[1]["test"], "tg4 @ d40");
  EXPECT_EQ(d[1]["n_depth"], 40);
  EXPECT_GT(d[1]["avg_ts"].get<double>(), 0.0);
  // Lists, as llama-bench takes them: every pp and tg size at every depth.
  auto lists = run_command("HOME=" + home + " " + ll3() + " bench -m " + tiny() + " -p 8,16 -n 2 -d 0,20 -r 1 -t 2 --json");
  ASSERT_EQ(lists.exit_code, 0) << lists.output;
  nlohmann::json l = nlohmann::json::parse(lists.output);
  ASSERT_EQ(l.size(), 6u) << lists.output;
  const char* names[] = {"pp8", "pp16", "tg2", "pp8 @ d20", "pp16 @ d20", "tg2 @ d20"};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(l[i]["test"], names[i]);
    EXPECT_EQ(l[i]["n_depth"], i < 3 ? 0 : 20);
    EXPECT_GT(l[i]["avg_ts"].get<double>(), 0.0);
  }
  EXPECT_EQ(l[1]["n_prompt"], 16);
  EXPECT_EQ(run_command(ll3() + " bench -m " + tiny() + " -p 8,x", true).exit_code, 2);
  EXPECT_EQ(run_command(ll3() + " bench -m " + tiny() + " -p 2000000000 -d 2000000000", true).exit_code, 2);
  // --roofline with a model: the bandwidth measured around each tg repetition and cached.
  const std::string cache = home + "/.cache/ll3/roofline-v2-t2.txt";
  std::remove(cache.c_str());
  auto paired = run_command("HOME=" + home + " " + ll3() + " bench -m " + tiny() + " -p 0 -n 4 -r 2 -t 2 --roofline --json");
  ASSERT_EQ(paired.exit_code, 0) << paired.output;
  nlohmann::json pj = nlohmann::json::parse(paired.output);
  ASSERT_EQ(pj.size(), 1u);
  EXPECT_GT(pj[0]["read_bandwidth_gbps"].get<double>(), 0.0);
  EXPECT_GT(pj[0]["bandwidth_pct"].get<double>(), 0.0);
  EXPECT_EQ(pj[0]["bandwidth_paired"], true);
  EXPECT_EQ(j[1]["bandwidth_paired"], false);
  // The roofline is the best of the reads of 6 patterns (2 layouts x 3 prefetch distances)
  // before the first repetition and after
  // each of the 2, with the spread beside it; the percentage is the median repetition against
  // that best read, and the paired one each repetition against the reads on either side of it
  // (never less: the reads beside one repetition are a subset of all).
  EXPECT_EQ(pj[0]["bandwidth_reads"], 18);
  EXPECT_GE(pj[0]["bandwidth_paired_pct"].get<double>(), pj[0]["bandwidth_pct"].get<double>());
  EXPECT_LE(pj[0]["read_bandwidth_min_gbps"].get<double>(), pj[0]["read_bandwidth_gbps"].get<double>());
  EXPECT_GT(pj[0]["read_bandwidth_min_gbps"].get<double>(), 0.0);
  // and the median of those reads between the two (decode on a host whose reads swing is
  // best compared with it as well).
  EXPECT_LE(pj[0]["read_bandwidth_min_gbps"].get<double>(), pj[0]["read_bandwidth_median_gbps"].get<double>());
  EXPECT_LE(pj[0]["read_bandwidth_median_gbps"].get<double>(), pj[0]["read_bandwidth_gbps"].get<double>());
  EXPECT_TRUE(std::filesystem::exists(cache)) << "the measured bandwidth is cached";
  // Alone, --roofline prints the best read with its median and minimum.
  auto alone = run_command("HOME=" + home + " " + ll3() + " bench --roofline -t 2 --json");
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  nlohmann::json aj = nlohmann::json::parse(alone.output);
  EXPECT_EQ(aj[0]["reads"], 24);
  EXPECT_LE(aj[0]["read_gbps_min"].get<double>(), aj[0]["read_gbps_median"].get<double>());
  EXPECT_LE(aj[0]["read_gbps_median"].get<double>(), aj[0]["read_gbps"].get<double>());
  auto bad = run_command(ll3() + " bench -m " + tiny() + " -r 0", true);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(run_command(ll3() + " bench -m " + tiny() + " -d -1", true).exit_code, 2);
}

// Several -m models in one run: every test on each, their repetitions in rounds, each row with
// its speed against the first model's (the median of the rounds' ratios).
TEST(Cli, BenchComparesModelsInOneRun) {
  LL3_REQUIRE_SHARED();
  std::string home = test::temp_dir();
  const std::string mixed = test::shared_dir() + "/models/small-llama32-mixed.gguf";
  auto r = run_command("HOME=" + home + " " + ll3() + " bench -m " + tiny() + " -m " + mixed +
                       " -p 8 -n 2 -r 3 -t 2 --roofline --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j.size(), 4u) << r.output;
  const char* tests[] = {"pp8", "pp8", "tg2", "tg2"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(j[i]["test"], tests[i]);
    EXPECT_EQ(j[i]["model_type"].get<std::string>(), i % 2 == 0 ? "f32" : "q8_0") << i;  // file_type 7
    EXPECT_GT(j[i]["avg_ts"].get<double>(), 0.0);
    if (i % 2 == 0) {
      EXPECT_EQ(j[i]["ratio_to_first"].get<double>(), 1.0);
    } else {
      EXPECT_GT(j[i]["ratio_to_first"].get<double>(), 0.0);
    }
  }
  // A read before the first repetition and after each of the 2 x 3, 6 patterns each.
  EXPECT_EQ(j[3]["bandwidth_reads"], 42);
  EXPECT_GE(j[3]["bandwidth_paired_pct"].get<double>(), j[3]["bandwidth_pct"].get<double>());
  // One model: no ratio.
  auto one = run_command("HOME=" + home + " " + ll3() + " bench -m " + tiny() + " -p 8 -n 0 -r 1 -t 2 --json");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_FALSE(nlohmann::json::parse(one.output)[0].contains("ratio_to_first"));
}

TEST(Cli, BenchParallelReportsEveryTest) {
  LL3_REQUIRE_SHARED();
  std::string dir = test::temp_dir();
  auto r = run_command(ll3() + " bench --parallel 1,3 -m " + tiny() +
                       " -n 4 -r 2 -t 2 --prompt-len 4 --ttft-prompt 40 --history 40 --fair-prompt 64 --fair-streams 2"
                       " --session-dir " + dir + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["aggregate"].size(), 2u) << r.output;
  EXPECT_EQ(j["aggregate"][0]["sequences"], 1);
  EXPECT_EQ(j["aggregate"][1]["sequences"], 3);
  EXPECT_DOUBLE_EQ(j["aggregate"][0]["ratio_to_one"].get<double>(), 1.0);
  for (const auto& a : j["aggregate"]) {
    EXPECT_GT(a["tokens_per_s"].get<double>(), 0.0);
    EXPECT_GT(a["decode_tokens_per_s"].get<double>(), 0.0);
    EXPECT_GT(a["itl_median_s"].get<double>(), 0.0);
  }
  EXPECT_EQ(j["ttft"]["prompt"], 40);
  EXPECT_GT(j["ttft"]["cold_s"].get<double>(), 0.0);
  EXPECT_GT(j["ttft"]["warm_s"].get<double>(), 0.0);
  EXPECT_GT(j["session"]["with_session_s"].get<double>(), 0.0);
  EXPECT_GT(j["session"]["without_s"].get<double>(), 0.0);
  EXPECT_GT(j["session"]["after_restart_s"].get<double>(), 0.0);
  EXPECT_EQ(j["fairness"]["streams"], 2);
  EXPECT_GT(j["fairness"]["intervals"].get<int64_t>(), 0);
  EXPECT_GT(j["fairness"]["intervals_before"].get<int64_t>(), 0);
  EXPECT_GT(j["fairness"]["itl_before_p50_s"].get<double>(), 0.0);
  EXPECT_GT(j["fairness"]["ttft_idle_s"].get<double>(), 0.0);
  EXPECT_GT(j["fairness"]["ttft_over_idle"].get<double>(), 0.0);
  EXPECT_NE(j["runs_on"].get<std::string>().find("cpu"), std::string::npos) << j["runs_on"];
  EXPECT_EQ(run_command(ll3() + " bench --parallel 1,x -m " + tiny(), true).exit_code, 2);
}

TEST(Cli, InspectShowsHyperParametersAndTensors) {
  LL3_REQUIRE_SHARED();
  auto r = run_command(ll3() + " inspect " + test::shared_dir() + "/models/small-llama31-q4_k_m.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* s : {"GGUF v3", "blk.1.ffn_down.weight", "q6_k", "[768, 256]", "heads / kv heads  8 / 2",
                        "llama3 (per-dimension factors)", "128256 tokens, 280147 merges", "total tensor bytes"}) {
    EXPECT_NE(r.output.find(s), std::string::npos) << s;
  }
}

// --dump-activations: every op of the prompt's forward pass, (rows, cols) floats per file, and
// consistent with each other (the residual stream adds up exactly as the forward pass adds).
TEST(Cli, DumpActivationsWritesEveryOpOfThePrompt) {
  LL3_REQUIRE_SHARED();
  const std::string dir = test::temp_dir() + "/act";
  std::filesystem::create_directories(dir);
  auto r = run_command(ll3() + " logits -m " + tiny() + " --tokens 128000,791,6864 --kv-type f32 --dump-activations " + dir, true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto floats = [&](const std::string& name) {
    const std::string path = dir + "/" + name + ".f32";
    EXPECT_TRUE(std::filesystem::exists(path)) << path;
    std::vector<float> v(std::filesystem::exists(path) ? std::filesystem::file_size(path) / 4 : 0);
    std::ifstream f(path, std::ios::binary);
    f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
    return v;
  };
  // tiny: dim 64, 4 heads and 2 KV heads of 16, FFN 192, 2 layers; 3 tokens, 1 logits row.
  const std::pair<const char*, size_t> ops[] = {{"attn_norm", 64}, {"Qcur", 64},    {"Kcur", 32},       {"Vcur", 32},
                                                {"Qrope", 64},     {"Krope", 32},   {"kqv_out", 64},    {"attn_out", 64},
                                                {"ffn_inp", 64},   {"ffn_norm", 64}, {"ffn_gate", 192}, {"ffn_up", 192},
                                                {"ffn_swiglu", 192}, {"ffn_out", 64}, {"l_out", 64}};
  for (int l = 0; l < 2; ++l) {
    for (const auto& [op, cols] : ops) EXPECT_EQ(floats(std::string(op) + "-" + std::to_string(l)).size(), 3 * cols) << op << " " << l;
    const std::vector<float> in = floats("ffn_inp-" + std::to_string(l)), out = floats("ffn_out-" + std::to_string(l)),
                             sum = floats("l_out-" + std::to_string(l));
    for (size_t i = 0; i < sum.size() && i < in.size() && i < out.size(); ++i) ASSERT_EQ(sum[i], in[i] + out[i]) << l << " " << i;
  }
  EXPECT_EQ(floats("result_norm").size(), 64u);
  auto bad = run_command(ll3() + " logits -m " + tiny() + " --tokens 128000 --dump-activations /nonexistent/dir", true);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("cannot write the activations"), std::string::npos) << bad.output;
}

TEST(Cli, VersionNamesTheBackends) {
  auto r = run_command(ll3() + " --version");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("ll3 ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("backends: cpu ("), std::string::npos) << r.output;
  // LL3_CPU caps what the CPU summary names; set but empty it caps nothing.
  auto empty = run_command("LL3_CPU= " + ll3() + " --version");
  auto native = run_command("env -u LL3_CPU " + ll3() + " --version");
  auto capped = run_command("LL3_CPU=avx2 " + ll3() + " --version");
  ASSERT_EQ(empty.exit_code, 0) << empty.output;
  EXPECT_EQ(empty.output, native.output);
  EXPECT_NE(capped.output.find("backends: cpu (avx2)"), std::string::npos) << capped.output;
}

}  // namespace
}  // namespace ll3

namespace ll3 {
namespace {

// `ll3 run --json-schema` / `--grammar`: the output matches, sampled or not; a bad file is a usage
// error naming it.
TEST(Cli, RunConstrainedByASchemaOrAGrammar) {
  LL3_REQUIRE_SHARED();
  const std::string dir = test::temp_dir();
  test::write_file(dir + "/schema.json",
                   R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9},
                       "ok": {"type": "boolean"}}, "required": ["n", "ok"], "additionalProperties": false})");
  test::write_file(dir + "/g.gbnf", "root ::= (\"yes\" | \"no\") \"!\"\n");
  test::write_file(dir + "/bad.json", R"({"type": "array", "uniqueItems": true})");
  for (const char* temp : {"0", "1.2"}) {
    auto r = test::run_command(ll3() + " run -m " + tiny() + " -p 'Once upon a time' -n 60 --seed 3 --temp " + temp +
                               " -q --json-schema " + dir + "/schema.json");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.output;
    EXPECT_GE(j["n"].get<int>(), 1);
    EXPECT_LE(j["n"].get<int>(), 9);
    EXPECT_TRUE(j["ok"].is_boolean());
    auto g = test::run_command(ll3() + " run -m " + tiny() + " -p 'Once upon a time' -n 10 --seed 3 --temp " + temp +
                               " -q --grammar " + dir + "/g.gbnf");
    ASSERT_EQ(g.exit_code, 0) << g.output;
    EXPECT_TRUE(g.output == "yes!\n" || g.output == "no!\n") << g.output;
  }
  auto bad = test::run_command(ll3() + " run -m " + tiny() + " -p hi -q --json-schema " + dir + "/bad.json", true);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("uniqueItems"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace ll3
