// Self-contained tests (no shared data): UTF-8 helpers, BPE mechanics on a small synthetic
// vocabulary, the tokenizer.json loader's error handling, and the streaming detokenizer.
#include <gtest/gtest.h>

#include <random>

#include "test_support.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer_shared.h"

namespace ll3 {
namespace {

using json = nlohmann::json;

// A byte-level vocabulary: the 256 byte tokens, then `extra` tokens, with `merges`.
json synthetic_tokenizer_json(const std::vector<std::string>& extra,
                              const std::vector<std::string>& merges) {
  json vocab = json::object();
  int id = 0;
  for (int b = 0; b < 256; ++b) vocab[std::string(byte_to_utf8(uint8_t(b)))] = id++;
  for (const auto& t : extra) vocab[t] = id++;
  json j;
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", true}};
  j["added_tokens"] = json::array({{{"id", id}, {"content", "<|end|>"}, {"special", true}},
                                   {{"id", id + 1}, {"content", "<user>"}, {"special", false}}});
  return j;
}

std::unique_ptr<Tokenizer> synthetic(const std::vector<std::string>& extra,
                                     const std::vector<std::string>& merges) {
  auto v = load_vocab_from_hf_json(synthetic_tokenizer_json(extra, merges).dump(), "");
  EXPECT_TRUE(v.ok()) << v.message();
  auto t = Tokenizer::create(std::move(*v));
  EXPECT_TRUE(t.ok()) << t.message();
  return std::move(*t);
}

TEST(Utf8, ByteMapRoundTripsAndIsPrintable) {
  for (int b = 0; b < 256; ++b) {
    uint32_t cp = byte_to_codepoint(uint8_t(b));
    EXPECT_EQ(codepoint_to_byte(cp), b);
    EXPECT_GT(cp, 32u);
  }
  EXPECT_EQ(byte_to_codepoint(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(byte_to_codepoint('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(byte_to_codepoint('A'), uint32_t('A'));
  EXPECT_EQ(codepoint_to_byte(0x4E2D), -1);
}

TEST(Utf8, StrictValidation) {
  EXPECT_TRUE(utf8_is_valid("plain ascii, long enough for the fast path"));
  EXPECT_TRUE(utf8_is_valid("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF"));
  for (const char* bad :
       {"\x80", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80",
        "\xF5\x80\x80\x80", "\xFF", "\xC3", "\xE2\x82", "abc\xF0\x9F\x98"}) {
    EXPECT_FALSE(utf8_is_valid(bad)) << bad;
  }
}

TEST(Utf8, LossyMatchesTheMaximalSubpartRule) {
  auto lossy = [](std::string s) {
    std::string o;
    append_utf8_lossy(o, s);
    return o;
  };
  const std::string R = "\xEF\xBF\xBD";
  EXPECT_EQ(lossy("a\xE2\x82"
                  "b"),
            "a" + R + "b");  // truncated sequence: one U+FFFD
  EXPECT_EQ(lossy("\xF0\x9F\x98"), R);
  EXPECT_EQ(lossy("\xC0\x80"), R + R);          // C0 can never start a sequence
  EXPECT_EQ(lossy("\xED\xA0\x80"), R + R + R);  // surrogate: ED then two lone bytes
  EXPECT_EQ(lossy("\xF4\x90\x80\x80"), R + R + R + R);
  EXPECT_EQ(lossy("\xE2\x82\xAC"), "\xE2\x82\xAC");
}

TEST(Utf8, CompletePrefixHoldsBackOnlyAnUnfinishedTail) {
  EXPECT_EQ(utf8_complete_prefix("ab\xE2\x82"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xE2\x82\xAC"), 5u);
  EXPECT_EQ(utf8_complete_prefix("ab\xE2\x41"), 4u);  // broken: nothing to wait for
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(utf8_complete_prefix("\xFF"), 1u);
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
}

TEST(PreTokenizer, SplitsLikeTheLlama3Regex) {
  auto pre = PreTokenizer::create();
  ASSERT_TRUE(pre.ok());
  auto split = [&](const std::string& s) {
    std::vector<std::pair<uint32_t, uint32_t>> r;
    (*pre)->split(s, r);
    std::vector<std::string> out;
    for (auto [b, e] : r) out.push_back(s.substr(b, e - b));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(split("I'M here"), (V{"I", "'M", " here"}));
  EXPECT_EQ(split("12345"), (V{"123", "45"}));
  EXPECT_EQ(split("a  \n\n b"), (V{"a", "  \n\n", " b"}));
  EXPECT_EQ(split("x   y"), (V{"x", "  ", " y"}));
  EXPECT_EQ(split("end  "), (V{"end", "  "}));
  EXPECT_EQ(split("...!?\n"), (V{"...!?\n"}));
  EXPECT_EQ(split("$x"), (V{"$x"}));
  // White_Space, not PCRE2's \s: U+0085 is a space, U+180E and U+FEFF are not.
  EXPECT_EQ(split("a\xC2\x85'tb"), (V{"a", "\xC2\x85", "'t", "b"}));
  EXPECT_EQ(split("\xEF\xBB\xBF"
                  "abc"),
            (V{"\xEF\xBB\xBF"
               "abc"}));
  EXPECT_EQ(split("x\xE1\xA0\x8Ey"), (V{"x",
                                        "\xE1\xA0\x8E"
                                        "y"}));
  // Unicode letters and numbers, not ASCII classes.
  EXPECT_EQ(split("日本語١٢٣٤"), (V{"日本語", "١٢٣", "٤"}));
}

TEST(Bpe, MergesByRankLeftmostFirst) {
  // ranks: "a b" 0, "ab c" 1, "b c" 2, "c c" 3
  auto t = synthetic({"ab", "abc", "bc", "cc", "xyz"}, {"a b", "ab c", "b c", "c c"});
  auto id = [&](const char* s) { return t->token_id(s); };
  EXPECT_EQ(t->encode("abc", false, false), std::vector<int32_t>{id("abc")});
  EXPECT_EQ(t->encode("bcc", false, false), (std::vector<int32_t>{id("bc"), id("c")}));
  // equal ranks: the leftmost pair merges first
  EXPECT_EQ(t->encode("ccc", false, false), (std::vector<int32_t>{id("cc"), id("c")}));
  // a word that is itself a token is taken whole, merges or not (ignore_merges)
  EXPECT_EQ(t->encode("xyz", false, false), std::vector<int32_t>{id("xyz")});
  EXPECT_EQ(t->encode("xy", false, false), (std::vector<int32_t>{id("x"), id("y")}));
  EXPECT_EQ(t->decode(t->encode("abcabc xyz", false, false)), "abcabc xyz");
}

TEST(Bpe, SpecialAndUserDefinedTokens) {
  auto t = synthetic({}, {});
  int32_t end = t->token_id("<|end|>"), user = t->token_id("<user>");
  ASSERT_GE(end, 256);
  EXPECT_EQ(t->encode("<|end|>", false, true), std::vector<int32_t>{end});
  EXPECT_EQ(t->encode("<|end|>", false, false).size(), 7u);  // seven byte tokens
  // user-defined tokens are recognised either way (llama.cpp's rule)
  EXPECT_EQ(t->encode("<user>", false, false), std::vector<int32_t>{user});
  EXPECT_TRUE(t->is_control(end));
  EXPECT_FALSE(t->is_control(user));
  EXPECT_TRUE(t->is_eog(t->eos_id()) || t->eos_id() < 0);
}

TEST(VocabJson, RejectsMalformedInputWithAMessage) {
  for (const char* bad :
       {"", "{", "[]", "{\"model\": 1}", "{\"model\": {\"type\": \"WordPiece\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 99999999}}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": 3}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [[1, 2]]}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"x\"}}}"}) {
    auto v = load_vocab_from_hf_json(bad, "");
    EXPECT_FALSE(v.ok()) << bad;
    EXPECT_FALSE(v.message().empty());
  }
  // A vocabulary without every byte token cannot encode arbitrary text.
  auto v =
      load_vocab_from_hf_json(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})", "");
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(Tokenizer::create(std::move(*v)).ok());
  EXPECT_FALSE(load_vocab_from_hf("/nonexistent/dir").ok());
}

TEST(VocabJson, NewMergeFormatAndConfig) {
  json j = synthetic_tokenizer_json({"ab"}, {});
  j["model"]["merges"] = json::array({json::array({"a", "b"})});
  std::string config = R"({"bos_token": {"content": "<|end|>"}, "eos_token": "<|end|>",
                           "add_bos_token": false, "chat_template": [{"name": "default", "template": "T"}]})";
  auto v = load_vocab_from_hf_json(j.dump(), config);
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_EQ(v->merges, std::vector<std::string>{"a b"});
  EXPECT_EQ(v->bos_id, 257);  // 256 bytes, "ab", then <|end|>
  EXPECT_EQ(v->eos_id, 257);
  EXPECT_FALSE(v->add_bos);
  EXPECT_EQ(v->chat_template, "T");
  auto t = Tokenizer::create(std::move(*v));
  ASSERT_TRUE(t.ok());
  // add_bos is the file's advice; encode() does what the caller asks.
  EXPECT_EQ((*t)->encode("ab", true, false), (std::vector<int32_t>{257, 256}));
  EXPECT_EQ((*t)->encode("ab", false, false), std::vector<int32_t>{256});
}

TEST(StreamDecoder, NeverEmitsHalfACharacter) {
  auto t = synthetic({}, {});
  auto byte_id = [&](uint8_t b) { return t->token_id(byte_to_utf8(b)); };
  StreamDecoder sd(*t);
  EXPECT_EQ(sd.push(byte_id(0xE2)), "");
  EXPECT_EQ(sd.push(byte_id(0x82)), "");
  EXPECT_EQ(sd.push(byte_id(0xAC)), "\xE2\x82\xAC");
  EXPECT_EQ(sd.push(byte_id('x')), "x");
  EXPECT_EQ(sd.push(byte_id(0xFF)), "\xEF\xBF\xBD");  // can never complete: out at once
  EXPECT_EQ(sd.push(byte_id(0xF0)), "");
  EXPECT_EQ(sd.push(byte_id('y')), "\xEF\xBF\xBDy");  // the F0 is now known broken
  EXPECT_EQ(sd.push(byte_id(0xC3)), "");
  EXPECT_EQ(sd.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(sd.flush(), "");
}

TEST(StreamDecoder, ConcatenationEqualsLossyDecodeOnRandomBytes) {
  auto t = synthetic({}, {});
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> ids;
    std::string bytes;
    int n = 1 + int(rng() % 20);
    for (int k = 0; k < n; ++k) {
      // bias toward bytes that make multi-byte sequences
      uint8_t b = rng() % 3 == 0 ? uint8_t(rng() % 128) : uint8_t(0x80 + rng() % 128);
      ids.push_back(t->token_id(byte_to_utf8(b)));
      bytes.push_back(char(b));
    }
    StreamDecoder sd(*t);
    std::string streamed;
    for (int32_t id : ids) {
      std::string chunk = sd.push(id);
      EXPECT_TRUE(utf8_is_valid(chunk));
      streamed += chunk;
    }
    streamed += sd.flush();
    std::string want;
    append_utf8_lossy(want, bytes);
    ASSERT_EQ(streamed, want) << trial;
  }
}

// Against transformers.js's decoder (decode_cases.jsonl): token bytes, then UTF-8 decoding with
// U+FFFD replacement.
TEST(StreamDecoder, MatchesReferenceDecoding) {
  LL3_REQUIRE_SHARED();
  const Tokenizer* t = test::hf_tokenizer();
  ASSERT_NE(t, nullptr);
  auto cases = test::read_jsonl(test::fixture_path("decode_cases.jsonl"));
  ASSERT_GE(cases.size(), 500u);
  for (const auto& c : cases) {
    auto ids = c["ids"].get<std::vector<int32_t>>();
    std::string want = c["text"].get<std::string>();
    std::string lossy;
    append_utf8_lossy(lossy, t->decode(ids));
    ASSERT_EQ(lossy, want) << c.dump();
    StreamDecoder sd(*t);
    std::string streamed;
    for (int32_t id : ids) streamed += sd.push(id);
    streamed += sd.flush();
    ASSERT_EQ(streamed, want) << c.dump();
  }
}

}  // namespace
}  // namespace ll3
