// Dequantization of every tensor of the shared quantized GGUF files must reproduce llama.cpp's
// float32 values bit for bit: compare the SHA-256 of our dequantized bytes (and the first values)
// with golden/<model>.dequant.json, for the reference kernels and the dispatched (SIMD) ones.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "io/gguf.h"
#include "kernels/type_traits.h"
#include "test_support.h"

namespace ll3 {
namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

void check_model(const std::string& model, bool reference) {
  const std::string dir = test::shared_dir() + "/models/";
  auto file = GgufFile::open(dir + model + ".gguf");
  ASSERT_TRUE(file.ok()) << file.message();
  const auto golden = nlohmann::json::parse(test::read_file(dir + "golden/" + model + ".dequant.json"));
  ASSERT_EQ(golden.size(), (*file)->tensors().size());

  std::vector<float> row;
  for (const GgufTensorInfo& t : (*file)->tensors()) {
    SCOPED_TRACE(t.name + " " + std::string(dtype_name(t.type)));
    ASSERT_TRUE(golden.contains(t.name));
    const auto& g = golden[t.name];
    EXPECT_EQ(upper(dtype_name(t.type)), g["type"].get<std::string>());
    for (int d = 0; d < t.n_dims; ++d) EXPECT_EQ(t.ne[d], g["ne"][d].get<int64_t>());

    const TypeTraits* tt = reference ? type_traits_ref(t.type) : type_traits(t.type);
    ASSERT_NE(tt, nullptr);
    const int64_t n0 = t.ne[0];
    const int64_t rows = t.n_elements() / n0;
    const size_t row_bytes = dtype_row_bytes(t.type, n0);
    ASSERT_EQ(row_bytes * rows, t.nbytes);
    row.resize(n0);
    Sha256 sha;
    std::vector<float> first;
    for (int64_t r = 0; r < rows; ++r) {
      tt->to_float(t.data + r * row_bytes, row.data(), n0);
      sha.update(row.data(), n0 * sizeof(float));  // little-endian host
      for (int64_t j = 0; j < n0 && first.size() < 64; ++j) first.push_back(row[j]);
    }
    const auto& gv = g["first_values"];
    for (size_t j = 0; j < gv.size() && j < first.size(); ++j) {
      ASSERT_EQ(first[j], gv[j].get<float>()) << "value " << j;
    }
    EXPECT_EQ(sha.hex_digest(), g["sha256_f32le"].get<std::string>());
  }
}

TEST(QuantGolden, Q4KMReference) {
  LL3_REQUIRE_SHARED();
  check_model("small-llama31-q4_k_m", true);
}
TEST(QuantGolden, MixedReference) {
  LL3_REQUIRE_SHARED();
  check_model("small-llama32-mixed", true);
}
TEST(QuantGolden, Q4KMDispatched) {
  LL3_REQUIRE_SHARED();
  check_model("small-llama31-q4_k_m", false);
}
TEST(QuantGolden, MixedDispatched) {
  LL3_REQUIRE_SHARED();
  check_model("small-llama32-mixed", false);
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // Incremental updates across block boundaries give the same digest as one update.
  std::string big(1000, 'a');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  Sha256 h;
  for (size_t i = 0; i < big.size(); i += 7) h.update(big.data() + i, std::min<size_t>(7, big.size() - i));
  EXPECT_EQ(h.hex_digest(), sha256_hex(big));
}

}  // namespace
}  // namespace ll3
