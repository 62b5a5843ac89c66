// The session file: written atomically, read back exactly, and any damage (a truncation at any
// length, a flipped bit, header fields that do not add up) rejected with a message.
#include "io/session_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "test_support.h"

namespace ll3 {
namespace {

struct Sample {
  SessionFileHeader h;
  std::vector<std::vector<uint8_t>> rows;  // (n_layers * 2 * n_tokens) rows
};

Sample sample() {
  Sample s;
  s.h.model_id = 0xfeedbeef12345678ull;
  s.h.kv_type = 1;
  s.h.n_layers = 3;
  s.h.n_kv_heads = 2;
  s.h.head_dim = 4;
  s.h.row_bytes = 16;
  s.h.id = "user-42";
  s.h.tokens = {128000, 791, 4062, 14198, 39935};
  std::vector<float> noise = test::random_normal(3 * 2 * 5 * 16, 9);
  for (size_t r = 0; r < 3 * 2 * 5; ++r) {
    std::vector<uint8_t> row(16);
    for (size_t i = 0; i < 16; ++i) row[i] = static_cast<uint8_t>(static_cast<int>(noise[r * 16 + i] * 60) & 0xff);
    s.rows.push_back(row);
  }
  return s;
}

std::string write(const Sample& s, const std::string& path) {
  Status st = write_session_file(path, s.h, [&](uint32_t l, bool v, int64_t p) -> const void* {
    return s.rows[(l * 2 + (v ? 1 : 0)) * s.h.tokens.size() + static_cast<size_t>(p)].data();
  });
  EXPECT_TRUE(st.ok()) << st.message();
  return test::read_file(path);
}

std::span<const uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(SessionFile, RoundTripsAndLeavesNoTemporaryFile) {
  const Sample s = sample();
  const std::string dir = test::temp_dir();
  const std::string bytes = write(s, dir + "/a.ll3s");
  EXPECT_FALSE(std::filesystem::exists(dir + "/a.ll3s.tmp"));
  Result<ParsedSessionFile> p = parse_session_file(as_bytes(bytes));
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->header.model_id, s.h.model_id);
  EXPECT_EQ(p->header.id, "user-42");
  EXPECT_EQ(p->header.tokens, s.h.tokens);
  EXPECT_EQ(p->header.n_layers, 3u);
  EXPECT_EQ(p->header.row_bytes, 16u);
  const uint8_t* payload = as_bytes(bytes).data() + p->payload_offset;
  for (size_t r = 0; r < s.rows.size(); ++r) {
    EXPECT_EQ(std::memcmp(payload + r * 16, s.rows[r].data(), 16), 0) << r;
  }
  EXPECT_EQ(bytes.size(), p->payload_offset + s.rows.size() * 16 + 8);
}

TEST(SessionFile, EveryTruncationAndEveryBitFlipIsRejected) {
  const std::string bytes = write(sample(), test::temp_dir() + "/b.ll3s");
  for (size_t n = 0; n < bytes.size(); ++n) {
    Result<ParsedSessionFile> p = parse_session_file(as_bytes(bytes).first(n));
    ASSERT_FALSE(p.ok()) << "truncated to " << n;
    EXPECT_FALSE(p.message().empty());
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] ^= static_cast<char>(1 << (i % 8));
    ASSERT_FALSE(parse_session_file(as_bytes(bad)).ok()) << "bit flipped in byte " << i;
  }
}

// With a valid checksum over bad fields, the header checks still hold.
std::string with_checksum(std::string body) {
  const uint64_t sum = session_body_checksum(as_bytes(body));
  body.append(reinterpret_cast<const char*>(&sum), 8);
  return body;
}

TEST(SessionFile, HeaderFieldsThatDoNotAddUpAreRejected) {
  const std::string bytes = write(sample(), test::temp_dir() + "/c.ll3s");
  const std::string body = bytes.substr(0, bytes.size() - 8);
  const size_t off_version = 8, off_layers = 8 + 4 + 8 + 4, off_row = off_layers + 12, off_idlen = off_row + 8;
  const size_t off_ntok = off_idlen + 4 + 7;
  auto patch = [&](size_t off, const void* v, size_t n) {
    std::string b = body;
    std::memcpy(b.data() + off, v, n);
    return parse_session_file(as_bytes(with_checksum(b)));
  };
  const uint32_t v2 = 2, huge32 = 0xffffffffu, layers4 = 4;
  const uint64_t huge64 = ~0ull, row0 = 0;
  EXPECT_NE(patch(off_version, &v2, 4).message().find("version"), std::string::npos);
  EXPECT_NE(patch(off_layers, &layers4, 4).message().find("does not match"), std::string::npos);
  EXPECT_FALSE(patch(off_layers, &huge32, 4).ok());
  EXPECT_FALSE(patch(off_row, &huge64, 8).ok());
  EXPECT_FALSE(patch(off_row, &row0, 8).ok());
  EXPECT_FALSE(patch(off_idlen, &huge32, 4).ok());
  EXPECT_NE(patch(off_ntok, &huge64, 8).message().find("tokens"), std::string::npos);
  EXPECT_TRUE(parse_session_file(as_bytes(with_checksum(body))).ok());
}

}  // namespace
}  // namespace ll3
