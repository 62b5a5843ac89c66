// The GGUF reader on valid files, and every kind of malformed file with its exact error.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "io/gguf.h"
#include "test_support.h"

namespace ll3 {
namespace {

// Builds GGUF bytes field by field, so tests can write exactly the malformation they need.
class Bytes {
 public:
  Bytes& u32(uint32_t v) { return raw(&v, 4); }
  Bytes& u64(uint64_t v) { return raw(&v, 8); }
  Bytes& f32(float v) { return raw(&v, 4); }
  Bytes& str(std::string_view s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  Bytes& raw(const void* p, size_t n) {
    b.append(static_cast<const char*>(p), n);
    return *this;
  }
  Bytes& pad_to(size_t align) {
    b.append((align - b.size() % align) % align, '\0');
    return *this;
  }
  std::string b;
};

constexpr uint32_t kStr = 8, kArr = 9, kU32 = 4, kI32 = 5;

Bytes header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
  Bytes h;
  h.raw("GGUF", 4).u32(version).u64(n_tensors).u64(n_kv);
  return h;
}

Result<std::unique_ptr<GgufFile>> parse(const std::string& b) {
  return GgufFile::parse(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "t.gguf");
}

std::string error_of(const std::string& b) {
  auto r = parse(b);
  EXPECT_FALSE(r.ok());
  return r.message();
}

// A valid file: 3 metadata keys (string, u32, nested array) and 2 tensors.
std::string valid_file() {
  Bytes f = header(2, 3);
  f.str("general.architecture").u32(kStr).str("llama");
  f.str("llama.block_count").u32(kU32).u32(7);
  f.str("nested").u32(kArr).u32(kArr).u64(2);
  f.u32(kI32).u64(2).u32(1).u32(2);
  f.u32(kStr).u64(1).str("x");
  f.str("a").u32(2).u64(4).u64(2).u32(0).u64(0);   // f32 [4, 2] at 0
  f.str("b").u32(1).u64(8).u32(1).u64(32);          // f16 [8] at 32
  f.pad_to(32);
  std::mt19937 rng(5);
  for (int i = 0; i < 8; ++i) f.f32(static_cast<float>(rng()) / 4e9f);
  for (int i = 0; i < 8; ++i) f.raw("\x00\x3c", 2);  // 1.0 in f16
  return f.b;
}

TEST(GgufReader, ParsesValidFile) {
  std::string b = valid_file();
  auto r = parse(b);
  ASSERT_TRUE(r.ok()) << r.message();
  const GgufFile& f = **r;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(*f.get_string("general.architecture"), "llama");
  EXPECT_EQ(*f.get_int("llama.block_count"), 7);
  const GgufValue* n = f.find("nested");
  ASSERT_NE(n, nullptr);
  ASSERT_EQ(n->items.size(), 2u);
  EXPECT_EQ(*n->items[0].array_int(1), 2);
  EXPECT_EQ(n->items[1].strings.at(0), "x");
  ASSERT_EQ(f.tensors().size(), 2u);
  const GgufTensorInfo* a = f.find_tensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ne[0], 4);
  EXPECT_EQ(a->ne[1], 2);
  EXPECT_EQ(a->nbytes, 32u);
  EXPECT_EQ(a->data, reinterpret_cast<const uint8_t*>(b.data()) + f.data_offset());
  EXPECT_EQ(f.find_tensor("b")->data, a->data + 32);
  EXPECT_EQ(f.data_offset() % 32, 0u);
}

TEST(GgufReader, EveryTruncationIsAnErrorNotACrash) {
  std::string b = valid_file();
  for (size_t n = 0; n < b.size(); ++n) {
    auto r = parse(b.substr(0, n));
    EXPECT_FALSE(r.ok()) << "prefix of " << n << " bytes parsed";
  }
  EXPECT_EQ(error_of(b.substr(0, 10)),
            "gguf: t.gguf: unexpected end of file reading tensor count at offset 8 (need 8 bytes, 2 left)");
  EXPECT_EQ(error_of(b.substr(0, b.size() - 1)),
            "gguf: t.gguf: tensor 'b' extends past end of file (offset 32 in the data section, size 16, data section "
            "47 bytes)");
}

TEST(GgufReader, BadMagicAndVersion) {
  EXPECT_EQ(error_of(std::string("GGML\3\0\0\0", 8) + std::string(16, '\0')),
            "gguf: t.gguf: not a GGUF file (magic 0x4c4d4747)");
  EXPECT_EQ(error_of(header(0, 0, 1).b), "gguf: t.gguf: unsupported GGUF version 1 (ll3 reads versions 2 and 3)");
  EXPECT_EQ(error_of(header(0, 0, 4).b), "gguf: t.gguf: unsupported GGUF version 4 (ll3 reads versions 2 and 3)");
  EXPECT_TRUE(parse(header(0, 0, 2).b).ok());
}

TEST(GgufReader, AbsurdCounts) {
  EXPECT_EQ(error_of(header(0, 1ull << 60).b), "gguf: t.gguf: metadata count 1152921504606846976 is more than the file can hold");
  EXPECT_EQ(error_of(header(~0ull, 0).b), "gguf: t.gguf: tensor count 18446744073709551615 is more than the file can hold");
  Bytes s = header(0, 1);
  s.u64(1ull << 62).raw("abc", 3);
  s.b.append(29, ' ');
  EXPECT_EQ(error_of(s.b),
            "gguf: t.gguf: metadata entry 0: metadata key at offset 24 has length 4611686018427387904, past the end of "
            "the file (32 bytes left)");
  Bytes a = header(0, 1);
  a.str("k").u32(kArr).u32(kU32).u64(1ull << 61).u32(0).u32(0).u32(0).u32(0);
  EXPECT_EQ(error_of(a.b),
            "gguf: t.gguf: metadata key 'k': array at offset 41 claims 2305843009213693952 elements of 4 bytes, past "
            "the end of the file");
  Bytes sa = header(0, 1);
  sa.str("k").u32(kArr).u32(kStr).u64(1000).str("only one");
  EXPECT_EQ(error_of(sa.b),
            "gguf: t.gguf: metadata key 'k': string array at offset 41 claims 1000 strings, more than the file can hold");
}

TEST(GgufReader, DeepNestingAndUnknownTypes) {
  Bytes d = header(0, 1);
  d.str("k").u32(kArr);
  for (int i = 0; i < 20; ++i) d.u32(kArr).u64(1);
  d.b.append(64, '\0');
  EXPECT_EQ(error_of(d.b), "gguf: t.gguf: metadata key 'k': arrays nested deeper than 8 at offset 133");
  Bytes u = header(0, 1);
  u.str("k").u32(77).u32(0);
  EXPECT_EQ(error_of(u.b), "gguf: t.gguf: metadata key 'k': unknown value type 77");
}

TEST(GgufReader, DuplicateKeysAndTensors) {
  Bytes k = header(0, 2);
  k.str("a").u32(kU32).u32(1).str("a").u32(kU32).u32(2);
  EXPECT_EQ(error_of(k.b), "gguf: t.gguf: duplicate metadata key 'a' at offset 41");
  Bytes t = header(2, 0);
  t.str("w").u32(1).u64(4).u32(0).u64(0).str("w").u32(1).u64(4).u32(0).u64(32).pad_to(32);
  t.b.append(64, '\1');
  EXPECT_EQ(error_of(t.b), "gguf: t.gguf: duplicate tensor name 'w'");
}

TEST(GgufReader, BadTensorInfos) {
  auto one = [](uint32_t n_dims, std::vector<uint64_t> ne, uint32_t type, uint64_t offset, size_t data = 64) {
    Bytes t = header(1, 0);
    t.str("blk.0.attn_q.weight").u32(n_dims);
    for (uint64_t x : ne) t.u64(x);
    t.u32(type).u64(offset).pad_to(32);
    t.b.append(data, '\1');
    return t.b;
  };
  EXPECT_EQ(error_of(one(5, {1, 1, 1, 1, 1}, 0, 0)),
            "gguf: t.gguf: tensor 'blk.0.attn_q.weight': has 5 dimensions (must be 1 to 4)");
  EXPECT_EQ(error_of(one(1, {4}, 99, 0)), "gguf: t.gguf: tensor 'blk.0.attn_q.weight': has unknown type id 99");
  EXPECT_EQ(error_of(one(2, {1ull << 40, 1ull << 40}, 0, 0)),
            "gguf: t.gguf: tensor 'blk.0.attn_q.weight': element count overflows");
  EXPECT_EQ(error_of(one(1, {~0ull}, 0, 0)),
            "gguf: t.gguf: tensor 'blk.0.attn_q.weight': dimension 0 is negative or too large");
  EXPECT_EQ(error_of(one(1, {48}, 12 /* q4_k */, 0)),
            "gguf: t.gguf: tensor 'blk.0.attn_q.weight': row length 48 is not a multiple of the q4_k block size 256");
  EXPECT_EQ(error_of(one(1, {4}, 0, 7)),
            "gguf: t.gguf: tensor 'blk.0.attn_q.weight': offset 7 is not a multiple of the alignment 32");
  EXPECT_EQ(error_of(one(2, {64, 64}, 0, 0)),
            "gguf: t.gguf: tensor 'blk.0.attn_q.weight' extends past end of file (offset 0 in the data section, size "
            "16384, data section 64 bytes)");
  EXPECT_EQ(error_of(one(1, {8}, 0, ~0ull - 31)),
            "gguf: t.gguf: tensor 'blk.0.attn_q.weight' extends past end of file (offset 18446744073709551584 in the "
            "data section, size 32, data section 64 bytes)");
}

TEST(GgufReader, Alignment) {
  Bytes b = header(1, 1);
  b.str("general.alignment").u32(kU32).u32(48);
  EXPECT_EQ(error_of(b.b), "gguf: t.gguf: general.alignment must be a power of two up to 1 MiB");
  Bytes g = header(1, 1);
  g.str("general.alignment").u32(kU32).u32(64);
  g.str("w").u32(1).u64(4).u32(0).u64(64).pad_to(64);
  g.b.append(128, '\2');
  auto r = parse(g.b);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ((*r)->alignment(), 64u);
  EXPECT_EQ((*r)->data_offset() % 64, 0u);
  EXPECT_EQ((*r)->find_tensor("w")->data, reinterpret_cast<const uint8_t*>(g.b.data()) + (*r)->data_offset() + 64);
}

TEST(GgufReader, RandomCorruptionNeverCrashes) {
  std::string base = valid_file();
  std::mt19937 rng(42);
  for (int i = 0; i < 20000; ++i) {
    std::string b = base;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    auto r = parse(b);
    if (r.ok()) {
      for (const GgufTensorInfo& t : (*r)->tensors()) {
        ASSERT_LE(t.data + t.nbytes, reinterpret_cast<const uint8_t*>(b.data()) + b.size());
      }
    }
  }
}

TEST(GgufReader, OpensRealFiles) {
  LL3_REQUIRE_SHARED();
  auto r = GgufFile::open(test::shared_dir() + "/models/small-llama32-mixed.gguf");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ((*r)->find("tokenizer.ggml.tokens")->strings.size(), 128256u);
  EXPECT_EQ((*r)->find("tokenizer.ggml.merges")->strings.size(), 280147u);
  auto missing = GgufFile::open("/nonexistent/model.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.message(), "gguf: /nonexistent/model.gguf: cannot open: No such file or directory");
}

}  // namespace
}  // namespace ll3
