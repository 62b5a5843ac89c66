// MmapFile in both modes: the page-cache map and the huge-page copy hold the same bytes, for
// sizes that are not whole pages and for an empty file; failures name the file.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "core/mmap_file.h"
#include "test_support.h"

namespace ll3 {
namespace {

std::string write_random_file(const std::string& name, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  const std::string path = test::temp_dir() + "/" + name;
  test::write_file(path, bytes);
  return path;
}

TEST(MmapFile, HugePageCopyHoldsTheSameBytesAsTheMap) {
  for (size_t n : {size_t{1}, size_t{4097}, (size_t{3} << 20) + 123}) {
    const std::string path = write_random_file("mmap_" + std::to_string(n), n, static_cast<uint32_t>(n));
    Result<MmapFile> map = MmapFile::open(path, MapMode::kMap);
    Result<MmapFile> copy = MmapFile::open(path, MapMode::kHugeCopy);
    ASSERT_TRUE(map.ok()) << map.message();
    ASSERT_TRUE(copy.ok()) << copy.message();
    EXPECT_FALSE(map->copied());
    EXPECT_TRUE(copy->copied());
    ASSERT_EQ(map->size(), n);
    ASSERT_EQ(copy->size(), n);
    EXPECT_EQ(0, std::memcmp(map->data(), copy->data(), n));
    // Moving keeps the mapping alive and empties the source.
    MmapFile moved = std::move(copy.value());
    EXPECT_EQ(moved.size(), n);
    EXPECT_EQ(copy->size(), 0u);
    EXPECT_EQ(0, std::memcmp(map->data(), moved.data(), n));
    std::remove(path.c_str());
  }
}

TEST(MmapFile, EmptyFileAndErrors) {
  const std::string empty = write_random_file("mmap_empty", 0, 1);
  for (MapMode mode : {MapMode::kMap, MapMode::kHugeCopy}) {
    Result<MmapFile> f = MmapFile::open(empty, mode);
    ASSERT_TRUE(f.ok()) << f.message();
    EXPECT_EQ(f->size(), 0u);
    Result<MmapFile> missing = MmapFile::open(test::temp_dir() + "/no-such-file.gguf", mode);
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.message().find("no-such-file.gguf: cannot open"), std::string::npos) << missing.message();
    Result<MmapFile> dir = MmapFile::open(test::temp_dir(), mode);
    ASSERT_FALSE(dir.ok());
    EXPECT_NE(dir.message().find("not a regular file"), std::string::npos) << dir.message();
  }
}

TEST(MmapFile, AutomaticModeNeverCopiesWhatCannotFit) {
  EXPECT_EQ(auto_map_mode(~uint64_t{0}), MapMode::kMap);
}

}  // namespace
}  // namespace ll3
