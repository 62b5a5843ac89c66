// config.json parsing into LlamaConfig, its errors, and the writer's round trip.
#include "io/hf_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace ll3 {
namespace {

// Llama 3.1 8B's config.json (the fields that matter).
const char* kLlama31 = R"({
  "architectures": ["LlamaForCausalLM"],
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
  "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 131072,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 128256})";

TEST(HfConfig, ParsesLlama31) {
  auto r = parse_hf_config(kLlama31, "c.json");
  ASSERT_TRUE(r.ok()) << r.message();
  const LlamaConfig& c = *r;
  EXPECT_EQ(c.dim, 4096);
  EXPECT_EQ(c.n_layers, 32);
  EXPECT_EQ(c.n_heads, 32);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.ffn_dim, 14336);
  EXPECT_EQ(c.n_vocab, 128256);
  EXPECT_EQ(c.context_length, 131072);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_TRUE(c.rope_half_pairs);
  EXPECT_TRUE(c.rope_scaling.enabled);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 8.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope_scaling.original_context, 8192);
}

TEST(HfConfig, DefaultsAndExplicitHeadDim) {
  auto r = parse_hf_config(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 3072,
      "num_hidden_layers": 28, "num_attention_heads": 24, "intermediate_size": 8192,
      "vocab_size": 128256, "head_dim": 128, "tie_word_embeddings": true,
      "rope_scaling": {"type": "default"}})",
                           "c.json");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->n_kv_heads, 24);  // defaults to the head count
  EXPECT_EQ(r->head_dim, 128);
  EXPECT_TRUE(r->tied_embeddings);
  EXPECT_FALSE(r->rope_scaling.enabled);
  EXPECT_FLOAT_EQ(r->rope_theta, 10000.0f);
  EXPECT_FLOAT_EQ(r->norm_eps, 1e-6f);
  EXPECT_EQ(r->context_length, 2048);
}

TEST(HfConfig, ErrorsNameTheField) {
  const std::string base = R"("architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2,
      "num_attention_heads": 4, "intermediate_size": 192, "vocab_size": 1000)";
  auto err = [](const std::string& text) { return parse_hf_config(text, "c.json").message(); };
  const std::string p = "config.json: c.json: ";
  EXPECT_EQ(err("{"), p + "not valid JSON");
  EXPECT_EQ(err("[]"), p + "not a JSON object");
  EXPECT_EQ(err(R"({"architectures": ["MistralForCausalLM"]})"),
            p + "architectures is [\"MistralForCausalLM\"], expected [\"LlamaForCausalLM\"]");
  EXPECT_EQ(err(R"({"hidden_size": 64})"),
            p + "architectures is missing, expected [\"LlamaForCausalLM\"]");
  EXPECT_EQ(err("{" + base + "}"), p + "field 'hidden_size' is missing");
  EXPECT_EQ(err("{" + base + R"(, "hidden_size": "64"})"),
            p + "field 'hidden_size' must be a positive integer, got \"64\"");
  EXPECT_EQ(err("{" + base + R"(, "hidden_size": -64})"),
            p + "field 'hidden_size' must be a positive integer, got -64");
  EXPECT_EQ(err("{" + base + R"(, "hidden_size": 66})"),
            p + "hidden_size 66 is not a multiple of num_attention_heads 4");
  EXPECT_EQ(err("{" + base + R"(, "hidden_size": 64, "num_key_value_heads": 3})"),
            p + "num_attention_heads 4 is not a multiple of num_key_value_heads 3");
  EXPECT_EQ(err("{" + base + R"(, "hidden_size": 64, "head_dim": 15})"),
            p + "head_dim 15 is odd; RoPE needs pairs");
  EXPECT_EQ(err("{" + base + R"(, "hidden_size": 64, "rms_norm_eps": 0})"),
            p + "field 'rms_norm_eps' must be a positive number, got 0");
  EXPECT_EQ(err("{" + base + R"(, "hidden_size": 64, "tie_word_embeddings": 1})"),
            p + "field 'tie_word_embeddings' must be true or false, got 1");
  EXPECT_EQ(err("{" + base + R"(, "hidden_size": 64, "rope_scaling": {"type": "linear",
                "factor": 2.0}})"),
            p + "rope_scaling type \"linear\" is not supported (only \"llama3\")");
  EXPECT_EQ(err("{" + base + R"(, "hidden_size": 64, "rope_scaling": {"rope_type": "llama3",
                "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}})"),
            p + "rope_scaling: field 'original_max_position_embeddings' is missing");
  EXPECT_EQ(err("{" + base + R"(, "hidden_size": 64, "rope_scaling": 3})"),
            p + "rope_scaling must be an object, got 3");
}

TEST(HfConfig, WriterRoundTripsAndLoadsFromDirectory) {
  auto c = parse_hf_config(kLlama31, "c.json");
  ASSERT_TRUE(c.ok());
  std::string text = hf_config_json(*c, {128000, {128001, 128009}}, "bfloat16");
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["rms_norm_eps"].dump(), "1e-05");
  EXPECT_EQ(j["eos_token_id"].dump(), "[128001,128009]");
  EXPECT_EQ(j["bos_token_id"], 128000);
  EXPECT_EQ(j["rope_scaling"]["rope_type"], "llama3");
  EXPECT_EQ(j["torch_dtype"], "bfloat16");
  std::string dir = test::temp_dir() + "/My-Model";
  std::filesystem::create_directories(dir);
  test::write_file(dir + "/config.json", text);
  auto back = load_hf_config(dir);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->name, "My-Model");
  EXPECT_EQ(back->dim, c->dim);
  EXPECT_EQ(back->n_kv_heads, c->n_kv_heads);
  EXPECT_EQ(back->head_dim, c->head_dim);
  EXPECT_EQ(back->context_length, c->context_length);
  EXPECT_EQ(back->norm_eps, c->norm_eps);
  EXPECT_EQ(back->rope_scaling.original_context, 8192);
  EXPECT_EQ(back->tied_embeddings, false);

  EXPECT_EQ(load_hf_config(dir + "/nope").ok(), false);
}

TEST(HfConfig, Llama3RopeFactors) {
  // Llama 3.1 8B: head_dim 128, theta 500000, factor 8, low 1, high 4, original 8192.
  std::vector<float> f = llama3_rope_freq_factors(128, 500000.0f, RopeScaling{});
  ASSERT_EQ(f.size(), 64u);
  EXPECT_EQ(f[0], 1.0f);   // high frequencies unscaled
  EXPECT_EQ(f[63], 8.0f);  // low frequencies divided by the factor
  int smooth = 0;
  for (size_t i = 1; i < f.size(); ++i) {
    EXPECT_GE(f[i], f[i - 1]);
    smooth += f[i] > 1.0f && f[i] < 8.0f;
  }
  EXPECT_GT(smooth, 0);  // a band in between is interpolated
  RopeScaling s32;
  s32.factor = 32.0f;  // Llama 3.2
  EXPECT_EQ(llama3_rope_freq_factors(64, 500000.0f, s32).back(), 32.0f);
}

}  // namespace
}  // namespace ll3
