// ll3 quantize --imatrix against llama-quantize --imatrix: for every mixture ll3 makes, the
// tensors must come out byte-identical (SHA-256 per tensor, recorded from llama-quantize in
// tests/fixtures/imatrix/quantize_hashes.json; how they were made:
// tests/fixtures/imatrix/README.md), and the imatrix rules (missing entries, wrong sizes, q2_k_s,
// q4_0's ffn_down) must be llama-quantize's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/half.h"
#include "core/sha256.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "quant/imatrix_weights.h"
#include "quant/quantize.h"
#include "test_support.h"

namespace ll3 {
namespace {

using quant::ImatrixWeights;

std::string fixture_dir() { return test::source_dir() + "/tests/fixtures/imatrix"; }
std::string model_path() { return test::shared_dir() + "/models/trained-llama3-4l-f16.gguf"; }

// The reference imatrix, named as llama-quantize was given it (recorded in the metadata).
ImatrixWeights reference_imatrix() {
  auto w = quant::load_imatrix_weights(fixture_dir() + "/trained-quant.imatrix");
  EXPECT_TRUE(w.ok()) << w.message();
  if (!w.ok()) return {};
  w->file = "trained-quant.imatrix";
  return std::move(w.value());
}

std::string tensor_sha(const GgufTensorInfo& t) {
  return sha256_hex({reinterpret_cast<const char*>(t.data), t.nbytes});
}

// Quantize the trained model to `mix` into `out`; returns the output file, or null after a failure.
std::unique_ptr<GgufFile> quantize(const std::string& mix, const ImatrixWeights* imatrix,
                                   const std::string& out) {
  auto in = GgufFile::open(model_path());
  EXPECT_TRUE(in.ok()) << in.message();
  if (!in.ok()) return nullptr;
  quant::QuantizeOptions opt;
  opt.threads = 2;
  opt.imatrix = imatrix;
  auto sum = quant::quantize_gguf(**in, out, *quant::find_quant_mix(mix), opt);
  EXPECT_TRUE(sum.ok()) << sum.message();
  if (!sum.ok()) return nullptr;
  auto f = GgufFile::open(out);
  EXPECT_TRUE(f.ok()) << f.message();
  return f.ok() ? std::move(f.value()) : nullptr;
}

class QuantizeImatrixTypes : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantizeImatrixTypes, ByteIdenticalToLlamaQuantize) {
  const std::string type = GetParam();
  std::ifstream js(fixture_dir() + "/quantize_hashes.json");
  ASSERT_TRUE(js.good());
  const nlohmann::json ref = nlohmann::json::parse(js).at(type);
  const ImatrixWeights imatrix = reference_imatrix();
  auto f = quantize(type, &imatrix, test::temp_dir() + "/" + type + ".gguf");
  ASSERT_TRUE(f);
  int differ = 0;
  ASSERT_EQ(f->tensors().size(), ref.at("tensors").size());
  for (const GgufTensorInfo& t : f->tensors()) {
    const std::string want = ref.at("tensors").at(t.name).get<std::string>();
    const std::string got = std::to_string(static_cast<int>(t.type)) + " " + tensor_sha(t);
    if (got != want) ++differ;
    EXPECT_EQ(got, want) << type << " " << t.name << " (type id, SHA-256)";
  }
  EXPECT_EQ(differ, 0) << type;
  for (const auto& [key, value] : ref.at("metadata").items()) {
    if (value.is_string()) {
      EXPECT_EQ(f->get_string(key).value_or("(missing)"), value.get<std::string>()) << key;
    } else {
      EXPECT_EQ(f->find(key) ? f->find(key)->type : GgufType::STRING, GgufType::I32) << key;
      EXPECT_EQ(f->get_int(key).value_or(-1), value.get<int64_t>()) << key;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllMixes, QuantizeImatrixTypes,
                         ::testing::Values("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q2_K_S",
                                           "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M",
                                           "Q5_K_S", "Q5_K_M", "Q6_K"),
                         [](const auto& info) { return info.param; });

// A tensor without an entry is quantized as without an imatrix (llama-quantize only logs it);
// the others keep their weighted bytes.
TEST(QuantizeImatrix, MissingEntryQuantizesThatTensorUnweighted) {
  const std::string dir = test::temp_dir();
  ImatrixWeights partial = reference_imatrix();
  ASSERT_EQ(partial.weights.erase("blk.1.ffn_up.weight"), 1u);
  auto with = quantize("q4_k_m", &partial, dir + "/partial.gguf");
  auto full_imatrix = reference_imatrix();
  auto full = quantize("q4_k_m", &full_imatrix, dir + "/full.gguf");
  auto none = quantize("q4_k_m", nullptr, dir + "/none.gguf");
  ASSERT_TRUE(with && full && none);
  for (const GgufTensorInfo& t : with->tensors()) {
    const GgufFile& expect = t.name == "blk.1.ffn_up.weight" ? *none : *full;
    EXPECT_EQ(tensor_sha(t), tensor_sha(*expect.find_tensor(t.name))) << t.name;
  }
  EXPECT_NE(tensor_sha(*full->find_tensor("blk.1.ffn_up.weight")),
            tensor_sha(*none->find_tensor("blk.1.ffn_up.weight")));
  EXPECT_EQ(with->get_int("quantize.imatrix.entries_count").value_or(0), 27);
  EXPECT_EQ(none->find("quantize.imatrix.file"), nullptr);
}

TEST(QuantizeImatrix, LowBitMixNeedsEveryEntry) {
  const std::string dir = test::temp_dir();
  auto in = GgufFile::open(model_path());
  ASSERT_TRUE(in.ok()) << in.message();
  const quant::QuantMix& q2ks = *quant::find_quant_mix("q2_k_s");
  EXPECT_TRUE(quant::mix_requires_imatrix(q2ks));
  auto none = quant::quantize_gguf(**in, dir + "/x.gguf", q2ks, {});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.message().find("importance matrix"), std::string::npos) << none.message();
  ImatrixWeights partial = reference_imatrix();
  partial.weights.erase("blk.2.attn_q.weight");
  quant::QuantizeOptions opt;
  opt.imatrix = &partial;
  auto missing = quant::quantize_gguf(**in, dir + "/x.gguf", q2ks, opt);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("blk.2.attn_q.weight"), std::string::npos) << missing.message();
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.gguf"));
}

TEST(QuantizeImatrix, WrongSizeIsAnErrorExceptForTokenEmbd) {
  const std::string dir = test::temp_dir();
  auto in = GgufFile::open(model_path());
  ASSERT_TRUE(in.ok()) << in.message();
  ImatrixWeights w = reference_imatrix();
  w.weights["token_embd.weight"] = std::vector<float>(7, 1.0f);  // ignored, as llama-quantize does
  quant::QuantizeOptions opt;
  opt.imatrix = &w;
  auto ok = quant::quantize_gguf(**in, dir + "/a.gguf", *quant::find_quant_mix("q6_k"), opt);
  EXPECT_TRUE(ok.ok()) << ok.message();
  w.weights["blk.0.attn_k.weight"].pop_back();
  auto bad = quant::quantize_gguf(**in, dir + "/b.gguf", *quant::find_quant_mix("q6_k"), opt);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("blk.0.attn_k.weight"), std::string::npos) << bad.message();
}

// llama-quantize moves the first eighth of ffn_down from q4_0 / q5_0 to q4_1 / q5_1 only when
// quantizing with an imatrix (the trained model has too few layers to show it).
TEST(QuantizeImatrix, Q4_0FfnDownRuleNeedsAnImatrix) {
  quant::ModelSource src;
  src.n_layer = 16;
  src.n_head = src.n_head_kv = 8;
  for (int i = 0; i < 16; ++i) {
    quant::SourceTensor t;
    t.name = "blk." + std::to_string(i) + ".ffn_down.weight";
    t.type = DType::F16;
    t.n_dims = 2;
    t.ne[0] = 256;
    t.ne[1] = 4;
    src.tensors.push_back(t);
  }
  ImatrixWeights w;
  w.weights["blk.0.ffn_down.weight"] = std::vector<float>(256, 1.0f);
  for (const char* mix : {"q4_0", "q5_0", "q2_k_s"}) {
    auto with = quant::plan_quantization(src, *quant::find_quant_mix(mix), &w);
    ASSERT_TRUE(with.ok() || std::string(mix) == "q2_k_s") << with.message();
    if (std::string(mix) == "q2_k_s") {
      // q2_k_s: layers 0 and 1 go to Q4_K (which needs no imatrix); layer 2 is Q2_K without one.
      ASSERT_FALSE(with.ok());
      EXPECT_NE(with.message().find("blk.2.ffn_down.weight"), std::string::npos) << with.message();
      continue;
    }
    auto without = quant::plan_quantization(src, *quant::find_quant_mix(mix));
    ASSERT_TRUE(without.ok()) << without.message();
    const DType up = std::string(mix) == "q4_0" ? DType::Q4_1 : DType::Q5_1;
    const DType base = std::string(mix) == "q4_0" ? DType::Q4_0 : DType::Q5_0;
    EXPECT_EQ((*with)[0].type, up);
    EXPECT_EQ((*with)[1].type, up);
    EXPECT_EQ((*with)[2].type, base);
    EXPECT_NE((*with)[0].imatrix, nullptr);
    EXPECT_EQ((*with)[1].imatrix, nullptr);
    for (const quant::TensorPlan& p : *without) EXPECT_EQ(p.type, base) << p.tensor->name;
  }
}

void write_bytes(const std::string& path, const std::string& bytes) {
  test::write_file(path, bytes);
}

std::string legacy_entry(const std::string& name, int ncall, const std::vector<float>& v) {
  std::string s;
  auto i32 = [&s](int32_t x) { s.append(reinterpret_cast<const char*>(&x), 4); };
  i32(static_cast<int32_t>(name.size()));
  s += name;
  i32(ncall);
  i32(static_cast<int32_t>(v.size()));
  s.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  return s;
}

TEST(QuantizeImatrix, LegacyFileArithmeticAndTrailer) {
  const std::string path = test::temp_dir() + "/a.dat";
  std::string s;
  const int32_t n = 2, chunks = 5, len = 4;
  s.append(reinterpret_cast<const char*>(&n), 4);
  s += legacy_entry("a.weight", 3, {3.0f, 1.0f});
  s += legacy_entry("b.weight", 0, {2.0f});
  s.append(reinterpret_cast<const char*>(&chunks), 4);
  s.append(reinterpret_cast<const char*>(&len), 4);
  s += "text";
  write_bytes(path, s);
  auto w = quant::load_imatrix_weights(path);
  ASSERT_TRUE(w.ok()) << w.message();
  EXPECT_EQ(w->file, path);
  EXPECT_EQ(w->dataset, "text");
  EXPECT_EQ(w->chunks, 5);
  EXPECT_EQ(w->weights.at("a.weight"), (std::vector<float>{1.0f, 1.0f / 3.0f}));
  EXPECT_EQ(w->weights.at("b.weight"), (std::vector<float>{2.0f}));  // ncall 0: left as stored

  quant::filter_imatrix_weights(*w, {}, {"a."});
  EXPECT_EQ(w->weights.size(), 1u);
  EXPECT_EQ(w->weights.count("b.weight"), 1u);
  auto w2 = quant::load_imatrix_weights(path);
  quant::filter_imatrix_weights(*w2, {"a.w"}, {});
  EXPECT_EQ(w2->weights.size(), 1u);
  EXPECT_EQ(w2->weights.count("a.weight"), 1u);
}

TEST(QuantizeImatrix, CorruptFilesAreClearErrors) {
  const std::string dir = test::temp_dir();
  const std::string good = test::read_file(fixture_dir() + "/trained-quant.imatrix");
  const int32_t zero = 0, one = 1;
  std::string nan_file(reinterpret_cast<const char*>(&one), 4);
  nan_file += legacy_entry("x.weight", 1, {1.0f, std::nanf("")});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "no entries"},
      {std::string(reinterpret_cast<const char*>(&zero), 4), "no entries"},
      {good.substr(0, good.size() / 2), "truncated"},
      {good.substr(0, 4 + 4 + 3), "truncated name"},
      {nan_file, "non-finite"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = dir + "/bad" + std::to_string(i) + ".imatrix";
    write_bytes(path, cases[i].first);
    auto w = quant::load_imatrix_weights(path);
    ASSERT_FALSE(w.ok()) << "case " << i;
    EXPECT_NE(w.message().find(path), std::string::npos) << w.message();
    EXPECT_NE(w.message().find(cases[i].second), std::string::npos) << w.message();
  }
  auto missing = quant::load_imatrix_weights(dir + "/nope.imatrix");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("cannot open"), std::string::npos) << missing.message();

  // A GGUF file that is not an imatrix.
  auto not_imatrix = quant::load_imatrix_weights(model_path());
  ASSERT_FALSE(not_imatrix.ok());
  EXPECT_NE(not_imatrix.message().find("imatrix."), std::string::npos) << not_imatrix.message();

  // The CLI reports it and exits 1 without writing anything.
  auto r = test::run_command(test::ll3_binary() + " quantize " + model_path() + " " + dir +
                                 "/out.gguf q4_k_m --imatrix " + dir + "/bad2.imatrix -t 2 2>&1",
                             true);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("truncated"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.gguf"));
}

// The GGUF imatrix format (in_sum2 / counts): weights are sum / count, and 1 where a matrix saw
// no input. Written here from the legacy fixture with counts of 1, it must quantize identically.
TEST(QuantizeImatrix, GgufFormatMatchesLegacy) {
  const std::string dir = test::temp_dir();
  const ImatrixWeights legacy = reference_imatrix();
  GgufWriter w;
  w.set_string_array("imatrix.datasets", {legacy.dataset});
  w.set_u32("imatrix.chunk_count", static_cast<uint32_t>(legacy.chunks));
  w.set_u32("imatrix.chunk_size", 128);
  std::vector<std::pair<std::string, std::vector<float>>> sorted(legacy.weights.begin(),
                                                                 legacy.weights.end());
  std::sort(sorted.begin(), sorted.end());
  static const float one = 1.0f, zero = 0.0f, four = 4.0f;
  for (const auto& [name, values] : sorted) {
    ASSERT_TRUE(w.add_tensor(name + ".in_sum2", DType::F32,
                             {static_cast<int64_t>(values.size()), 1}, values.data())
                    .ok());
    ASSERT_TRUE(w.add_tensor(name + ".counts", DType::F32, {1, 1}, &one).ok());
  }
  static const float sums[4] = {8.0f, 2.0f, 5.0f, 5.0f};
  ASSERT_TRUE(w.add_tensor("moe.weight.in_sum2", DType::F32, {2, 2}, sums).ok());
  static const float counts[2] = {four, zero};
  ASSERT_TRUE(w.add_tensor("moe.weight.counts", DType::F32, {1, 2}, counts).ok());
  ASSERT_TRUE(w.write(dir + "/m.gguf").ok());

  auto g = quant::load_imatrix_weights(dir + "/m.gguf");
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(g->weights.at("moe.weight"), (std::vector<float>{2.0f, 0.5f, 1.0f, 1.0f}));
  EXPECT_EQ(g->dataset, legacy.dataset);
  EXPECT_EQ(g->chunks, legacy.chunks);
  g->weights.erase("moe.weight");
  for (const auto& [name, values] : legacy.weights) EXPECT_EQ(g->weights.at(name), values) << name;

  g->file = legacy.file;
  auto a = quantize("q3_k_m", &legacy, dir + "/legacy.gguf");
  auto b = quantize("q3_k_m", &g.value(), dir + "/gguf.gguf");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(test::read_file(dir + "/legacy.gguf"), test::read_file(dir + "/gguf.gguf"));
}

TEST(QuantizeImatrix, Cli) {
  const std::string dir = test::temp_dir();
  const std::string bin = test::ll3_binary();
  auto r = test::run_command(
      "cd " + fixture_dir() + " && " + bin + " quantize " + model_path() + " " + dir +
          "/q.gguf q4_k_s --imatrix trained-quant.imatrix --exclude-weights ffn_gate -t 2 2>&1",
      true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(imatrix)"), std::string::npos) << r.output;
  auto f = GgufFile::open(dir + "/q.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ((*f)->get_string("quantize.imatrix.file").value_or(""), "trained-quant.imatrix");
  EXPECT_EQ((*f)->get_int("quantize.imatrix.entries_count").value_or(0), 24);  // 28 less 4 ffn_gate
  auto both = test::run_command(bin + " quantize " + model_path() + " " + dir +
                                    "/x.gguf q4_k_s --imatrix a "
                                    "--include-weights x --exclude-weights y 2>&1",
                                true);
  EXPECT_EQ(both.exit_code, 2) << both.output;
  auto need = test::run_command(
      bin + " quantize " + model_path() + " " + dir + "/x.gguf q2_k_s 2>&1", true);
  EXPECT_EQ(need.exit_code, 1) << need.output;
  EXPECT_NE(need.output.find("importance matrix"), std::string::npos) << need.output;
}

}  // namespace
}  // namespace ll3
