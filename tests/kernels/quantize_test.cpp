// ll3's quantizer (src/quant): per-tensor type choice as llama.cpp's mixtures make it, the written
// file (metadata, types, values), determinism across thread counts, and the CLI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/half.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/hf_export.h"
#include "kernels/type_traits.h"
#include "quant/quantize.h"
#include "test_support.h"

namespace ll3 {
namespace {

using quant::find_quant_mix;

// The shared Q4_K_M file was made by llama-quantize: our plan for q4_k_m must give every tensor
// the type llama.cpp gave it (the plan depends on names, shapes and metadata only).
TEST(Quantize, PlanMatchesLlamaCppQ4KM) {
  LL3_REQUIRE_SHARED();
  auto f = GgufFile::open(test::shared_dir() + "/models/small-llama31-q4_k_m.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  auto plan = quant::plan_types(**f, *find_quant_mix("Q4_K_M"));
  ASSERT_TRUE(plan.ok()) << plan.message();
  ASSERT_EQ(plan->size(), (*f)->tensors().size());
  for (const auto& [name, type] : *plan) {
    EXPECT_EQ(dtype_name(type), dtype_name((*f)->find_tensor(name)->type)) << name;
  }
}

// A synthetic 16-layer model (rows of 256 so every K-quant fits) written as F16.
std::string write_model(const std::string& path, int n_layer, int n_head_kv, bool tied) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "synthetic");
  w.set_u32("llama.block_count", n_layer);
  w.set_u32("llama.attention.head_count", 8);
  w.set_u32("llama.attention.head_count_kv", n_head_kv);
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "c"});
  static std::vector<uint16_t> data;  // shared by every tensor: [256, 4] F16
  data.resize(256 * 4);
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 0.05f);
  for (uint16_t& h : data) h = f32_to_f16(g(rng));
  static std::vector<float> norm(256, 1.0f);
  auto add = [&](const std::string& name, bool matrix) {
    Status st = matrix ? w.add_tensor(name, DType::F16, {256, 4}, data.data())
                       : w.add_tensor(name, DType::F32, {256}, norm.data());
    EXPECT_TRUE(st.ok()) << st.message();
  };
  add("token_embd.weight", true);
  for (int i = 0; i < n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    add(b + "attn_norm.weight", false);
    for (const char* t : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
      add(b + t + ".weight", true);
    }
    add(b + "ffn_norm.weight", false);
  }
  add("output_norm.weight", false);
  if (!tied) add("output.weight", true);
  Status st = w.write(path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

std::map<std::string, DType> plan_types(const std::string& path, const char* mix) {
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f.ok()) << f.message();
  auto plan = quant::plan_types(**f, *find_quant_mix(mix));
  EXPECT_TRUE(plan.ok()) << plan.message();
  std::map<std::string, DType> out;
  for (const auto& [name, type] : *plan) out[name] = type;
  return out;
}

std::string blk(int i, const char* t) { return "blk." + std::to_string(i) + "." + t + ".weight"; }

TEST(Quantize, MixtureRules) {
  const std::string dir = test::temp_dir();
  const std::string gqa4 = write_model(dir + "/gqa4.gguf", 16, 2, false);
  const std::string gqa1 = write_model(dir + "/gqa1.gguf", 16, 8, false);
  const std::string tied = write_model(dir + "/tied.gguf", 16, 2, true);
  // llama.cpp's "more bits" layers of 16: the first and last two, and every third in between.
  const std::set<int> more = {0, 1, 4, 7, 10, 13, 14, 15};

  auto m = plan_types(gqa4, "q4_k_m");
  EXPECT_EQ(m["output.weight"], DType::Q6_K);
  EXPECT_EQ(m["token_embd.weight"], DType::Q4_K);
  EXPECT_EQ(m["output_norm.weight"], DType::F32);
  for (int i = 0; i < 16; ++i) {
    const DType hi = more.count(i) ? DType::Q6_K : DType::Q4_K;
    EXPECT_EQ(m[blk(i, "attn_v")], hi) << i;
    EXPECT_EQ(m[blk(i, "ffn_down")], hi) << i;
    EXPECT_EQ(m[blk(i, "attn_q")], DType::Q4_K) << i;
    EXPECT_EQ(m[blk(i, "ffn_up")], DType::Q4_K) << i;
  }

  m = plan_types(gqa4, "q5_k_m");
  EXPECT_EQ(m[blk(1, "attn_v")], DType::Q6_K);
  EXPECT_EQ(m[blk(2, "attn_v")], DType::Q5_K);
  EXPECT_EQ(m[blk(2, "attn_k")], DType::Q5_K);

  m = plan_types(gqa4, "q4_k_s");
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(m[blk(i, "attn_v")], i < 4 ? DType::Q5_K : DType::Q4_K) << i;
    EXPECT_EQ(m[blk(i, "ffn_down")], i < 2 ? DType::Q5_K : DType::Q4_K) << i;
  }

  m = plan_types(gqa4, "q3_k_m");
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(m[blk(i, "attn_v")], i < 2 ? DType::Q5_K : DType::Q4_K) << i;
    EXPECT_EQ(m[blk(i, "ffn_down")], i < 1 ? DType::Q5_K : DType::Q4_K) << i;
    EXPECT_EQ(m[blk(i, "attn_output")], DType::Q4_K) << i;
    EXPECT_EQ(m[blk(i, "ffn_gate")], DType::Q3_K) << i;
  }

  m = plan_types(gqa4, "q2_k");
  EXPECT_EQ(m[blk(3, "attn_v")], DType::Q4_K);  // grouped-query attention: attn_v is small
  EXPECT_EQ(m[blk(3, "ffn_down")], DType::Q3_K);
  EXPECT_EQ(m[blk(3, "attn_output")], DType::Q3_K);
  EXPECT_EQ(m[blk(3, "attn_q")], DType::Q2_K);
  EXPECT_EQ(plan_types(gqa1, "q2_k")[blk(3, "attn_v")], DType::Q3_K);

  m = plan_types(gqa4, "q8_0");
  EXPECT_EQ(m["output.weight"], DType::Q8_0);
  EXPECT_EQ(m[blk(5, "attn_v")], DType::Q8_0);

  m = plan_types(gqa4, "q4_0");
  EXPECT_EQ(m["output.weight"], DType::Q6_K);
  EXPECT_EQ(m["token_embd.weight"], DType::Q4_0);
  EXPECT_EQ(m[blk(0, "ffn_down")], DType::Q4_0);

  // Tied embeddings: token_embd doubles as the output projection and gets its type.
  m = plan_types(tied, "q4_0");
  EXPECT_EQ(m["token_embd.weight"], DType::Q6_K);
  EXPECT_EQ(m.count("output.weight"), 0u);
}

TEST(Quantize, FallbackForShortRows) {
  LL3_REQUIRE_SHARED();  // the tiny model has rows of 64 and 192: no K-quant block fits
  auto f = GgufFile::open(test::shared_dir() + "/models/tiny-llama3-f32.gguf");
  ASSERT_TRUE(f.ok());
  const quant::ModelSource src = quant::source_from_gguf(**f);
  auto plan = quant::plan_quantization(src, *find_quant_mix("q4_k_m"));
  ASSERT_TRUE(plan.ok());
  int quantized = 0;
  for (const auto& p : *plan) {
    if (!p.quantize) continue;
    ++quantized;
    EXPECT_EQ(p.tensor->ne[0] % dtype_info(p.type).block_size, 0) << p.tensor->name;
    EXPECT_TRUE(p.type == DType::Q5_0 || p.type == DType::Q8_0) << p.tensor->name;
  }
  // The 7 matrices of each of the 2 layers and token_embd: all quantized, with a fallback type.
  EXPECT_EQ(quantized, 15) << "the loop above checked too few tensors";
}

// The relative RMS error of `out` against `src` (the same tensor): |dequantized - source| /
// |source| over all its values.
double relative_error(const GgufTensorInfo& src, const GgufTensorInfo& out) {
  std::vector<float> a(src.n_elements()), b(out.n_elements());
  type_traits(src.type)->to_float(src.data, a.data(), src.n_elements());
  type_traits(out.type)->to_float(out.data, b.data(), out.n_elements());
  double err = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err += (a[i] - b[i]) * double(a[i] - b[i]);
    ref += double(a[i]) * a[i];
  }
  return std::sqrt(err / ref);
}

// The most relative error each type may show on write_model's values (N(0, 0.05) rounded to
// F16, rows of 256). Each bound is the error this quantizer gave (quantize_gguf, every mixture,
// measured once and written in the comment) plus a quarter: a change that loses precision
// fails well before it costs a whole bit, which doubles the error (Q8_0's 0.53% is about
// max|x| / 127 / sqrt(12) of a block of 32 normal values; each bit less roughly doubles it).
double max_relative_error(DType t) {
  switch (t) {
    case DType::F32: return 0;        // the norms: copied
    case DType::Q8_0: return 0.0066;  // 0.53%
    case DType::Q6_K: return 0.0225;  // 1.79%
    case DType::Q5_K: return 0.045;   // 3.57%
    case DType::Q5_1: return 0.048;   // 3.81%
    case DType::Q5_0: return 0.053;   // 4.20%
    case DType::Q4_K: return 0.087;   // 6.95%
    case DType::Q4_1: return 0.098;   // 7.83%
    case DType::Q4_0: return 0.104;   // 8.27%
    case DType::Q3_K: return 0.187;   // 14.93%
    case DType::Q2_K: return 0.378;   // 30.18%
    default: return -1;               // no bound known: fails
  }
}

// Every tensor of `out` is within its type's error of the same tensor of `in`; the worst error
// of each type goes to *worst.
void expect_within_type_error(const GgufFile& in, const GgufFile& out, std::map<DType, double>* worst = nullptr) {
  for (const GgufTensorInfo& t : out.tensors()) {
    const GgufTensorInfo* o = in.find_tensor(t.name);
    ASSERT_NE(o, nullptr) << t.name;
    const double err = relative_error(*o, t);
    EXPECT_LE(err, max_relative_error(t.type)) << t.name << " (" << dtype_name(t.type) << ")";
    if (worst != nullptr) (*worst)[t.type] = std::max((*worst)[t.type], err);
  }
}

TEST(Quantize, WritesFileDeterministically) {
  const std::string dir = test::temp_dir();
  const std::string src = write_model(dir + "/src.gguf", 4, 2, false);
  auto in = GgufFile::open(src);
  ASSERT_TRUE(in.ok());
  quant::QuantizeOptions one, two;
  one.threads = 1;
  two.threads = 3;
  size_t calls = 0;
  two.on_tensor = [&calls](const quant::QuantizeProgress& p) {
    ++calls;
    EXPECT_EQ(p.index, calls);
  };
  auto s1 = quant::quantize_gguf(**in, dir + "/a.gguf", *find_quant_mix("q4_k_m"), one);
  ASSERT_TRUE(s1.ok()) << s1.message();
  auto s2 = quant::quantize_gguf(**in, dir + "/b.gguf", *find_quant_mix("q4_k_m"), two);
  ASSERT_TRUE(s2.ok()) << s2.message();
  EXPECT_EQ(calls, (*in)->tensors().size());
  EXPECT_EQ(test::read_file(dir + "/a.gguf"), test::read_file(dir + "/b.gguf"));
  EXPECT_LT(s1->bits_per_weight(), 8.0);  // the F32 norms weigh a lot in so small a model
  EXPECT_GT(s1->bits_per_weight(), 4.5);

  auto out = GgufFile::open(dir + "/a.gguf");
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_EQ(out.value()->get_int("general.file_type").value_or(-1), 15);
  EXPECT_EQ(out.value()->get_int("general.quantization_version").value_or(-1), 2);
  EXPECT_EQ(out.value()->get_string("general.name").value_or(""), "synthetic");
  EXPECT_EQ(out.value()->find("tokenizer.ggml.tokens")->strings.size(), 3u);
  EXPECT_EQ(out.value()->file_size(), s1->file_bytes);
  // Values: each tensor dequantizes to within its type's error of the source.
  expect_within_type_error(**in, **out);
}

// Every mixture, so that every type the quantizer writes meets its own bound.
TEST(Quantize, EveryTypeDequantizesWithinItsPrecision) {
  const std::string dir = test::temp_dir();
  const std::string src = write_model(dir + "/src.gguf", 2, 2, false);
  auto in = GgufFile::open(src);
  ASSERT_TRUE(in.ok());
  std::map<DType, double> worst;
  for (const quant::QuantMix& mix : quant::quant_mixes()) {
    SCOPED_TRACE(mix.name);
    const std::string path = dir + "/" + mix.name + ".gguf";
    ASSERT_TRUE(quant::quantize_gguf(**in, path, mix, {}).ok());
    auto out = GgufFile::open(path);
    ASSERT_TRUE(out.ok()) << out.message();
    expect_within_type_error(**in, **out, &worst);
  }
  // Every bound above was checked.
  for (DType t : {DType::F32, DType::Q8_0, DType::Q6_K, DType::Q5_K, DType::Q5_1, DType::Q5_0, DType::Q4_K,
                  DType::Q4_1, DType::Q4_0, DType::Q3_K, DType::Q2_K}) {
    EXPECT_EQ(worst.count(t), 1u) << "no mixture wrote " << dtype_name(t);
  }
}

// A Hugging Face directory (exported from the tiny GGUF, Q/K back in rotate-half order, two
// shards) quantizes to exactly the tensors the GGUF itself does.
TEST(Quantize, HuggingFaceDirectoryMatchesGguf) {
  LL3_REQUIRE_SHARED();
  const std::string dir = test::temp_dir();
  auto f = GgufFile::open(test::shared_dir() + "/models/tiny-llama3-f32.gguf");
  ASSERT_TRUE(f.ok());
  Status st = export_hf_directory(**f, dir + "/hf", 2, test::shared_dir() + "/tokenizers/llama3");
  ASSERT_TRUE(st.ok()) << st.message();
  auto hf = quant::source_from_hf(dir + "/hf");
  ASSERT_TRUE(hf.ok()) << hf.message();
  for (const char* mix : {"q8_0", "q4_k_m"}) {
    SCOPED_TRACE(mix);
    quant::QuantizeOptions opt;
    opt.threads = 2;
    ASSERT_TRUE(quant::quantize_model(*hf, dir + "/from_hf.gguf", *find_quant_mix(mix), opt).ok());
    ASSERT_TRUE(quant::quantize_gguf(**f, dir + "/from_gguf.gguf", *find_quant_mix(mix), opt).ok());
    auto a = GgufFile::open(dir + "/from_gguf.gguf");
    auto b = GgufFile::open(dir + "/from_hf.gguf");
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ((*a)->tensors().size(), (*b)->tensors().size());
    for (const GgufTensorInfo& t : (*a)->tensors()) {
      const GgufTensorInfo* u = (*b)->find_tensor(t.name);
      ASSERT_NE(u, nullptr) << t.name;
      EXPECT_EQ(u->type, t.type) << t.name;
      ASSERT_EQ(u->nbytes, t.nbytes) << t.name;
      EXPECT_EQ(0, std::memcmp(u->data, t.data, t.nbytes)) << t.name << " differs";
    }
    for (const char* key : {"llama.block_count", "llama.attention.head_count_kv", "llama.embedding_length",
                            "tokenizer.ggml.bos_token_id", "general.file_type"}) {
      EXPECT_EQ((*a)->get_int(key), (*b)->get_int(key)) << key;
    }
    EXPECT_EQ((*a)->find("tokenizer.ggml.tokens")->strings.size(), (*b)->find("tokenizer.ggml.tokens")->strings.size());
  }
  // The CLI takes the directory too, and writes the same file as the library call.
  auto cli = test::run_command(test::ll3_binary() + " quantize " + dir + "/hf " + dir + "/cli.gguf q4_k_m -t 2 2>&1", true);
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  EXPECT_EQ(test::read_file(dir + "/cli.gguf"), test::read_file(dir + "/from_hf.gguf"));
}

TEST(Quantize, Cli) {
  const std::string dir = test::temp_dir();
  const std::string src = write_model(dir + "/src.gguf", 2, 2, false);
  const std::string bin = test::ll3_binary();
  auto bad = test::run_command(bin + " quantize " + src + " " + dir + "/x.gguf q9_9 2>&1", true);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("unknown type"), std::string::npos) << bad.output;
  auto missing = test::run_command(bin + " quantize " + dir + "/nope.gguf " + dir + "/x.gguf q8_0 2>&1", true);
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  auto ok = test::run_command(bin + " quantize " + src + " " + dir + "/q.gguf Q8_0 --threads 2 2>&1", true);
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("bits/weight"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("[1/"), std::string::npos) << "plain progress lines when not a terminal";
  auto out = GgufFile::open(dir + "/q.gguf");
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_EQ(out.value()->find_tensor("blk.1.ffn_up.weight")->type, DType::Q8_0);
}

}  // namespace
}  // namespace ll3
