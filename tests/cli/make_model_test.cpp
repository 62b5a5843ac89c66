// ll3 make-model: the file follows llama.cpp's GGUF conventions, its weights have the intended
// scales, and the same seed gives the same bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/half.h"
#include "io/gguf.h"
#include "model/presets.h"
#include "test_support.h"

namespace ll3 {
namespace {

std::string tokenizer_dir() { return test::shared_dir() + "/tokenizers/llama3"; }

std::string make_model(const std::string& args) {
  std::string out = test::temp_dir() + "/m.gguf";
  auto r = test::run_command(test::ll3_binary() + " make-model " + args + " --tokenizer " +
                                 tokenizer_dir() + " --out " + out,
                             true);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return out;
}

struct Stats {
  double mean = 0, std = 0;
};
Stats stats(const GgufTensorInfo& t) {
  const int64_t n = t.n_elements();
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    float v;
    if (t.type == DType::F32) {
      std::memcpy(&v, t.data + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      v = t.type == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
    s += v;
    s2 += static_cast<double>(v) * v;
  }
  Stats st;
  st.mean = s / n;
  st.std = std::sqrt(std::max(0.0, s2 / n - st.mean * st.mean));
  return st;
}

TEST(MakeModel, TinyFollowsLlamaCppConventions) {
  LL3_REQUIRE_SHARED();
  std::string path = make_model("--preset tiny --type f32 --seed 5");
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.message();
  const GgufFile& g = **r;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.get_string("general.architecture"), "llama");
  EXPECT_EQ(g.get_int("llama.context_length"), 8192);
  EXPECT_EQ(g.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(g.get_int("llama.block_count"), 2);
  EXPECT_EQ(g.get_int("llama.feed_forward_length"), 192);
  EXPECT_EQ(g.get_int("llama.attention.head_count"), 4);
  EXPECT_EQ(g.get_int("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(g.get_float("llama.rope.freq_base"), 500000.0);
  EXPECT_FLOAT_EQ(static_cast<float>(*g.get_float("llama.attention.layer_norm_rms_epsilon")),
                  1e-5f);
  EXPECT_EQ(g.get_int("llama.vocab_size"), 128256);
  EXPECT_EQ(g.get_int("llama.rope.dimension_count"), 16);
  EXPECT_EQ(g.get_int("general.file_type"), 0);
  EXPECT_EQ(g.find("llama.context_length")->type, GgufType::U32);
  EXPECT_EQ(g.find("llama.rope.freq_base")->type, GgufType::F32);
  EXPECT_EQ(g.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(g.get_string("tokenizer.ggml.pre"), "llama-bpe");
  EXPECT_EQ(g.find("tokenizer.ggml.tokens")->strings.size(), 128256u);
  EXPECT_EQ(g.find("tokenizer.ggml.tokens")->strings[128000], "<|begin_of_text|>");
  EXPECT_EQ(g.find("tokenizer.ggml.token_type")->elem_type, GgufType::I32);
  EXPECT_EQ(g.find("tokenizer.ggml.token_type")->array_int(128000), 3);  // control
  EXPECT_EQ(g.find("tokenizer.ggml.token_type")->array_int(1000), 1);    // normal
  EXPECT_EQ(g.find("tokenizer.ggml.merges")->strings.size(), 280147u);
  EXPECT_EQ(g.find("tokenizer.ggml.merges")->strings[0], "Ġ Ġ");
  EXPECT_EQ(g.get_int("tokenizer.ggml.bos_token_id"), 128000);
  EXPECT_EQ(g.get_int("tokenizer.ggml.eos_token_id"), 128001);
  EXPECT_EQ(g.get_int("tokenizer.ggml.eot_token_id"), 128009);
  EXPECT_EQ(g.get_bool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_NE(g.get_string("tokenizer.chat_template")->find("<|start_header_id|>"),
            std::string::npos);

  // Tensors: names, GGUF shapes (ne[0] innermost), types; tied, so no output.weight.
  ASSERT_EQ(g.tensors().size(), 1u + 2u * 9u + 1u);
  EXPECT_EQ(g.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(g.find_tensor("rope_freqs.weight"), nullptr);
  struct Want {
    const char* name;
    int64_t ne0, ne1;
  };
  const Want want[] = {{"token_embd.weight", 64, 128256},    {"output_norm.weight", 64, 1},
                       {"blk.1.attn_norm.weight", 64, 1},    {"blk.1.attn_q.weight", 64, 64},
                       {"blk.1.attn_k.weight", 64, 32},      {"blk.1.attn_v.weight", 64, 32},
                       {"blk.1.attn_output.weight", 64, 64}, {"blk.1.ffn_norm.weight", 64, 1},
                       {"blk.1.ffn_gate.weight", 64, 192},   {"blk.1.ffn_up.weight", 64, 192},
                       {"blk.1.ffn_down.weight", 192, 64}};
  for (const auto& w : want) {
    const GgufTensorInfo* t = g.find_tensor(w.name);
    ASSERT_NE(t, nullptr) << w.name;
    EXPECT_EQ(t->type, DType::F32) << w.name;
    EXPECT_EQ(t->n_dims, w.ne1 == 1 ? 1 : 2) << w.name;
    EXPECT_EQ(t->ne[0], w.ne0) << w.name;
    EXPECT_EQ(t->ne[1], w.ne1) << w.name;
    EXPECT_EQ(t->offset % g.alignment(), 0u) << w.name;
  }
  // Scales: embeddings 0.02, matrices 1/sqrt(fan_in), norms around 1, final norm large.
  Stats e = stats(*g.find_tensor("token_embd.weight"));
  EXPECT_NEAR(e.mean, 0.0, 1e-3);
  EXPECT_NEAR(e.std, 0.02, 1e-3);
  Stats q = stats(*g.find_tensor("blk.0.attn_q.weight"));
  EXPECT_NEAR(q.std, 1.0 / 8.0, 0.01);
  Stats d = stats(*g.find_tensor("blk.0.ffn_down.weight"));
  EXPECT_NEAR(d.std, 1.0 / std::sqrt(192.0), 0.01);
  Stats n = stats(*g.find_tensor("blk.0.attn_norm.weight"));
  EXPECT_NEAR(n.mean, 1.0, 0.05);
  EXPECT_NEAR(n.std, 0.1, 0.03);
  // Every embedding row is distinct (random streams of different chunks must not overlap).
  const GgufTensorInfo* te = g.find_tensor("token_embd.weight");
  std::set<std::string> rows;
  for (int64_t r = 0; r < te->ne[1]; ++r) {
    rows.emplace(reinterpret_cast<const char*>(te->data) + r * 64 * 4, 64 * 4);
  }
  EXPECT_EQ(rows.size(), 128256u);
  Stats on = stats(*g.find_tensor("output_norm.weight"));
  EXPECT_NEAR(on.mean, 5.0 / (0.02 * 8.0), 3.0);
}

TEST(MakeModel, SameSeedSameBytesAnyThreadCount) {
  LL3_REQUIRE_SHARED();
  std::string a = test::read_file(make_model("--preset tiny --type bf16 --seed 7 -t 1"));
  std::string b = test::read_file(make_model("--preset tiny --type bf16 --seed 7 -t 3"));
  std::string c = test::read_file(make_model("--preset tiny --type bf16 --seed 8"));
  EXPECT_EQ(a.size(), b.size());
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.size(), c.size());
  EXPECT_FALSE(a == c);
}

TEST(MakeModel, TypesAndUntiedPresetWithRopeFreqs) {
  LL3_REQUIRE_SHARED();
  auto r = GgufFile::open(make_model("--preset small --type f16"));
  ASSERT_TRUE(r.ok()) << r.message();
  const GgufFile& g = **r;
  EXPECT_EQ(g.get_int("general.file_type"), 1);
  EXPECT_EQ(g.get_int("llama.context_length"), 131072);
  EXPECT_EQ(g.find_tensor("token_embd.weight")->type, DType::F16);
  EXPECT_EQ(g.find_tensor("blk.3.ffn_down.weight")->type, DType::F16);
  EXPECT_EQ(g.find_tensor("blk.3.ffn_norm.weight")->type, DType::F32);
  const GgufTensorInfo* out = g.find_tensor("output.weight");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->type, DType::F16);
  EXPECT_EQ(out->ne[0], 256);
  EXPECT_EQ(out->ne[1], 128256);
  Stats o = stats(*out);
  EXPECT_NEAR(o.std, 1.0 / 16.0, 0.005);
  const GgufTensorInfo* rf = g.find_tensor("rope_freqs.weight");
  ASSERT_NE(rf, nullptr);
  EXPECT_EQ(rf->type, DType::F32);
  ASSERT_EQ(rf->ne[0], 16);

  // The same factors, bit for bit, as llama.cpp's converter put in the shared Llama 3.1 file.
  auto ref = GgufFile::open(test::shared_dir() + "/models/small-llama31-q4_k_m.gguf");
  ASSERT_TRUE(ref.ok()) << ref.message();
  const GgufTensorInfo* rr = (*ref)->find_tensor("rope_freqs.weight");
  ASSERT_NE(rr, nullptr);
  ASSERT_EQ(rr->nbytes, rf->nbytes);
  EXPECT_EQ(std::memcmp(rr->data, rf->data, rf->nbytes), 0);
  std::vector<float> f = llama3_rope_freq_factors(32, 500000.0f, RopeScaling{});
  EXPECT_EQ(std::memcmp(f.data(), rf->data, rf->nbytes), 0);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[15], 8.0f);

  auto bf = GgufFile::open(make_model("--preset tiny --type bf16"));
  ASSERT_TRUE(bf.ok());
  EXPECT_EQ((*bf)->get_int("general.file_type"), 32);
  EXPECT_EQ((*bf)->find_tensor("blk.0.attn_k.weight")->type, DType::BF16);
}

TEST(MakeModel, PresetShapes) {
  const ModelPreset* p1 = find_preset("llama3.2-1b");
  ASSERT_NE(p1, nullptr);
  EXPECT_EQ(p1->config.dim, 2048);
  EXPECT_EQ(p1->config.n_layers, 16);
  EXPECT_EQ(p1->config.n_heads, 32);
  EXPECT_EQ(p1->config.n_kv_heads, 8);
  EXPECT_EQ(p1->config.ffn_dim, 8192);
  EXPECT_TRUE(p1->config.tied_embeddings);
  const ModelPreset* p3 = find_preset("llama3.2-3b");
  ASSERT_NE(p3, nullptr);
  EXPECT_EQ(p3->config.dim, 3072);
  EXPECT_EQ(p3->config.n_layers, 28);
  EXPECT_EQ(p3->config.head_dim, 128);
  const ModelPreset* p8 = find_preset("llama3.1-8b");
  ASSERT_NE(p8, nullptr);
  EXPECT_EQ(p8->config.dim, 4096);
  EXPECT_EQ(p8->config.ffn_dim, 14336);
  EXPECT_FALSE(p8->config.tied_embeddings);
  EXPECT_TRUE(p8->rope_freqs);
  EXPECT_EQ(find_preset("nope"), nullptr);
}

TEST(MakeModel, UsageErrors) {
  std::string ll3 = test::ll3_binary() + " make-model ";
  auto r = test::run_command(ll3 + "--preset tiny", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--out is required"), std::string::npos) << r.output;
  r = test::run_command(ll3 + "--preset huge --out /tmp/x.gguf", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown preset 'huge'"), std::string::npos) << r.output;
  r = test::run_command(ll3 + "--preset tiny --type q4_0 --out /tmp/x.gguf", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--type must be f32, f16 or bf16, not 'q4_0'"), std::string::npos);
  r = test::run_command(ll3 + "--preset tiny --bogus 1", true);
  EXPECT_EQ(r.exit_code, 2);
  r = test::run_command(ll3 + "--preset tiny --out /tmp/x.gguf --tokenizer /nonexistent", true);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("tokenizer: /nonexistent has no tokenizer.json"), std::string::npos)
      << r.output;
  r = test::run_command(ll3 + "--help", true);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("llama3.1-8b"), std::string::npos);
  EXPECT_NE(r.output.find("--copy"), std::string::npos);
}

// The copying weights (tests/model/copy_model_test.cpp runs them): a preset too small for them
// is refused with the reason, and nothing is written.
TEST(MakeModel, CopyRefusesPresetsTooSmall) {
  LL3_REQUIRE_SHARED();
  const std::string out = test::temp_dir() + "/copy-tiny.gguf";
  auto r = test::run_command(test::ll3_binary() + " make-model --preset tiny --copy --tokenizer " +
                                 tokenizer_dir() + " --out " + out,
                             true);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("preset tiny: needs head size 64 or more, not 16"), std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace ll3
