// Model files that parse as GGUF but are not runnable models: each gets an error naming what
// and where. The files are small synthetic models written with GgufWriter.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "io/gguf_writer.h"
#include "model/llama_model.h"
#include "test_support.h"

namespace ll3 {
namespace {

struct Edit {
  std::function<void(GgufWriter&)> meta;                       // metadata changes
  std::function<bool(std::string&, DType&, std::vector<int64_t>&)> tensor;  // false: drop the tensor
};

// A 1-layer model: dim 32, 4 heads, 2 KV heads, FFN 64, vocab 100, random F32 weights.
std::string write_model(const Edit& edit = {}) {
  static int counter = 0;
  std::string path = test::temp_dir() + "/m" + std::to_string(counter++) + ".gguf";
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.embedding_length", 32);
  w.set_u32("llama.block_count", 1);
  w.set_u32("llama.attention.head_count", 4);
  w.set_u32("llama.attention.head_count_kv", 2);
  w.set_u32("llama.feed_forward_length", 64);
  w.set_u32("llama.context_length", 256);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  if (edit.meta) edit.meta(w);
  struct T {
    std::string name;
    std::vector<int64_t> ne;
  };
  std::vector<T> ts = {{"token_embd.weight", {32, 100}},     {"output_norm.weight", {32}},
                       {"blk.0.attn_norm.weight", {32}},     {"blk.0.attn_q.weight", {32, 32}},
                       {"blk.0.attn_k.weight", {32, 16}},    {"blk.0.attn_v.weight", {32, 16}},
                       {"blk.0.attn_output.weight", {32, 32}}, {"blk.0.ffn_norm.weight", {32}},
                       {"blk.0.ffn_gate.weight", {32, 64}},  {"blk.0.ffn_up.weight", {32, 64}},
                       {"blk.0.ffn_down.weight", {64, 32}}};
  static std::vector<std::vector<float>> keep;  // data must outlive write()
  keep.clear();
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.2f);
  for (T& t : ts) {
    DType type = DType::F32;
    if (edit.tensor && !edit.tensor(t.name, type, t.ne)) continue;
    int64_t n = 1;
    for (int64_t d : t.ne) n *= d;
    keep.emplace_back(static_cast<size_t>(n * 2 + 64));  // room for any type of the same shape
    for (float& x : keep.back()) x = nd(rng);
    EXPECT_TRUE(w.add_tensor(t.name, type, t.ne, keep.back().data()).ok()) << t.name;
  }
  Status st = w.write(path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

std::string load_error(const std::string& path) {
  auto m = LlamaModel::load(path);
  EXPECT_FALSE(m.ok());
  // Drop the "model: PATH: " prefix so expectations do not depend on the temp path.
  std::string msg = m.message();
  std::string prefix = "model: " + path + ": ";
  return msg.rfind(prefix, 0) == 0 ? msg.substr(prefix.size()) : msg;
}

TEST(ModelLoad, ValidSyntheticModelLoads) {
  auto m = LlamaModel::load(write_model());
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ((*m)->config.n_vocab, 100);
  EXPECT_EQ((*m)->config.head_dim, 8);
  EXPECT_TRUE((*m)->config.tied_embeddings);
}

TEST(ModelLoad, MissingTensor) {
  Edit e;
  e.tensor = [](std::string& n, DType&, std::vector<int64_t>&) { return n != "blk.0.ffn_up.weight"; };
  EXPECT_EQ(load_error(write_model(e)), "missing tensor 'blk.0.ffn_up.weight'");
}

TEST(ModelLoad, ShapeMismatch) {
  Edit e;
  e.tensor = [](std::string& n, DType&, std::vector<int64_t>& ne) {
    if (n == "blk.0.attn_k.weight") ne = {32, 24};
    return true;
  };
  EXPECT_EQ(load_error(write_model(e)), "tensor 'blk.0.attn_k.weight' has shape [32, 24], expected [32, 16]");
  Edit v;
  v.tensor = [](std::string& n, DType&, std::vector<int64_t>& ne) {
    if (n == "output_norm.weight") ne = {31};
    return true;
  };
  EXPECT_EQ(load_error(write_model(v)),
            "tensor 'output_norm.weight' has 1 dimensions of which the first is 31, expected a vector of 32");
}

TEST(ModelLoad, UnsupportedTensorType) {
  Edit e;
  e.tensor = [](std::string& n, DType& t, std::vector<int64_t>& ne) {
    if (n == "blk.0.attn_q.weight") {
      t = DType::IQ4_NL;
    }
    return true;
  };
  EXPECT_EQ(load_error(write_model(e)), "tensor 'blk.0.attn_q.weight' has type iq4_nl, which ll3 cannot run yet");
}

TEST(ModelLoad, BadHyperParameters) {
  Edit arch;
  arch.meta = [](GgufWriter& w) { w.set_string("general.architecture", "gpt2"); };
  EXPECT_EQ(load_error(write_model(arch)), "architecture 'gpt2' is not supported (ll3 runs 'llama')");
  Edit heads;
  heads.meta = [](GgufWriter& w) { w.set_u32("llama.attention.head_count_kv", 3); };
  EXPECT_EQ(load_error(write_model(heads)), "head count 4 is not a multiple of the KV head count 3");
  Edit zero;
  zero.meta = [](GgufWriter& w) { w.set_u32("llama.block_count", 0); };
  EXPECT_EQ(load_error(write_model(zero)), "metadata 'llama.block_count' = 0 is out of range");
  Edit wrong_type;
  wrong_type.meta = [](GgufWriter& w) { w.set_string("llama.embedding_length", "32"); };
  EXPECT_EQ(load_error(write_model(wrong_type)), "missing or non-integer metadata 'llama.embedding_length'");
  Edit more_layers;
  more_layers.meta = [](GgufWriter& w) { w.set_u32("llama.block_count", 2); };
  EXPECT_EQ(load_error(write_model(more_layers)), "missing tensor 'blk.1.attn_norm.weight'");
  Edit vocab;
  vocab.meta = [](GgufWriter& w) { w.set_u32("llama.vocab_size", 128); };
  EXPECT_EQ(load_error(write_model(vocab)), "llama.vocab_size 128 does not match token_embd.weight's 100 rows");
}

TEST(ModelLoad, TruncatedModelFile) {
  std::string path = write_model();
  std::string bytes = test::read_file(path);
  test::write_file(path, bytes.substr(0, bytes.size() - 100));
  auto m = LlamaModel::load(path);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("extends past end of file"), std::string::npos) << m.message();
}

}  // namespace
}  // namespace ll3
