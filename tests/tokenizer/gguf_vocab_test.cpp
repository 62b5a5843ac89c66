// The vocabulary through GGUF metadata: written with the GGUF writer and read back
// (make-model relies on this round trip), and the loader's errors on bad metadata.
#include <gtest/gtest.h>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace ll3 {
namespace {

TokenizerVocab small_vocab() {
  TokenizerVocab v;
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(byte_to_utf8(uint8_t(b)));
  v.tokens.insert(v.tokens.end(),
                  {"he", "hel", "Ġh", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"});
  v.token_types.assign(v.tokens.size(), kTokenNormal);
  for (size_t i = v.tokens.size() - 3; i < v.tokens.size(); ++i) v.token_types[i] = kTokenControl;
  v.merges = {"h e", "he l", "Ġ h"};
  v.bos_id = int32_t(v.tokens.size()) - 3;
  v.eos_id = int32_t(v.tokens.size()) - 1;
  v.chat_template = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}";
  return v;
}

// Writes the tokenizer keys the way a converter does; `mutate` can damage them.
std::string write_gguf(const TokenizerVocab& v,
                       const std::function<void(GgufWriter&)>& mutate = {}) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", v.pre);
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_i32_array("tokenizer.ggml.token_type", v.token_types);
  w.set_string_array("tokenizer.ggml.merges", v.merges);
  w.set_u32("tokenizer.ggml.bos_token_id", uint32_t(v.bos_id));
  w.set_u32("tokenizer.ggml.eos_token_id", uint32_t(v.eos_id));
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.set_string("tokenizer.chat_template", v.chat_template);
  if (mutate) mutate(w);
  std::string path = test::temp_dir() + "/vocab.gguf";
  Status st = w.write(path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

Result<TokenizerVocab> read_back(const std::string& path) {
  auto f = GgufFile::open(path);
  if (!f.ok()) return f.status();
  return load_vocab_from_gguf(**f);
}

TEST(GgufVocab, RoundTripsThroughTheWriter) {
  TokenizerVocab v = small_vocab();
  v.add_bos = false;
  auto back = read_back(write_gguf(v));
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->tokens, v.tokens);
  EXPECT_EQ(back->token_types, v.token_types);
  EXPECT_EQ(back->merges, v.merges);
  EXPECT_EQ(back->bos_id, v.bos_id);
  EXPECT_EQ(back->eos_id, v.eos_id);
  EXPECT_FALSE(back->add_bos);
  EXPECT_EQ(back->chat_template, v.chat_template);
  EXPECT_EQ(back->pre, "llama-bpe");
  // <|eot_id|> and <|end_of_text|> end generation; eot is found by its text.
  EXPECT_EQ(back->eot_id, int32_t(v.tokens.size()) - 1);
  EXPECT_EQ(back->eog_ids,
            (std::vector<int32_t>{int32_t(v.tokens.size()) - 2, int32_t(v.tokens.size()) - 1}));
  auto tok = Tokenizer::create(std::move(*back));
  ASSERT_TRUE(tok.ok()) << tok.message();
  // " hel": "h e" (rank 0) wins over "Ġ h" (rank 2), then "he l"; the space stays a byte.
  int32_t hel = (*tok)->token_id("hel"), space = (*tok)->token_id("Ġ");
  EXPECT_EQ((*tok)->encode("hel hel", false, false), (std::vector<int32_t>{hel, space, hel}));
  EXPECT_EQ((*tok)->encode(" h", false, false), std::vector<int32_t>{(*tok)->token_id("Ġh")});
}

TEST(GgufVocab, BadMetadataIsAnErrorThatSaysWhat) {
  TokenizerVocab v = small_vocab();
  struct Case {
    const char* what;
    std::function<void(GgufWriter&)> mutate;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"model", [](GgufWriter& w) { w.set_string("tokenizer.ggml.model", "llama"); },
       "tokenizer.ggml.model"},
      {"pre", [](GgufWriter& w) { w.set_string("tokenizer.ggml.pre", "qwen2"); },
       "tokenizer.ggml.pre"},
      {"tokens type",
       [](GgufWriter& w) {
         w.set_i32_array("tokenizer.ggml.tokens", {1, 2});
       },
       "tokenizer.ggml.tokens"},
      {"types count",
       [](GgufWriter& w) {
         w.set_i32_array("tokenizer.ggml.token_type", {1, 1, 1});
       },
       "token_type"},
      {"bos range", [](GgufWriter& w) { w.set_u32("tokenizer.ggml.bos_token_id", 1u << 30); },
       "bos_token_id"},
      {"merges type", [](GgufWriter& w) { w.set_i32_array("tokenizer.ggml.merges", {1}); },
       "merges"},
  };
  for (const auto& c : cases) {
    auto r = read_back(write_gguf(v, c.mutate));
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_NE(r.message().find(c.expect), std::string::npos) << c.what << ": " << r.message();
  }
  // A merge whose halves are not tokens is skipped, not fatal; a vocabulary missing a byte is.
  v.merges.push_back("nosuch token");
  auto r = read_back(write_gguf(v));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(Tokenizer::create(std::move(*r)).ok());
  TokenizerVocab missing = small_vocab();
  missing.tokens[65] = "A2";  // no token for byte 'A' any more
  r = read_back(write_gguf(missing));
  ASSERT_TRUE(r.ok());
  auto t = Tokenizer::create(std::move(*r));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("0x41"), std::string::npos) << t.message();
}

}  // namespace
}  // namespace ll3
