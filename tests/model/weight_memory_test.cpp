// A model read into huge pages computes exactly what the memory-mapped one computes (same
// bytes, same kernels); a 20-token prompt covers the decode and the AMX prompt paths.
#include <gtest/gtest.h>

#include "engine/session.h"
#include "test_support.h"

namespace ll3 {
namespace {

std::vector<float> logits_of(const std::string& path, WeightMemory mode, bool* copied) {
  LoadOptions lo;
  lo.weights = mode;
  auto m = LlamaModel::load(path, lo);
  EXPECT_TRUE(m.ok()) << m.message();
  if (!m.ok()) return {};
  *copied = (*m)->weights_copied();
  SessionOptions so;
  so.context = 64;
  auto s = Session::create(**m, so);
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<int32_t> tokens = {128000, 791, 6864, 315, 9822, 374, 12366, 13, 578, 6864, 315, 9822, 374, 1101,
                                 279, 1888, 3363, 304, 279, 1917};
  EXPECT_TRUE((*s)->eval(tokens, true).ok());
  return (*s)->logits();
}

TEST(WeightMemory, HugePageCopyGivesIdenticalLogits) {
  LL3_REQUIRE_SHARED();
  const std::string path = test::shared_dir() + "/models/small-llama32-mixed.gguf";
  bool copied_map = true, copied_huge = false;
  std::vector<float> a = logits_of(path, WeightMemory::kMap, &copied_map);
  std::vector<float> b = logits_of(path, WeightMemory::kHugePages, &copied_huge);
  EXPECT_FALSE(copied_map);
  EXPECT_TRUE(copied_huge);
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(a, b);
}

}  // namespace
}  // namespace ll3
