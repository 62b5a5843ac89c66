#include "engine/stop_strings.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/utf8.h"

namespace ll3 {
namespace {

// Feeds the pieces; returns everything emitted (plus the flush if no stop) and whether it stopped.
struct Run {
  std::string text;
  bool stopped = false;
  std::vector<std::string> emitted;  // per feed
};
Run feed_all(StopStringMatcher& m, const std::vector<std::string>& pieces) {
  Run r;
  for (const auto& p : pieces) {
    auto step = m.feed(p);
    r.emitted.emplace_back(step.emit);
    r.text += step.emit;
    if (step.stopped) {
      r.stopped = true;
      return r;
    }
  }
  r.text += m.flush();
  return r;
}

TEST(Utf8, CompletePrefix) {
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
  EXPECT_EQ(utf8_complete_prefix("hello"), 5u);
  const std::string euro = "\xE2\x82\xAC";       // U+20AC, 3 bytes
  const std::string emoji = "\xF0\x9F\x98\x80";  // U+1F600, 4 bytes
  EXPECT_EQ(utf8_complete_prefix("a" + euro), 4u);
  EXPECT_EQ(utf8_complete_prefix("a" + euro.substr(0, 1)), 1u);
  EXPECT_EQ(utf8_complete_prefix("a" + euro.substr(0, 2)), 1u);
  EXPECT_EQ(utf8_complete_prefix("ab" + emoji.substr(0, 3)), 2u);
  EXPECT_EQ(utf8_complete_prefix(emoji), 4u);
  EXPECT_EQ(utf8_complete_prefix("\xC3"), 0u);          // first byte of a 2-byte char
  EXPECT_EQ(utf8_complete_prefix("x\xC3\xA9"), 3u);     // é complete
  // Bytes no continuation can repair are passed through, not held forever.
  EXPECT_EQ(utf8_complete_prefix("a\x80"), 2u);         // stray continuation
  EXPECT_EQ(utf8_complete_prefix("a\xFF"), 2u);         // never valid
  EXPECT_EQ(utf8_complete_prefix("a\xC0"), 2u);         // overlong lead
  EXPECT_EQ(utf8_complete_prefix("a\xE0\x80"), 3u);     // overlong 3-byte form
  EXPECT_EQ(utf8_complete_prefix("a\xED\xA0"), 3u);     // surrogate
  EXPECT_EQ(utf8_complete_prefix("a\xF4\x90"), 3u);     // past U+10FFFF
  EXPECT_EQ(utf8_complete_prefix("a\xE0\xA0"), 1u);     // valid start, incomplete
  EXPECT_EQ(utf8_complete_prefix("a\xC3\xA9\xA9"), 4u);  // extra continuation: invalid, released
  EXPECT_EQ(utf8_sequence_length('a'), 1);
  EXPECT_EQ(utf8_sequence_length(0xC3), 2);
  EXPECT_EQ(utf8_sequence_length(0xE2), 3);
  EXPECT_EQ(utf8_sequence_length(0xF0), 4);
  EXPECT_EQ(utf8_sequence_length(0x80), 0);
}

TEST(Utf8, ByteByByteStreamingReassemblesText) {
  const std::string text = "na\xC3\xAFve \xE2\x82\xAC 5 \xF0\x9F\x98\x80!";
  std::string pending, printed;
  for (char c : text) {
    pending += c;
    size_t n = utf8_complete_prefix(pending);
    std::string out = pending.substr(0, n);
    // Every printed chunk starts on a character boundary and ends on one.
    if (!out.empty()) {
      EXPECT_NE(utf8_sequence_length(uint8_t(out[0])), 0);
    }
    EXPECT_EQ(utf8_complete_prefix(out), out.size());
    printed += out;
    pending.erase(0, n);
  }
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(printed, text);
}

TEST(StopStrings, NoStopsPassesThrough) {
  StopStringMatcher m({});
  auto r = feed_all(m, {"Hello", ", ", "world"});
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.text, "Hello, world");
  EXPECT_EQ(r.emitted, (std::vector<std::string>{"Hello", ", ", "world"}));
}

TEST(StopStrings, StopInsideOnePiece) {
  StopStringMatcher m({"STOP"});
  auto r = feed_all(m, {"abc", "dSTOPxyz", "more"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "abcd");
  EXPECT_EQ(m.matched(), "STOP");
  // Later pieces are ignored.
  auto again = m.feed("anything");
  EXPECT_TRUE(again.stopped);
  EXPECT_TRUE(again.emit.empty());
  EXPECT_TRUE(m.flush().empty());
}

TEST(StopStrings, StopSplitAcrossPiecesIsHeldBack) {
  StopStringMatcher m({"</end>"});
  auto s1 = m.feed("text </");
  EXPECT_EQ(s1.emit, "text ");  // "</" might start the stop string
  EXPECT_FALSE(s1.stopped);
  auto s2 = m.feed("en");
  EXPECT_EQ(s2.emit, "");
  auto s3 = m.feed("d> tail");
  EXPECT_TRUE(s3.stopped);
  EXPECT_EQ(s3.emit, "");
  EXPECT_EQ(m.matched(), "</end>");
}

TEST(StopStrings, FalseStartIsReleased) {
  StopStringMatcher m({"</end>"});
  auto s1 = m.feed("a </e");
  EXPECT_EQ(s1.emit, "a ");
  auto s2 = m.feed("x");
  EXPECT_EQ(s2.emit, "</ex");
  // Held text at the end of generation comes out through flush().
  EXPECT_EQ(m.feed("</").emit, "");
  EXPECT_EQ(m.flush(), "</");
  EXPECT_FALSE(m.stopped());
}

TEST(StopStrings, StopThatCompletesFirstWins) {
  // "a" completes before "baa" could; the result must not depend on the piece boundaries.
  for (auto pieces : {std::vector<std::string>{"xbaa"}, std::vector<std::string>{"x", "b", "a", "a"}}) {
    StopStringMatcher m({"baa", "a"});
    auto r = feed_all(m, pieces);
    EXPECT_TRUE(r.stopped);
    EXPECT_EQ(r.text, "xb");
    EXPECT_EQ(m.matched(), "a");
  }
  // Two stops ending at the same byte: the one that starts earlier cuts.
  StopStringMatcher m({"b", "ab"});
  EXPECT_EQ(m.feed("xab").emit, "x");
  EXPECT_EQ(m.matched(), "ab");
}

TEST(StopStrings, EarliestOfSeveralStopsWins) {
  StopStringMatcher m({"world", "lo w", "", "zzz"});
  auto r = feed_all(m, {"hel", "lo wor", "ld"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "hel");
  EXPECT_EQ(m.matched(), "lo w");
}

TEST(StopStrings, OverlappingPrefixes) {
  // "aab" with text "aaab": the first 'a' is safe only once "aaa" shows it cannot start "aab".
  StopStringMatcher m({"aab"});
  auto r = feed_all(m, {"a", "a", "a", "b", "c"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "a");
  EXPECT_EQ(r.emitted, (std::vector<std::string>{"", "", "a", ""}));
}

TEST(StopStrings, MultiByteCharactersSplitAcrossPieces) {
  // A stop string starting with a 3-byte character, fed one byte at a time.
  const std::string stop = "\xE2\x80\x94" "END";  // em dash + END
  StopStringMatcher m({stop});
  std::string text = "caf\xC3\xA9 ok " + stop + " never";
  std::vector<std::string> pieces;
  for (char c : text) pieces.emplace_back(1, c);
  auto r = feed_all(m, pieces);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "caf\xC3\xA9 ok ");
  for (const auto& e : r.emitted) EXPECT_EQ(utf8_complete_prefix(e), e.size()) << e;

  // Without stop strings the matcher still never emits half a character.
  StopStringMatcher plain({});
  std::vector<std::string> out;
  for (const char* piece : {"x\xF0\x9F", "\x98", "\x80y"}) out.emplace_back(plain.feed(piece).emit);
  EXPECT_EQ(out, (std::vector<std::string>{"x", "", "\xF0\x9F\x98\x80y"}));

  // And can be told not to.
  StopStringMatcher raw({}, /*hold_partial_utf8=*/false);
  EXPECT_EQ(raw.feed("x\xF0\x9F").emit, "x\xF0\x9F");
}

TEST(StopStrings, ResetStartsOver) {
  StopStringMatcher m({"##"});
  EXPECT_TRUE(m.feed("a##").stopped);
  m.reset();
  EXPECT_FALSE(m.stopped());
  auto s = m.feed("b#");
  EXPECT_EQ(s.emit, "b");
  EXPECT_EQ(m.flush(), "#");
}

// Random texts over a tiny alphabet (so stop strings and near misses are frequent), cut into
// random pieces: the emitted text must equal the text before the stop string that completes
// first (however the text is cut), and every emission must be a prefix of that.
TEST(StopStrings, RandomSplitsMatchReference) {
  std::mt19937 rng(77);
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<std::string> stops;
    int n_stops = int(rng() % 3);
    for (int k = 0; k < n_stops; ++k) {
      std::string s;
      int len = 1 + int(rng() % 4);
      for (int i = 0; i < len; ++i) s += "ab"[rng() % 2];
      stops.push_back(s);
    }
    std::string text;
    int len = int(rng() % 24);
    for (int i = 0; i < len; ++i) {
      text += rng() % 4 == 0 ? std::string("\xC3\xA9") : std::string(1, "ab"[rng() % 2]);
    }
    // Reference: grow the text byte by byte; the first time some stop strings end here, cut at
    // the earliest start among them.
    size_t first = std::string::npos;
    for (size_t e = 1; e <= text.size() && first == std::string::npos; ++e) {
      for (const auto& s : stops) {
        if (s.size() <= e && text.compare(e - s.size(), s.size(), s) == 0) {
          first = std::min(first, e - s.size());
        }
      }
    }
    const std::string want = first == std::string::npos ? text : text.substr(0, first);

    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size();) {
      size_t k = std::min(text.size() - i, size_t(rng() % 4));
      pieces.push_back(text.substr(i, k));
      i += k;
    }
    StopStringMatcher m(stops);
    auto r = feed_all(m, pieces);
    ASSERT_EQ(r.text, want) << "text=" << text << " iter=" << iter << " stops=" << ::testing::PrintToString(stops) << " pieces=" << ::testing::PrintToString(pieces);
    ASSERT_EQ(r.stopped, first != std::string::npos);
    std::string so_far;
    for (const auto& e : r.emitted) {
      so_far += e;
      ASSERT_EQ(want.compare(0, so_far.size(), so_far), 0);
      ASSERT_EQ(utf8_complete_prefix(so_far), so_far.size());
    }
  }
}

}  // namespace
}  // namespace ll3
