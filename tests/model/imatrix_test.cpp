// The importance matrix: file formats (llama.cpp's GGUF and legacy .dat, round trips, corrupt
// files), and `ll3 imatrix` against llama-imatrix's files made on the same model and text
// (tests/fixtures/imatrix/README.md says how they were made).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "quant/imatrix.h"
#include "test_support.h"

namespace ll3 {
namespace {

using test::read_file;
using test::run_command;
using test::temp_dir;
using test::write_file;

std::string fixture(const std::string& name) { return test::source_dir() + "/tests/fixtures/imatrix/" + name; }

// The calibration text of the fixtures: the first 16 KiB of the held-out text. (Quality checks
// of an imatrix-quantized model must score other text than this.)
std::string calibration_text() {
  const std::string all = read_file(test::shared_dir() + "/models/trained-test.txt");
  const std::string path = temp_dir() + "/calib.txt";
  write_file(path, all.substr(0, 16384));
  return path;
}

Imatrix random_imatrix(uint32_t seed) {
  Imatrix im;
  im.chunk_size = 16;
  im.datasets = {"a.txt"};
  const std::vector<float> x = test::random_normal(48 * 40, seed);
  im.add_rows("blk.0.attn_q.weight", x.data(), 48, 40);
  im.add_rows("blk.0.ffn_down.weight", x.data(), 32, 60);
  im.update_chunk_count();
  return im;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

TEST(ImatrixFile, AddRowsSumsSquaresAndCounts) {
  Imatrix im;
  const float x[] = {1, -2, 3, 0.5f, 4, -1};  // 2 rows of 3
  im.add_rows("w", x, 2, 3);
  const ImatrixEntry& e = im.entries.at("w");
  EXPECT_EQ(e.counts, std::vector<int64_t>{2});
  EXPECT_EQ(e.sum2, (std::vector<double>{1.25, 20, 10}));
  EXPECT_EQ(e.sum, (std::vector<double>{1.5, 2, 2}));
  EXPECT_EQ(im.mean_sq("w"), (std::vector<float>{0.625f, 10, 5}));
  EXPECT_TRUE(im.mean_sq("absent").empty());
}

TEST(ImatrixFile, GgufRoundTripKeepsEverything) {
  const Imatrix im = random_imatrix(1);
  const std::string path = temp_dir() + "/rt.gguf";
  ASSERT_TRUE(im.save(path, ImatrixFormat::kGguf).ok());

  // The layout llama-imatrix writes and reads.
  Result<std::unique_ptr<GgufFile>> g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ((*g)->get_string("general.type").value_or(""), "imatrix");
  EXPECT_EQ((*g)->get_int("imatrix.chunk_size").value_or(0), 16);
  EXPECT_EQ((*g)->get_int("imatrix.chunk_count").value_or(0), 3);  // 48 rows / 16
  const GgufTensorInfo* s2 = (*g)->find_tensor("blk.0.attn_q.weight.in_sum2");
  const GgufTensorInfo* c = (*g)->find_tensor("blk.0.attn_q.weight.counts");
  ASSERT_TRUE(s2 && c && (*g)->find_tensor("blk.0.attn_q.weight.in_sum"));
  EXPECT_EQ(s2->type, DType::F32);
  EXPECT_EQ(s2->shape_string(), "[40, 1]");
  EXPECT_EQ(c->shape_string(), "[1, 1]");

  Result<Imatrix> back = Imatrix::load(path);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->datasets, im.datasets);
  EXPECT_EQ(back->chunk_size, 16);
  ASSERT_EQ(back->entries.size(), 2u);
  for (const auto& [name, e] : im.entries) {
    const ImatrixEntry& b = back->entries.at(name);
    EXPECT_EQ(b.counts, e.counts);
    for (size_t i = 0; i < e.sum2.size(); ++i) {
      EXPECT_FLOAT_EQ(b.sum2[i], e.sum2[i]);
      EXPECT_FLOAT_EQ(b.sum[i], e.sum[i]);
    }
  }
}

TEST(ImatrixFile, DatRoundTripKeepsMeansAndCounts) {
  const Imatrix im = random_imatrix(2);
  const std::string path = temp_dir() + "/rt.dat";
  ASSERT_TRUE(im.save(path, imatrix_format_for(path)).ok());
  Result<Imatrix> back = Imatrix::load(path, 16);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->datasets, std::vector<std::string>{"a.txt"});
  EXPECT_EQ(back->chunk_count, 3);
  for (const auto& [name, e] : im.entries) {
    const ImatrixEntry& b = back->entries.at(name);
    EXPECT_EQ(b.counts, e.counts);
    EXPECT_TRUE(b.sum.empty());  // .dat keeps no Σx
    EXPECT_LT(rel_l2(back->mean_sq(name), im.mean_sq(name)), 1e-6);
  }
  // Another chunk size rebuilds other sums and counts, but the same means.
  Result<Imatrix> other = Imatrix::load(path, 512);
  ASSERT_TRUE(other.ok());
  EXPECT_LT(rel_l2(other->mean_sq("blk.0.attn_q.weight"), im.mean_sq("blk.0.attn_q.weight")), 1e-6);
}

TEST(ImatrixFile, MergeAddsSumsAndCounts) {
  Imatrix a = random_imatrix(3);
  const Imatrix b = random_imatrix(4);
  ASSERT_TRUE(a.merge(b).ok());
  const ImatrixEntry& e = a.entries.at("blk.0.attn_q.weight");
  EXPECT_EQ(e.counts, std::vector<int64_t>{96});
  EXPECT_EQ(a.chunk_count, 6);
  EXPECT_EQ(a.datasets.size(), 2u);
  Imatrix c;
  const std::vector<float> x(41, 1.0f);
  c.add_rows("blk.0.attn_q.weight", x.data(), 1, 41);
  Status s = a.merge(c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("blk.0.attn_q.weight"), std::string::npos) << s.message();
}

TEST(ImatrixFile, ReadsLlamaImatrixDat) {
  Result<Imatrix> im = Imatrix::load(fixture("trained-c128.dat"), 128);
  ASSERT_TRUE(im.ok()) << im.message();
  EXPECT_EQ(im->entries.size(), 28u);  // 4 layers x 7 matrices, no output.weight
  EXPECT_EQ(im->datasets, std::vector<std::string>{"calib.txt"});
  EXPECT_EQ(im->chunk_count, 12);
  for (const auto& [name, e] : im->entries) {
    EXPECT_EQ(name.rfind("blk.", 0), 0u) << name;
    EXPECT_EQ(e.counts, std::vector<int64_t>{12 * 128}) << name;
  }
  EXPECT_EQ(im->entries.at("blk.0.ffn_down.weight").n_cols, 512);  // the FFN width
}

TEST(ImatrixFile, CorruptFilesGiveErrorsNotCrashes) {
  const std::string dat = read_file(fixture("trained-c128.dat"));
  // Every cut inside the entries fails with a message; a cut in the trailer (chunk count and
  // dataset name, optional in the oldest files) still reads.
  const size_t trailer = dat.size() - 4 - 4 - 9;
  for (size_t n = 0; n < dat.size(); n += (n < 64 || n > trailer - 16 ? 1 : 97)) {
    Result<Imatrix> r = Imatrix::parse_dat(reinterpret_cast<const uint8_t*>(dat.data()), n, "cut", 128);
    if (n < trailer) {
      ASSERT_FALSE(r.ok()) << n;
      EXPECT_NE(r.message().find("imatrix cut"), std::string::npos) << r.message();
    }
  }
  std::string bad = dat;
  const int32_t huge = 0x7fffffff;
  std::memcpy(bad.data() + 4, &huge, 4);  // the first name's length
  EXPECT_FALSE(Imatrix::parse_dat(reinterpret_cast<const uint8_t*>(bad.data()), bad.size(), "x", 128).ok());

  const std::string dir = temp_dir();
  write_file(dir + "/trunc.gguf", "GGUF\x03\x00\x00\x00garbage");
  Result<Imatrix> g = Imatrix::load(dir + "/trunc.gguf");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.message().find("trunc.gguf"), std::string::npos) << g.message();
  EXPECT_FALSE(Imatrix::load(dir + "/absent.dat").ok());

  // Every cut of a GGUF imatrix fails with the file's name.
  ASSERT_TRUE(random_imatrix(5).save(dir + "/whole.gguf", ImatrixFormat::kGguf).ok());
  const std::string whole = read_file(dir + "/whole.gguf");
  for (size_t n = 0; n < whole.size(); n += 37) {
    write_file(dir + "/cut.gguf", whole.substr(0, n));
    Result<Imatrix> c = Imatrix::load(dir + "/cut.gguf");
    ASSERT_FALSE(c.ok()) << n;
    EXPECT_NE(c.message().find("cut.gguf"), std::string::npos) << c.message();
  }

  // A sum without its count.
  GgufWriter w;
  w.set_string("general.type", "imatrix");
  const std::vector<float> v(8, 1.0f);
  ASSERT_TRUE(w.add_tensor("blk.0.attn_q.weight.in_sum2", DType::F32, {8, 1}, v.data()).ok());
  ASSERT_TRUE(w.write(dir + "/nocount.gguf").ok());
  Result<Imatrix> nc = Imatrix::load(dir + "/nocount.gguf");
  ASSERT_FALSE(nc.ok());
  EXPECT_NE(nc.message().find("no counts"), std::string::npos) << nc.message();
}

TEST(ImatrixFile, RefusesAModel) {
  LL3_REQUIRE_SHARED();
  Result<Imatrix> r = Imatrix::load(test::shared_dir() + "/models/small-llama31-q4_k_m.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("not an imatrix"), std::string::npos) << r.message();
}

// ll3 imatrix on the fixture's model and text, compared with llama-imatrix's file: same weights,
// identical counts, per-weight mean x^2 within `tol` relative L2.
void expect_matches_llama(const std::string& model, const std::string& ref, double tol, const std::string& out) {
  const std::string cmd = test::ll3_binary() + " imatrix -m " + test::shared_dir() + "/models/" + model + " -f " +
                          calibration_text() + " -c 128 --chunks 12 -t 2 -o " + out;
  test::CommandResult r = run_command(cmd + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Result<Imatrix> ours = Imatrix::load(out, 128);
  ASSERT_TRUE(ours.ok()) << ours.message();
  Result<Imatrix> theirs = Imatrix::load(fixture(ref), 128);
  ASSERT_TRUE(theirs.ok()) << theirs.message();
  ASSERT_EQ(ours->entries.size(), theirs->entries.size());
  EXPECT_EQ(ours->chunk_count, 12);
  for (const auto& [name, e] : theirs->entries) {
    ASSERT_EQ(ours->entries.count(name), 1u) << name;
    EXPECT_EQ(ours->entries.at(name).counts, e.counts) << name;
    EXPECT_LT(rel_l2(ours->mean_sq(name), theirs->mean_sq(name)), tol) << name;
  }
}

TEST(ImatrixParity, TrainedModelMatchesLlamaImatrix) {
  LL3_REQUIRE_SHARED();
  expect_matches_llama("trained-llama3-4l-f16.gguf", "trained-c128.dat", 1e-3, temp_dir() + "/trained.gguf");
}

// Random weights over 8-bit activations: small arithmetic differences (Q8_K vs ll3's 8-bit
// rows) grow through the layers, to ~4e-3 in layer 1's ffn_down; layer 0's attention inputs
// agree to 1e-6.
TEST(ImatrixParity, SmallQ4KModelMatchesLlamaImatrix) {
  LL3_REQUIRE_SHARED();
  expect_matches_llama("small-llama31-q4_k_m.gguf", "small31-c128.dat", 1e-2, temp_dir() + "/small.dat");
}

TEST(ImatrixCli, CombinesFilesAndConvertsFormats) {
  const std::string dir = temp_dir();
  const std::string a = fixture("trained-c128.dat");
  test::CommandResult r = run_command(test::ll3_binary() + " imatrix -c 128 --in-file " + a + " --in-file " + a +
                                      " -o " + dir + "/two.gguf 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Result<Imatrix> two = Imatrix::load(dir + "/two.gguf");
  ASSERT_TRUE(two.ok()) << two.message();
  EXPECT_EQ(two->chunk_count, 24);
  EXPECT_EQ(two->entries.at("blk.2.ffn_up.weight").counts, std::vector<int64_t>{2 * 1536});
  // Through GGUF and back to .dat: llama-imatrix's numbers (its entries in hash order, ours sorted).
  r = run_command(test::ll3_binary() + " imatrix -c 128 --in-file " + a + " -o " + dir + "/one.gguf 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(test::ll3_binary() + " imatrix -c 128 --in-file " + dir + "/one.gguf --output-format dat -o " +
                  dir + "/same.bin 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Result<Imatrix> same = Imatrix::load(dir + "/same.bin", 128);
  Result<Imatrix> orig = Imatrix::load(a, 128);
  ASSERT_TRUE(same.ok() && orig.ok());
  EXPECT_EQ(same->datasets, orig->datasets);
  EXPECT_EQ(read_file(dir + "/same.bin").size(), read_file(a).size());
  for (const auto& [name, e] : orig->entries) {
    EXPECT_EQ(same->entries.at(name).counts, e.counts);
    EXPECT_LT(rel_l2(same->mean_sq(name), orig->mean_sq(name)), 1e-7) << name;
  }
  // Only combining, no -c: the GGUF input's chunk size.
  r = run_command(test::ll3_binary() + " imatrix --in-file " + dir + "/two.gguf -o " + dir + "/kept.gguf 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Result<Imatrix> kept = Imatrix::load(dir + "/kept.gguf");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->chunk_size, 128);
  EXPECT_EQ(kept->chunk_count, 24);
  r = run_command(test::ll3_binary() + " imatrix -o " + dir + "/x.gguf 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

// llama.cpp's own tools accept ll3's files (when a build is at LL3_LLAMA_CPP_BIN or
// /tmp/llama.cpp/build/bin; skipped otherwise).
TEST(ImatrixCli, LlamaCppToolsReadOurFiles) {
  LL3_REQUIRE_SHARED();
  const char* env = std::getenv("LL3_LLAMA_CPP_BIN");
  const std::string bin = env != nullptr ? env : "/tmp/llama.cpp/build/bin";
  if (!std::filesystem::exists(bin + "/llama-quantize")) GTEST_SKIP() << "no llama.cpp build at " << bin;
  const std::string dir = temp_dir();
  const std::string models = test::shared_dir() + "/models/";
  test::CommandResult r = run_command(test::ll3_binary() + " imatrix -m " + models + "trained-llama3-4l-f16.gguf -f " +
                                      calibration_text() + " -c 128 --chunks 4 -t 2 -o " + dir + "/ours.dat 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(bin + "/llama-quantize --imatrix " + dir + "/ours.dat " + models + "trained-llama3-4l-f16.gguf " +
                      dir + "/q.gguf Q4_K_M 2 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("loaded 28 importance matrix entries"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ll3
