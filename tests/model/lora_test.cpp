// LoRA adapters (model/lora.h, backend/cpu/lora_products.h): the GGUF and PEFT forms of one
// adapter give the same bits, on a GGUF base and on a Hugging Face one (each form's Q/K rows
// moved into the base's RoPE order); logits with an adapter equal those of its weights merged
// into the base (ll3 export-lora's merge, in double) within 1e-5 with float activations, on F32
// and Q4_K_M bases; a sequence's logits are the same bits alone as in a step beside other
// adapters' sequences and the base's; every mismatch with the base is refused with what and
// where.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "backend/cpu/cpu_runner.h"
#include "core/sha256.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/hf_export.h"
#include "model/lora.h"
#include "model/lora_write.h"
#include "test_support.h"

namespace ll3 {
namespace {

std::unique_ptr<LlamaModel> load_model(const std::string& path) {
  LoadOptions lo;
  lo.decode_panels = false;  // the merge reads the file's rows
  auto m = LlamaModel::load(path, lo);
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? std::move(*m) : nullptr;
}

std::unique_ptr<LoraAdapter> load_adapter(const std::string& path, const LlamaModel& base) {
  auto a = load_lora(path, base);
  EXPECT_TRUE(a.ok()) << a.message();
  return a.ok() ? std::move(*a) : nullptr;
}

std::vector<int32_t> tokens_of(int n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t = {128000};
  while (static_cast<int>(t.size()) < n) t.push_back(static_cast<int32_t>(rng() % vocab));
  return t;
}

// One sequence of a step: its tokens, with an adapter set or none.
struct SeqIn {
  std::vector<int32_t> tokens;
  const LoraSet* set = nullptr;
};

// Every position's logits of each sequence, all in one step of a fresh CPU runner.
std::vector<std::vector<float>> step_logits(const LlamaModel& m, const std::vector<SeqIn>& seqs, bool int8 = true) {
  const LlamaConfig& c = m.config;
  int64_t total = 0, blocks = 0;
  for (const SeqIn& s : seqs) {
    total += static_cast<int64_t>(s.tokens.size());
    blocks += static_cast<int64_t>(s.tokens.size()) / 16 + 1;
  }
  auto kv = KvCache::create({c.n_layers, c.n_kv_heads, c.head_dim, 16, blocks, DType::F32});
  EXPECT_TRUE(kv.ok()) << kv.message();
  ThreadPool pool(2);
  CpuRunner runner(m, **kv, pool, total, int8, false);
  runner.enable_lora();
  std::vector<int32_t> tokens, rows, seq_lora;
  std::vector<std::vector<int32_t>> tables;
  std::vector<SeqBatch> sbs;
  std::vector<const LoraSet*> sets;
  int32_t next_block = 0;
  for (const SeqIn& s : seqs) {
    std::vector<int32_t> t;
    for (size_t i = 0; i < s.tokens.size() / 16 + 1; ++i) t.push_back(next_block++);
    tables.push_back(std::move(t));
  }
  for (size_t k = 0; k < seqs.size(); ++k) {
    SeqBatch b;
    b.token_begin = static_cast<int32_t>(tokens.size());
    b.n_tokens = static_cast<int32_t>(seqs[k].tokens.size());
    b.block_table = tables[k];
    sbs.push_back(b);
    for (int32_t tok : seqs[k].tokens) {
      rows.push_back(static_cast<int32_t>(tokens.size()));
      tokens.push_back(tok);
    }
    int32_t idx = -1;
    if (seqs[k].set != nullptr) {
      auto at = std::find(sets.begin(), sets.end(), seqs[k].set);
      idx = static_cast<int32_t>(at - sets.begin());
      if (at == sets.end()) sets.push_back(seqs[k].set);
    }
    seq_lora.push_back(idx);
  }
  BatchPlan p{tokens, sbs, rows, {}};
  if (!sets.empty()) {
    p.lora_sets = sets;
    p.seq_lora = seq_lora;
  }
  std::vector<float> logits(rows.size() * static_cast<size_t>(c.n_vocab));
  Status st = runner.forward(p, logits.data());
  EXPECT_TRUE(st.ok()) << st.message();
  std::vector<std::vector<float>> out;
  size_t at = 0;
  for (const SeqIn& s : seqs) {
    const size_t n = s.tokens.size() * static_cast<size_t>(c.n_vocab);
    out.emplace_back(logits.begin() + static_cast<ptrdiff_t>(at), logits.begin() + static_cast<ptrdiff_t>(at + n));
    at += n;
  }
  return out;
}

std::vector<float> logits_of(const LlamaModel& m, const std::vector<int32_t>& tokens, const LoraSet* set, bool int8 = true) {
  return step_logits(m, {{tokens, set}}, int8)[0];
}

// The largest, over positions, relative L2 distance of two rows of logits.
double worst_rel_l2(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab) {
  double worst = 0;
  for (size_t r = 0; r * vocab < a.size(); ++r) {
    double d = 0, n = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      const double x = a[r * vocab + i], y = b[r * vocab + i];
      d += (x - y) * (x - y);
      n += y * y;
    }
    worst = std::max(worst, std::sqrt(d / n));
  }
  return worst;
}

LoraSet one(const LoraAdapter* a, float scale = 1.0f) { return LoraSet{{{a, scale}}}; }

// The tiny shared model (F32, tied) and a rank-8 adapter of it in both forms, LM head included.
struct TinyCase {
  std::unique_ptr<LlamaModel> base;
  std::string dir, gguf, peft;
};
TinyCase tiny_case(uint32_t seed = 3) {
  TinyCase t;
  t.base = load_model(test::shared_dir() + "/models/tiny-llama3-f32.gguf");
  t.dir = test::temp_dir();
  t.gguf = t.dir + "/a.gguf";
  t.peft = t.dir + "/peft";
  RandomLoraOptions o;
  o.rank = 8;
  o.seed = seed;
  o.output = true;
  Status st = write_random_lora(*t.base, o, t.gguf, t.peft);
  EXPECT_TRUE(st.ok()) << st.message();
  return t;
}

TEST(Lora, GgufAndPeftFormsGiveTheSameBits) {
  LL3_REQUIRE_SHARED();
  TinyCase t = tiny_case();
  ASSERT_TRUE(t.base);
  const std::vector<int32_t> tokens = tokens_of(40, t.base->config.n_vocab, 1);
  std::unique_ptr<LoraAdapter> g = load_adapter(t.gguf, *t.base), p = load_adapter(t.peft, *t.base);
  ASSERT_TRUE(g && p);
  EXPECT_EQ(g->format, "gguf");
  EXPECT_EQ(p->format, "peft");
  EXPECT_EQ(g->n_pairs, 2 * 7 + 1);
  EXPECT_EQ(g->fingerprint, p->fingerprint) << "the same values, after the Q/K rows are in the base's order";
  const LoraSet sg = one(g.get()), sp = one(p.get());
  const std::vector<float> base = logits_of(*t.base, tokens, nullptr), lg = logits_of(*t.base, tokens, &sg),
                           lp = logits_of(*t.base, tokens, &sp);
  ASSERT_EQ(lg.size(), lp.size());
  EXPECT_EQ(std::memcmp(lg.data(), lp.data(), lg.size() * sizeof(float)), 0);
  EXPECT_GT(worst_rel_l2(lg, base, t.base->config.n_vocab), 1e-2) << "the adapter changes the logits";

  // A Hugging Face base (Q/K rows in rotate-half order): each form is moved the other way.
  auto f = GgufFile::open(test::shared_dir() + "/models/tiny-llama3-f32.gguf");
  ASSERT_TRUE(f.ok());
  const std::string hf = t.dir + "/hf";
  ASSERT_TRUE(export_hf_directory(**f, hf, 1, test::shared_dir() + "/tokenizers/llama3").ok());
  std::unique_ptr<LlamaModel> hbase = load_model(hf);
  ASSERT_TRUE(hbase);
  ASSERT_TRUE(hbase->config.rope_half_pairs);
  std::unique_ptr<LoraAdapter> hg = load_adapter(t.gguf, *hbase), hp = load_adapter(t.peft, *hbase);
  ASSERT_TRUE(hg && hp);
  const LoraSet shg = one(hg.get()), shp = one(hp.get());
  const std::vector<float> h1 = logits_of(*hbase, tokens, &shg), h2 = logits_of(*hbase, tokens, &shp);
  EXPECT_EQ(std::memcmp(h1.data(), h2.data(), h1.size() * sizeof(float)), 0);
  EXPECT_LT(worst_rel_l2(h1, lg, t.base->config.n_vocab), 1e-5) << "the same model and adapter in the other layout";
}

// The merged weights (W + s B A in double) against the adapter beside the base, float activations.
void expect_merged_equal(const std::string& base_path, const RandomLoraOptions& o, float scale) {
  std::unique_ptr<LlamaModel> base = load_model(base_path);
  ASSERT_TRUE(base);
  const std::string dir = test::temp_dir();
  ASSERT_TRUE(write_random_lora(*base, o, dir + "/a.gguf", "").ok());
  std::unique_ptr<LoraAdapter> a = load_adapter(dir + "/a.gguf", *base);
  ASSERT_TRUE(a);
  Status st = merge_lora(*base, {{a.get(), scale}}, dir + "/merged.gguf", DType::F32);
  ASSERT_TRUE(st.ok()) << st.message();
  std::unique_ptr<LlamaModel> merged = load_model(dir + "/merged.gguf");
  ASSERT_TRUE(merged);
  const std::vector<int32_t> tokens = tokens_of(48, base->config.n_vocab, 2);
  const LoraSet set = one(a.get(), scale);
  const std::vector<float> with = logits_of(*base, tokens, &set, /*int8=*/false), want = logits_of(*merged, tokens, nullptr, false),
                           plain = logits_of(*base, tokens, nullptr, false);
  EXPECT_LT(worst_rel_l2(with, want, base->config.n_vocab), 1e-5) << base_path;
  EXPECT_GT(worst_rel_l2(plain, want, base->config.n_vocab), 1e-2) << "the adapter changes the logits";
}

TEST(Lora, LogitsEqualTheMergedWeights) {
  LL3_REQUIRE_SHARED();
  RandomLoraOptions o;
  o.rank = 8;
  o.output = true;
  expect_merged_equal(test::shared_dir() + "/models/tiny-llama3-f32.gguf", o, 1.0f);  // tied: the LM head untied
  o.output = false;
  o.type = DType::F16;
  o.rslora = true;
  o.seed = 7;
  expect_merged_equal(test::shared_dir() + "/models/small-llama31-q4_k_m.gguf", o, 0.5f);
}

TEST(Lora, ASequenceGetsTheSameBitsBesideOtherAdapters) {
  LL3_REQUIRE_SHARED();
  std::unique_ptr<LlamaModel> base = load_model(test::shared_dir() + "/models/small-llama31-q4_k_m.gguf");
  ASSERT_TRUE(base);
  const std::string dir = test::temp_dir();
  std::vector<std::unique_ptr<LoraAdapter>> ads;
  for (uint32_t k = 0; k < 3; ++k) {
    RandomLoraOptions o;
    o.rank = 4 + 4 * static_cast<int64_t>(k);
    o.seed = 10 + k;
    o.type = k == 1 ? DType::F16 : DType::F32;
    const std::string path = dir + "/a" + std::to_string(k) + ".gguf";
    ASSERT_TRUE(write_random_lora(*base, o, path, "").ok());
    ads.push_back(load_adapter(path, *base));
    ASSERT_TRUE(ads.back());
  }
  const LoraSet s0 = one(ads[0].get()), s1 = one(ads[1].get(), 0.7f), s01 = LoraSet{{{ads[0].get(), 1.0f}, {ads[2].get(), -0.5f}}};
  const int64_t V = base->config.n_vocab;
  std::vector<SeqIn> seqs = {{tokens_of(20, V, 1), &s0}, {tokens_of(1, V, 2), nullptr}, {tokens_of(33, V, 3), &s1},
                             {tokens_of(5, V, 4), &s0},  {tokens_of(17, V, 5), &s01}};
  for (bool int8 : {true, false}) {
    const std::vector<std::vector<float>> together = step_logits(*base, seqs, int8);
    for (size_t k = 0; k < seqs.size(); ++k) {
      const std::vector<float> alone = logits_of(*base, seqs[k].tokens, seqs[k].set, int8);
      ASSERT_EQ(alone.size(), together[k].size());
      EXPECT_EQ(std::memcmp(alone.data(), together[k].data(), alone.size() * sizeof(float)), 0) << "sequence " << k << " int8 " << int8;
    }
  }
}

// llama.cpp with the same adapter (llama_set_adapters_lora, its AVX2 build; the reference files
// of tests/fixtures/lora, made by scripts/dev/lora-reference.sh from `ll3 make-lora` adapters the
// test makes again): every position's 16 highest logits and logsumexp, F32 adapters on the F32
// (tied) and the Q4_K_M (untied, LM head corrected) files, with llama.cpp's arithmetic (8-bit
// activations for the Q4_K weights): within 1e-5 relative, measured 3.5e-7, and the same best
// token wherever the reference's first two are 0.1 apart. (F16 adapters are not held to it:
// llama.cpp's own answer with them depends on the batch, docs/QUALITY.md, "LoRA adapters".)
TEST(Lora, LogitsMatchLlamaCppWithTheAdapter) {
  LL3_REQUIRE_SHARED();
  for (const char* ref : {"tiny-f32-r8.json", "small-q4_k_m-r8.json"}) {
    SCOPED_TRACE(ref);
    const nlohmann::json j = nlohmann::json::parse(test::read_file(test::source_dir() + "/tests/fixtures/lora/" + ref));
    std::unique_ptr<LlamaModel> base = load_model(test::shared_dir() + "/models/" + j["model"].get<std::string>());
    ASSERT_TRUE(base);
    // The adapter llama.cpp ran, made again from its seed (the same bytes: its SHA-256).
    const nlohmann::json& mk = j["make_lora"];
    RandomLoraOptions o;
    o.rank = mk["rank"];
    o.seed = mk["seed"];
    o.type = mk["type"] == "f16" ? DType::F16 : DType::F32;
    o.output = mk["output"];
    const std::string path = test::temp_dir() + "/" + j["adapter"].get<std::string>();
    ASSERT_TRUE(write_random_lora(*base, o, path, "").ok());
    ASSERT_EQ(sha256_hex(test::read_file(path)), j["adapter_sha256"]) << "make-lora no longer writes the adapter of the reference";
    std::unique_ptr<LoraAdapter> a = load_adapter(path, *base);
    ASSERT_TRUE(a);
    const LoraSet set = one(a.get(), j["scale"].get<float>());
    const std::vector<int32_t> tokens = j["tokens"].get<std::vector<int32_t>>();
    const std::vector<float> got = logits_of(*base, tokens, &set), plain = logits_of(*base, tokens, nullptr);
    const int64_t V = base->config.n_vocab;
    ASSERT_EQ(j["positions"].size(), tokens.size());
    double worst = 0, moved = 0;
    for (size_t p = 0; p < tokens.size(); ++p) {
      const nlohmann::json& pos = j["positions"][p];
      const std::vector<int32_t> ids = pos["top_ids"].get<std::vector<int32_t>>();
      const std::vector<float> want = pos["top_logits"].get<std::vector<float>>();
      ASSERT_EQ(ids.size(), 16u);
      double d = 0, n = 0;
      for (size_t k = 0; k < ids.size(); ++k) {
        d += std::pow(got[p * V + ids[k]] - want[k], 2);
        n += std::pow(want[k], 2);
        moved = std::max(moved, std::fabs(static_cast<double>(plain[p * V + ids[k]] - want[k])));
      }
      worst = std::max(worst, std::sqrt(d / n));
      if (want[0] - want[1] >= 0.1f) {
        const float* row = &got[p * V];
        EXPECT_EQ(std::max_element(row, row + V) - row, ids[0]) << "position " << p;
      }
    }
    std::printf("%s: worst relative error %.2g, the adapter moves the logits by up to %.3g\n", ref, worst, moved);
    EXPECT_LT(worst, 1e-5);
    EXPECT_GT(moved, 0.05) << "the adapter moves the reference's logits";
  }
}

// An adapter GGUF with these tensors (F32 values 0.01) and metadata.
std::string write_gguf_adapter(const std::string& path, const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors,
                               const std::string& type = "adapter", const std::string& arch = "llama") {
  GgufWriter w;
  w.set_string("general.architecture", arch);
  if (!type.empty()) w.set_string("general.type", type);
  w.set_string("adapter.type", "lora");
  w.set_f32("adapter.lora.alpha", 16);
  std::vector<std::vector<float>> keep;
  keep.reserve(tensors.size());
  for (const auto& [name, ne] : tensors) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    keep.emplace_back(static_cast<size_t>(n), 0.01f);
    EXPECT_TRUE(w.add_tensor(name, DType::F32, ne, keep.back().data()).ok());
  }
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

void expect_refused(const std::string& path, const LlamaModel& base, const std::string& want) {
  auto a = load_lora(path, base);
  ASSERT_FALSE(a.ok()) << path << " loaded";
  EXPECT_NE(a.message().find(want), std::string::npos) << a.message();
  EXPECT_NE(a.message().find(path), std::string::npos) << "the message names the file: " << a.message();
}

TEST(Lora, MismatchesWithTheBaseAreRefusedSayingWhatAndWhere) {
  LL3_REQUIRE_SHARED();
  std::unique_ptr<LlamaModel> tiny = load_model(test::shared_dir() + "/models/tiny-llama3-f32.gguf");
  std::unique_ptr<LlamaModel> small = load_model(test::shared_dir() + "/models/small-llama31-q4_k_m.gguf");
  ASSERT_TRUE(tiny && small);
  const std::string d = test::temp_dir();
  // An adapter of another model (dim 256 against 64).
  RandomLoraOptions o;
  o.rank = 4;
  ASSERT_TRUE(write_random_lora(*small, o, d + "/small.gguf", d + "/small-peft").ok());
  expect_refused(d + "/small.gguf", *tiny, "'blk.0.attn_q.weight': A is 4 x 256");
  expect_refused(d + "/small-peft", *tiny, "'model.layers.0.self_attn.q_proj'");
  // A model, not an adapter; another architecture; a layer the base does not have.
  expect_refused(test::shared_dir() + "/models/tiny-llama3-f32.gguf", *tiny, "not a LoRA adapter");
  expect_refused(write_gguf_adapter(d + "/qwen.gguf", {{"blk.0.attn_q.weight.lora_a", {64, 2}}}, "adapter", "qwen2"), *tiny,
                 "architecture 'qwen2'");
  expect_refused(write_gguf_adapter(d + "/deep.gguf", {{"blk.9.attn_q.weight.lora_a", {64, 2}}, {"blk.9.attn_q.weight.lora_b", {2, 64}}}),
                 *tiny, "'blk.9.attn_q.weight': the base has 2 layers, no layer 9");
  expect_refused(write_gguf_adapter(d + "/lone.gguf", {{"blk.0.attn_k.weight.lora_a", {64, 2}}}), *tiny, "has no 'blk.0.attn_k.weight.lora_b'");
  expect_refused(write_gguf_adapter(d + "/rank.gguf", {{"blk.0.attn_q.weight.lora_a", {64, 2}}, {"blk.0.attn_q.weight.lora_b", {3, 64}}}),
                 *tiny, "A has rank 2 and B rank 3");
  expect_refused(write_gguf_adapter(d + "/emb.gguf", {{"token_embd.weight.lora_a", {64, 2}}, {"token_embd.weight.lora_b", {2, 128256}}}),
                 *tiny, "token_embd.weight is not supported");
  expect_refused(write_gguf_adapter(d + "/norm.gguf", {{"blk.0.attn_norm.weight.lora_a", {64, 2}}, {"blk.0.attn_norm.weight.lora_b", {2, 64}}}),
                 *tiny, "not to 'blk.0.attn_norm.weight'");
  // PEFT options ll3 does not apply, and configs that do not fit their tensors.
  ASSERT_TRUE(write_random_lora(*tiny, o, "", d + "/peft").ok());
  auto with_config = [&](const std::string& name, const std::string& edit_from, const std::string& edit_to) {
    const std::string dir = d + "/" + name;
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(d + "/peft/adapter_model.safetensors", dir + "/adapter_model.safetensors");
    std::string cfg = test::read_file(d + "/peft/adapter_config.json");
    const size_t at = cfg.find(edit_from);
    EXPECT_NE(at, std::string::npos) << edit_from << " in " << cfg;
    if (at != std::string::npos) cfg.replace(at, edit_from.size(), edit_to);
    test::write_file(dir + "/adapter_config.json", cfg);
    return dir;
  };
  expect_refused(with_config("dora", "\"inference_mode\": true", "\"use_dora\": true"), *tiny, "use_dora (DoRA) is not supported");
  expect_refused(with_config("fifo", "\"fan_in_fan_out\": false", "\"fan_in_fan_out\": true"), *tiny, "fan_in_fan_out");
  expect_refused(with_config("r", "\"r\": 4", "\"r\": 8"), *tiny, "has rank 4; adapter_config.json says 8");
  expect_refused(with_config("target", "\"q_proj\"", "\"qkv_proj\""), *tiny, "names 'qkv_proj', which a Llama model has no product called");
  expect_refused(with_config("type", "\"LORA\"", "\"IA3\""), *tiny, "peft_type is 'IA3'");
  std::filesystem::create_directories(d + "/empty");
  expect_refused(d + "/empty", *tiny, "no adapter_config.json");
  expect_refused(d + "/missing.gguf", *tiny, "no such file or directory");
}

}  // namespace
}  // namespace ll3
