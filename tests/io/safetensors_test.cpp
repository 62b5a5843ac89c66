// Safetensors reader: well-formed files (single and sharded) and every kind of hostile header.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "test_support.h"

namespace ll3 {
namespace {

// 8-byte length + header text + `body_bytes` bytes of random data.
std::vector<uint8_t> make_file(const std::string& header, size_t body_bytes, uint32_t seed = 7) {
  std::vector<uint8_t> f(8 + header.size() + body_bytes);
  uint64_t n = header.size();
  std::memcpy(f.data(), &n, 8);
  std::memcpy(f.data() + 8, header.data(), header.size());
  std::mt19937 rng(seed);
  for (size_t i = 0; i < body_bytes; ++i) f[8 + header.size() + i] = static_cast<uint8_t>(rng());
  return f;
}

std::string parse_error(const std::string& header, size_t body_bytes) {
  auto f = make_file(header, body_bytes);
  auto r = SafetensorsFile::parse(f.data(), f.size(), "x.safetensors");
  return r.ok() ? "ok" : r.message();
}

TEST(Safetensors, ParsesTensorsAndMetadata) {
  const std::string header =
      R"({"__metadata__": {"format": "pt"},
          "b": {"dtype": "F16", "shape": [3, 2], "data_offsets": [24, 36]},
          "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
          "c": {"dtype": "BF16", "shape": [4], "data_offsets": [36, 44]},
          "s": {"dtype": "F32", "shape": [], "data_offsets": [44, 48]}})";
  auto f = make_file(header, 48);
  auto r = SafetensorsFile::parse(f.data(), f.size());
  ASSERT_TRUE(r.ok()) << r.message();
  const SafetensorsFile& st = **r;
  EXPECT_EQ(st.metadata().at("format"), "pt");
  ASSERT_EQ(st.tensors().size(), 4u);
  EXPECT_EQ(st.tensors()[0].name, "a");  // data-offset order
  const SafetensorsTensor* b = st.find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->type, DType::F16);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(b->nbytes, 12u);
  EXPECT_EQ(b->data, f.data() + 8 + header.size() + 24);
  EXPECT_EQ(b->shape_string(), "[3, 2]");
  EXPECT_EQ(st.find("c")->type, DType::BF16);
  EXPECT_EQ(st.find("s")->n_elements(), 1);
  EXPECT_EQ(st.find("missing"), nullptr);
}

TEST(Safetensors, HostileFilesGiveExactErrors) {
  const std::string p = "safetensors: x.safetensors: ";
  {
    uint8_t tiny[5] = {1, 2, 3, 4, 5};
    auto r = SafetensorsFile::parse(tiny, 5, "x.safetensors");
    EXPECT_EQ(r.message(), p + "file is 5 bytes, too short for the 8-byte header length");
  }
  {
    auto f = make_file("{}", 0);
    uint64_t big = 1ull << 60;
    std::memcpy(f.data(), &big, 8);
    auto r = SafetensorsFile::parse(f.data(), f.size(), "x.safetensors");
    EXPECT_EQ(r.message(),
              p + "header length 1152921504606846976 is absurd (limit 104857600 bytes)");
    uint64_t past = 100;
    std::memcpy(f.data(), &past, 8);
    r = SafetensorsFile::parse(f.data(), f.size(), "x.safetensors");
    EXPECT_EQ(r.message(), p + "header length 100 extends past end of file (file size 10)");
  }
  EXPECT_EQ(parse_error("{\"a\": ", 0), p + "header is not valid JSON");
  EXPECT_EQ(parse_error("[1, 2]", 0), p + "header is a JSON array, expected an object");
  EXPECT_EQ(parse_error(R"({"a": 3})", 0), p + "tensor 'a': entry is not an object");
  EXPECT_EQ(parse_error(R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", 4),
            p + "tensor 'a': missing or non-string 'dtype'");
  EXPECT_EQ(parse_error(R"({"a": {"dtype": "F32", "data_offsets": [0, 4]}})", 4),
            p + "tensor 'a': missing or non-array 'shape'");
  EXPECT_EQ(parse_error(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4),
            p + "tensor 'a': 'data_offsets' must be an array [begin, end]");
  EXPECT_EQ(parse_error(R"({"pos": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", 8),
            p + "tensor 'pos': unsupported dtype 'I64' (supported: F32, F16, BF16)");
  EXPECT_EQ(parse_error(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4),
            p + "tensor 'a': shape has a dimension that is not a non-negative integer");
  EXPECT_EQ(parse_error(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296],
                               "data_offsets": [0, 4]}})",
                        4),
            p + "tensor 'a': shape [4294967296,4294967296] overflows");
  EXPECT_EQ(parse_error(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", 8),
            p + "tensor 'a': data_offsets begin 8 is after end 4");
  EXPECT_EQ(parse_error(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, -4]}})", 8),
            p + "tensor 'a': data_offsets are not non-negative integers");
  EXPECT_EQ(parse_error(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 12),
            p + "tensor 'a': data_offsets [0, 16] extend past end of file (data section 12 bytes)");
  EXPECT_EQ(parse_error(R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})", 16),
            p + "tensor 'a': holds 12 bytes but shape [2, 2] of F32 needs 16");
  EXPECT_EQ(parse_error(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                           "b": {"dtype": "F16", "shape": [4], "data_offsets": [4, 12]}})",
                        12),
            p + "tensors 'a' [0, 8] and 'b' [4, 12] overlap");
  EXPECT_EQ(parse_error(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                           "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                        8),
            p + "duplicate tensor 'a'");
  EXPECT_EQ(parse_error(R"({"__metadata__": [1]})", 0), p + "__metadata__ is not an object");
  EXPECT_EQ(parse_error(R"({"__metadata__": {"k": 1}})", 0),
            p + "__metadata__ entry 'k' is not a string");
}

TEST(Safetensors, RandomCorruptionNeverCrashes) {
  const std::string header =
      R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
          "b": {"dtype": "BF16", "shape": [4], "data_offsets": [24, 32]}})";
  auto good = make_file(header, 32);
  std::mt19937 rng(11);
  int ok = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    auto f = good;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) f[rng() % f.size()] = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) f.resize(rng() % f.size());
    auto r = SafetensorsFile::parse(f.data(), f.size());
    if (r.ok()) {
      ++ok;
      for (const auto& t : (*r)->tensors()) {
        ASSERT_GE(t.data, f.data());
        ASSERT_LE(t.data + t.nbytes, f.data() + f.size());
      }
    } else {
      EXPECT_EQ(r.message().rfind("safetensors: <buffer>: ", 0), 0u) << r.message();
    }
  }
  EXPECT_GT(ok, 0);
}

SafetensorsWriteTensor f32_tensor(const std::string& name, std::vector<int64_t> shape,
                                  const std::vector<float>& v) {
  return {name, DType::F32, std::move(shape),
          [&v](uint8_t* dst) { std::memcpy(dst, v.data(), v.size() * 4); }};
}

TEST(Safetensors, WriteThenOpenDirSingleAndSharded) {
  auto a = test::random_normal(6, 1), b = test::random_normal(10, 2), c = test::random_normal(4, 3);
  // Single file.
  std::string dir1 = test::temp_dir();
  ASSERT_TRUE(write_safetensors(dir1 + "/model.safetensors",
                                {f32_tensor("a", {2, 3}, a), f32_tensor("b", {10}, b)},
                                {{"format", "pt"}})
                  .ok());
  auto m1 = SafetensorsModel::open_dir(dir1);
  ASSERT_TRUE(m1.ok()) << m1.message();
  EXPECT_EQ((*m1)->n_tensors(), 2u);
  const SafetensorsTensor* ta = (*m1)->find_tensor("a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(ta->data, a.data(), 24), 0);
  EXPECT_EQ((*m1)->shards()[0]->metadata().at("format"), "pt");

  // Two shards and an index.
  std::string dir2 = test::temp_dir();
  ASSERT_TRUE(write_safetensors(dir2 + "/model-00001-of-00002.safetensors",
                                {f32_tensor("a", {2, 3}, a), f32_tensor("c", {4}, c)})
                  .ok());
  ASSERT_TRUE(
      write_safetensors(dir2 + "/model-00002-of-00002.safetensors", {f32_tensor("b", {10}, b)})
          .ok());
  test::write_file(dir2 + "/model.safetensors.index.json",
                   R"({"metadata": {"total_size": 80}, "weight_map": {
                      "a": "model-00001-of-00002.safetensors",
                      "c": "model-00001-of-00002.safetensors",
                      "b": "model-00002-of-00002.safetensors"}})");
  auto m2 = SafetensorsModel::open_dir(dir2);
  ASSERT_TRUE(m2.ok()) << m2.message();
  EXPECT_EQ((*m2)->shards().size(), 2u);
  EXPECT_EQ((*m2)->n_tensors(), 3u);
  EXPECT_EQ(std::memcmp((*m2)->find_tensor("b")->data, b.data(), 40), 0);
  EXPECT_EQ(std::memcmp((*m2)->find_tensor("c")->data, c.data(), 16), 0);
  EXPECT_EQ((*m2)->find_tensor("zz"), nullptr);

  // The index names a tensor its shard does not hold.
  test::write_file(dir2 + "/model.safetensors.index.json",
                   R"({"weight_map": {"a": "model-00002-of-00002.safetensors"}})");
  EXPECT_EQ(SafetensorsModel::open_dir(dir2).message(),
            "safetensors: " + dir2 +
                ": weight_map places 'a' in model-00002-of-00002.safetensors, which does not "
                "hold it");
  test::write_file(dir2 + "/model.safetensors.index.json",
                   R"({"weight_map": {"a": "../model.safetensors"}})");
  EXPECT_EQ(SafetensorsModel::open_dir(dir2).message(),
            "safetensors: " + dir2 +
                "/model.safetensors.index.json: weight_map entry 'a' names "
                "shard '../model.safetensors', which is not a file name in "
                "the directory");
  test::write_file(dir2 + "/model.safetensors.index.json", R"({"weight_map": {
      "a": "model-00001-of-00002.safetensors", "x": "model-00002-of-00002.safetensors"}})");
  // Same tensor in two shards.
  ASSERT_TRUE(
      write_safetensors(dir2 + "/model-00002-of-00002.safetensors", {f32_tensor("a", {2, 3}, a)})
          .ok());
  EXPECT_EQ(SafetensorsModel::open_dir(dir2).message(),
            "safetensors: " + dir2 +
                ": tensor 'a' appears in more than one shard (second: "
                "model-00002-of-00002.safetensors)");

  std::string empty = test::temp_dir();
  EXPECT_EQ(SafetensorsModel::open_dir(empty).message(),
            "safetensors: " + empty + ": no model.safetensors or model.safetensors.index.json");
}

}  // namespace
}  // namespace ll3
