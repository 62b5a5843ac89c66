// GgufWriter: every value type and tensors written, then read back with GgufFile.
#include "io/gguf_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "io/gguf.h"
#include "test_support.h"

namespace ll3 {
namespace {

TEST(GgufWriter, EveryValueTypeRoundTrips) {
  GgufWriter w;
  w.set_u8("t.u8", 200);
  w.set_i8("t.i8", -100);
  w.set_u16("t.u16", 60000);
  w.set_i16("t.i16", -30000);
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -2000000000);
  w.set_u64("t.u64", 18000000000000000000ull);
  w.set_i64("t.i64", -9000000000000000000ll);
  w.set_f32("t.f32", 1.25f);
  w.set_f64("t.f64", -2.5e300);
  w.set_bool("t.bool", true);
  w.set_string("t.str", "héllo\nworld");
  w.set_string("t.empty", "");
  w.set_string_array("t.strs", {"a", "", "Ġthe", "<|eot_id|>"});
  w.set_i32_array("t.i32s", {1, -2, 3, 2147483647});
  w.set_f32_array("t.f32s", {0.5f, -1.5f});
  const uint16_t u16s[3] = {1, 2, 65535};
  w.set("t.u16s", GgufWriteValue::numeric_array(GgufType::U16, u16s, 3));
  const uint8_t bools[3] = {1, 0, 1};
  w.set("t.bools", GgufWriteValue::numeric_array(GgufType::BOOL, bools, 3));
  const double f64s[2] = {3.25, -7.0};
  w.set("t.f64s", GgufWriteValue::numeric_array(GgufType::F64, f64s, 2));
  w.set("t.nested", GgufWriteValue::array({GgufWriteValue::string_array({"x", "yz"}),
                                           GgufWriteValue::string_array({"w"})}));
  const int64_t i64s[2] = {-5, 6};
  w.set("t.nested_num",
        GgufWriteValue::array({GgufWriteValue::numeric_array(GgufType::I64, i64s, 2)}));
  w.set_u32("t.replaced", 1);
  w.set_u32("t.replaced", 2);  // replaced in place

  std::string path = test::temp_dir() + "/kv.gguf";
  ASSERT_TRUE(w.write(path).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(std::filesystem::file_size(path), w.file_size());

  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.message();
  const GgufFile& g = **r;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.metadata().size(), 22u);
  EXPECT_EQ(g.metadata()[0].first, "t.u8");
  EXPECT_EQ(g.metadata().back().first, "t.replaced");
  EXPECT_EQ(g.get_int("t.u8"), 200);
  EXPECT_EQ(g.find("t.u8")->type, GgufType::U8);
  EXPECT_EQ(g.get_int("t.i8"), -100);
  EXPECT_EQ(g.find("t.i8")->type, GgufType::I8);
  EXPECT_EQ(g.get_int("t.u16"), 60000);
  EXPECT_EQ(g.get_int("t.i16"), -30000);
  EXPECT_EQ(g.get_int("t.u32"), 4000000000ll);
  EXPECT_EQ(g.find("t.u32")->type, GgufType::U32);
  EXPECT_EQ(g.get_int("t.i32"), -2000000000);
  EXPECT_EQ(g.find("t.u64")->u, 18000000000000000000ull);
  EXPECT_EQ(g.find("t.u64")->type, GgufType::U64);
  EXPECT_EQ(g.get_int("t.i64"), -9000000000000000000ll);
  EXPECT_EQ(g.get_float("t.f32"), 1.25);
  EXPECT_EQ(g.find("t.f32")->type, GgufType::F32);
  EXPECT_EQ(g.get_float("t.f64"), -2.5e300);
  EXPECT_EQ(g.get_bool("t.bool"), true);
  EXPECT_EQ(g.get_string("t.str"), "héllo\nworld");
  EXPECT_EQ(g.get_string("t.empty"), "");
  EXPECT_EQ(g.get_int("t.replaced"), 2);

  const GgufValue* strs = g.find("t.strs");
  ASSERT_NE(strs, nullptr);
  EXPECT_EQ(strs->type, GgufType::ARRAY);
  EXPECT_EQ(strs->elem_type, GgufType::STRING);
  ASSERT_EQ(strs->strings.size(), 4u);
  EXPECT_EQ(strs->strings[2], "Ġthe");
  EXPECT_EQ(strs->strings[3], "<|eot_id|>");

  const GgufValue* i32s = g.find("t.i32s");
  ASSERT_NE(i32s, nullptr);
  EXPECT_EQ(i32s->elem_type, GgufType::I32);
  ASSERT_EQ(i32s->count, 4u);
  EXPECT_EQ(i32s->array_int(1), -2);
  EXPECT_EQ(i32s->array_int(3), 2147483647);
  EXPECT_EQ(g.find("t.f32s")->array_number(1), -1.5);
  EXPECT_EQ(g.find("t.u16s")->array_int(2), 65535);
  EXPECT_EQ(g.find("t.bools")->elem_type, GgufType::BOOL);
  EXPECT_EQ(g.find("t.bools")->count, 3u);
  EXPECT_EQ(g.find("t.f64s")->array_number(0), 3.25);

  const GgufValue* nested = g.find("t.nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->elem_type, GgufType::ARRAY);
  ASSERT_EQ(nested->items.size(), 2u);
  ASSERT_EQ(nested->items[0].strings.size(), 2u);
  EXPECT_EQ(nested->items[0].strings[1], "yz");
  EXPECT_EQ(nested->items[1].strings[0], "w");
  const GgufValue* nn = g.find("t.nested_num");
  ASSERT_EQ(nn->items.size(), 1u);
  EXPECT_EQ(nn->items[0].array_int(0), -5);
  EXPECT_EQ(nn->items[0].array_int(1), 6);
}

TEST(GgufWriter, TensorsAlignedAndDataIntact) {
  for (uint32_t alignment : {32u, 64u}) {
    GgufWriter w;
    if (alignment != 32) {
      ASSERT_TRUE(w.set_alignment(alignment).ok());
    }
    w.set_string("general.architecture", "llama");
    std::vector<float> a = test::random_normal(7 * 3, 1);  // odd sizes force padding
    std::vector<uint16_t> b(5 * 2);
    std::mt19937 rng(2);
    for (auto& x : b) x = static_cast<uint16_t>(rng());
    ASSERT_TRUE(w.add_tensor("a", DType::F32, {7, 3}, a.data()).ok());
    ASSERT_TRUE(w.add_tensor("b", DType::F16, {5, 2}, b.data()).ok());
    int fills = 0;
    ASSERT_TRUE(w.add_tensor("c", DType::BF16, {3, 1, 2, 1}, [&](uint8_t* dst) {
                   ++fills;
                   for (int i = 0; i < 12; ++i) dst[i] = static_cast<uint8_t>(i * 7 + 1);
                 }).ok());
    std::vector<float> d = test::random_normal(1, 3);
    ASSERT_TRUE(w.add_tensor("d", DType::F32, {1}, d.data()).ok());

    std::string path = test::temp_dir() + "/t.gguf";
    ASSERT_TRUE(w.write(path).ok());
    EXPECT_EQ(fills, 1);
    auto r = GgufFile::open(path);
    ASSERT_TRUE(r.ok()) << r.message();
    const GgufFile& g = **r;
    EXPECT_EQ(g.alignment(), alignment);
    EXPECT_EQ(g.data_offset() % alignment, 0u);
    ASSERT_EQ(g.tensors().size(), 4u);
    for (const auto& t : g.tensors()) {
      EXPECT_EQ(t.offset % alignment, 0u) << t.name;
    }
    const GgufTensorInfo* ta = g.find_tensor("a");
    ASSERT_NE(ta, nullptr);
    EXPECT_EQ(ta->type, DType::F32);
    EXPECT_EQ(ta->n_dims, 2);
    EXPECT_EQ(ta->ne[0], 7);
    EXPECT_EQ(ta->ne[1], 3);
    EXPECT_EQ(std::memcmp(ta->data, a.data(), a.size() * 4), 0);
    const GgufTensorInfo* tb = g.find_tensor("b");
    EXPECT_EQ(tb->type, DType::F16);
    EXPECT_EQ(tb->nbytes, 20u);
    EXPECT_EQ(std::memcmp(tb->data, b.data(), 20), 0);
    const GgufTensorInfo* tc = g.find_tensor("c");
    EXPECT_EQ(tc->type, DType::BF16);
    EXPECT_EQ(tc->n_dims, 4);
    EXPECT_EQ(tc->ne[2], 2);
    EXPECT_EQ(tc->data[11], 11 * 7 + 1);
    EXPECT_EQ(std::memcmp(g.find_tensor("d")->data, d.data(), 4), 0);
  }
}

TEST(GgufWriter, RejectsBadInput) {
  GgufWriter w;
  std::vector<float> a(8);
  ASSERT_TRUE(w.add_tensor("a", DType::F32, {8}, a.data()).ok());
  EXPECT_EQ(w.add_tensor("a", DType::F32, {8}, a.data()).message(),
            "gguf writer: duplicate tensor 'a'");
  EXPECT_EQ(w.add_tensor("q", DType::Q8_0, {8}, a.data()).message(),
            "gguf writer: tensor 'q': ne[0]=8 is not a multiple of the q8_0 block size 32");
  EXPECT_EQ(w.add_tensor("z", DType::F32, {4, 0}, a.data()).message(),
            "gguf writer: tensor 'z' has a bad dimension 0");
  EXPECT_EQ(w.add_tensor("five", DType::F32, {1, 1, 1, 1, 1}, a.data()).message(),
            "gguf writer: tensor 'five' has 5 dims (1..4 allowed)");
  EXPECT_EQ(w.set_alignment(48).message(), "gguf writer: alignment 48 is not a power of two >= 8");
  Status s = w.write("/nonexistent-dir/x.gguf");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot create '/nonexistent-dir/x.gguf.tmp'"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace ll3
