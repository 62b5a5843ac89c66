// The forward pass on the GPU (backend/cuda/cuda_runner.h) against the CPU runner with float
// activations, on small random models of every weight type the runner takes; batched steps
// equal to solo ones; the device's KV mirror following the host cache (copy on write) and
// filling it. Without a CUDA device every test skips and says why (the runner still compiles).
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "require_gpu.h"
#include "backend/cuda/cuda_runner.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "io/gguf_writer.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/type_traits.h"
#include "kv/kv_cache.h"
#include "backend/cpu/cpu_runner.h"
#include "backend/split_runner.h"
#include "model/llama_model.h"

namespace ll3 {
namespace {

constexpr int64_t kDim = 256, kLayers = 2, kHeads = 8, kKvHeads = 2, kFfn = 512, kVocab = 512, kBlock = 16;

// A 2-layer LLaMA with random weights, its matrices of `type` (norms and the embedding F32).
std::string write_model(DType type) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("ll3-cuda-runner-" + std::string(dtype_name(type)) + ".gguf")).string();
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.embedding_length", kDim);
  w.set_u32("llama.block_count", kLayers);
  w.set_u32("llama.attention.head_count", kHeads);
  w.set_u32("llama.attention.head_count_kv", kKvHeads);
  w.set_u32("llama.feed_forward_length", kFfn);
  w.set_u32("llama.context_length", 1024);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32("llama.rope.freq_base", 500000.0f);
  static std::vector<std::vector<uint8_t>> keep;  // must outlive write()
  keep.clear();
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto add = [&](const std::string& name, std::vector<int64_t> ne, DType t, float scale, float offset) {
    const int64_t n = ne.size() == 1 ? ne[0] : ne[0] * ne[1];
    std::vector<float> f(static_cast<size_t>(n));
    for (float& x : f) x = offset + scale * nd(rng);
    keep.emplace_back(dtype_row_bytes(t, n));
    type_traits(t)->from_float(f.data(), keep.back().data(), n);
    EXPECT_TRUE(w.add_tensor(name, t, ne, keep.back().data()).ok()) << name;
  };
  add("token_embd.weight", {kDim, kVocab}, DType::F32, 0.5f, 0.0f);
  add("output_norm.weight", {kDim}, DType::F32, 0.1f, 1.0f);
  add("output.weight", {kDim, kVocab}, type, 0.06f, 0.0f);
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", {kDim}, DType::F32, 0.1f, 1.0f);
    add(b + "attn_q.weight", {kDim, kHeads * 32}, type, 0.06f, 0.0f);
    add(b + "attn_k.weight", {kDim, kKvHeads * 32}, type, 0.06f, 0.0f);
    add(b + "attn_v.weight", {kDim, kKvHeads * 32}, type, 0.06f, 0.0f);
    add(b + "attn_output.weight", {kHeads * 32, kDim}, type, 0.06f, 0.0f);
    add(b + "ffn_norm.weight", {kDim}, DType::F32, 0.1f, 1.0f);
    add(b + "ffn_gate.weight", {kDim, kFfn}, type, 0.06f, 0.0f);
    add(b + "ffn_up.weight", {kDim, kFfn}, type, 0.06f, 0.0f);
    add(b + "ffn_down.weight", {kFfn, kDim}, type, 0.04f, 0.0f);
  }
  Status st = w.write(path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

std::unique_ptr<KvCache> make_kv() {
  KvCacheConfig c;
  c.n_layers = kLayers;
  c.n_kv_heads = kKvHeads;
  c.head_dim = 32;
  c.block_size = kBlock;
  c.n_blocks = 64;
  c.type = DType::F16;
  Result<std::unique_ptr<KvCache>> kv = KvCache::create(c);
  EXPECT_TRUE(kv.ok()) << kv.message();
  return std::move(kv.value());
}

// A model of `type`, a fresh KV cache and the CUDA runner over them (runner null on failure,
// the reason reported).
struct GpuSetup {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<ModelRunner> runner;
};
GpuSetup make_gpu(DType type, int64_t max_batch_tokens) {
  GpuSetup g;
  Result<std::unique_ptr<LlamaModel>> m = LlamaModel::load(write_model(type));
  EXPECT_TRUE(m.ok()) << m.message();
  if (!m.ok()) return g;
  g.model = std::move(m.value());
  g.kv = make_kv();
  GpuRunnerOptions o;
  o.max_batch_tokens = max_batch_tokens;
  o.q5_q6_in_place = type == DType::Q5_K || type == DType::Q6_K;  // the tensor-core loaders, not F16 copies
  Result<GpuPart> r = make_cuda_runner(*g.model, *g.kv, o);
  EXPECT_TRUE(r.ok()) << r.message();
  if (r.ok()) g.runner = std::move(r.value().runner);
  return g;
}

// One model of `type` and two GPU runners of it over caches of their own: a variant (options b)
// beside the runner as verified (options a). Runners null on failure, the reason reported.
struct TwoRunners {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<KvCache> kv_a, kv_b;
  GpuPart a, b;  // runner and placement
};
TwoRunners two_runners(DType type, const GpuRunnerOptions& a, const GpuRunnerOptions& b) {
  TwoRunners t;
  Result<std::unique_ptr<LlamaModel>> m = LlamaModel::load(write_model(type));
  EXPECT_TRUE(m.ok()) << m.message();
  if (!m.ok()) return t;
  t.model = std::move(m.value());
  t.kv_a = make_kv();
  t.kv_b = make_kv();
  Result<GpuPart> ra = make_cuda_runner(*t.model, *t.kv_a, a), rb = make_cuda_runner(*t.model, *t.kv_b, b);
  EXPECT_TRUE(ra.ok()) << ra.message();
  EXPECT_TRUE(rb.ok()) << rb.message();
  if (ra.ok()) t.a = std::move(ra.value());
  if (rb.ok()) t.b = std::move(rb.value());
  return t;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// One step of one sequence: tokens at positions n_past.., logits of its last row.
std::vector<float> step(ModelRunner& r, const std::vector<int32_t>& tokens, int32_t n_past,
                        const std::vector<int32_t>& table) {
  SeqBatch s;
  s.n_past = n_past;
  s.n_tokens = static_cast<int32_t>(tokens.size());
  s.block_table = table;
  const int32_t last = s.n_tokens - 1;
  BatchPlan p;
  p.tokens = tokens;
  p.seqs = std::span<const SeqBatch>(&s, 1);
  p.logit_rows = std::span<const int32_t>(&last, 1);
  std::vector<float> logits(kVocab);
  Status st = r.forward(p, logits.data());
  EXPECT_TRUE(st.ok()) << st.message();
  // The comparisons of two runs' bits must not be of two untouched (zero) buffers.
  EXPECT_TRUE(std::any_of(logits.begin(), logits.end(), [](float v) { return v != 0.0f; })) << "forward wrote no logits";
  return logits;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

std::vector<int32_t> random_tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % kVocab);
  return t;
}

class CudaRunnerTypes : public ::testing::TestWithParam<DType> {};

// A prompt of 37 tokens, one of 5 and 4 decode steps, GPU against CPU with float activations;
// and the host KV cache the GPU runner filled against the one the CPU runner filled.
TEST_P(CudaRunnerTypes, MatchesTheCpuRunner) {
  REQUIRE_GPU();
  const DType type = GetParam();
  GpuSetup g = make_gpu(type, 64);
  ASSERT_NE(g.runner, nullptr);
  ModelRunner& gpu = *g.runner;
  ThreadPool pool(2);
  std::unique_ptr<KvCache> kv_cpu = make_kv();
  CpuRunner cpu(*g.model, *kv_cpu, pool, 64, /*int8_activations=*/false);

  // Sequence A: 37 prompt tokens, then decode. Sequence B: 5 prompt tokens.
  const std::vector<int32_t> ta = {0, 1, 2, 3}, tb = {8, 9};
  const std::vector<int32_t> pa = random_tokens(37, 1), pb = random_tokens(5, 2);
  // Tolerances: the tensor cores take activations rounded to F16 (about 5e-4 each; BF16 4e-3),
  // and types the device dequantizes to F16 at load are rounded too; F32 weights run the F32
  // GEMV, which differs from the CPU in the order of float sums only.
  const double tc_tol = type == DType::F32 ? 2e-4 : type == DType::BF16 ? 2e-2 : 5e-3;
  EXPECT_LT(rel_l2(step(gpu, pa, 0, ta), step(cpu, pa, 0, ta)), tc_tol) << "37-token prompt";
  EXPECT_LT(rel_l2(step(gpu, pb, 0, tb), step(cpu, pb, 0, tb)), tc_tol) << "5-token prompt";
  int32_t tok = 7;
  for (int32_t i = 0; i < 4; ++i) {
    const std::vector<float> on_gpu = step(gpu, {tok}, 37 + i, ta), c = step(cpu, {tok}, 37 + i, ta);
    EXPECT_LT(rel_l2(on_gpu, c), tc_tol) << "decode step " << i;  // reads the prompt's K / V
    tok = static_cast<int32_t>(std::max_element(c.begin(), c.end()) - c.begin());
  }
  // The K / V rows the GPU runner wrote back into its host cache, against the CPU's.
  const KvCache& kg = *g.kv;
  const KvCache& kc = *kv_cpu;
  double worst = 0;
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t p = 0; p < 41; ++p) {
      const auto* a = reinterpret_cast<const uint16_t*>(kg.k_row(l, ta[p / kBlock], p % kBlock));
      const auto* b = reinterpret_cast<const uint16_t*>(kc.k_row(l, ta[p / kBlock], p % kBlock));
      for (int64_t e = 0; e < kKvHeads * 32; ++e) {
        worst = std::max<double>(worst, std::fabs(f16_to_f32(a[e]) - f16_to_f32(b[e])));
      }
    }
  }
  EXPECT_LT(worst, 0.05) << "largest difference of a K element written back to the host";
  EXPECT_NE(kg.version(ta[0]), 0u) << "the GPU runner's writes count as changes of the host blocks";
}

INSTANTIATE_TEST_SUITE_P(Weights, CudaRunnerTypes,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_K, DType::Q5_K,
                                           DType::Q6_K, DType::Q3_K),  // Q3_K: dequantized to F16 at load
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Twelve sequences in one step of 80 rows (more than a 64-token slab of the tensor-core
// kernel, every row at another place in its tile than alone) give each the logits it gets
// alone, bit for bit, for weights as stored and for a type dequantized at load: what a server
// answers must not depend on who else it serves.
TEST(CudaRunner, BatchedStepEqualsSoloSteps) {
  REQUIRE_GPU();
  for (DType type : {DType::Q4_K, DType::F16, DType::BF16, DType::Q8_0, DType::Q5_K, DType::Q6_K, DType::Q3_K}) {
    SCOPED_TRACE(dtype_name(type));
    GpuSetup g = make_gpu(type, 128);
    ASSERT_NE(g.runner, nullptr);
    ModelRunner& gpu = *g.runner;
    const int lengths[] = {3, 2, 2, 9, 16, 1, 5, 12, 7, 4, 8, 11};
    std::vector<std::vector<int32_t>> prompts, tables, solo_tables;
    for (int i = 0; i < 12; ++i) {
      prompts.push_back(random_tokens(lengths[i], 5 + i));
      tables.push_back({i});
      solo_tables.push_back({20 + i});
    }
    std::vector<std::vector<float>> solo;
    for (size_t i = 0; i < prompts.size(); ++i) solo.push_back(step(gpu, prompts[i], 0, solo_tables[i]));

    std::vector<int32_t> tokens;
    std::vector<SeqBatch> seqs(prompts.size());
    std::vector<int32_t> rows;
    for (size_t i = 0; i < prompts.size(); ++i) {
      seqs[i].token_begin = static_cast<int32_t>(tokens.size());
      seqs[i].n_tokens = static_cast<int32_t>(prompts[i].size());
      seqs[i].block_table = tables[i];
      tokens.insert(tokens.end(), prompts[i].begin(), prompts[i].end());
      rows.push_back(static_cast<int32_t>(tokens.size()) - 1);
    }
    BatchPlan p;
    p.tokens = tokens;
    p.seqs = seqs;
    p.logit_rows = rows;
    std::vector<float> logits(rows.size() * kVocab);
    Status st = gpu.forward(p, logits.data());
    ASSERT_TRUE(st.ok()) << st.message();
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(0, std::memcmp(&logits[i * kVocab], solo[i].data(), kVocab * sizeof(float))) << "sequence " << i;
    }
  }
}

// A block the host changes (copy on write, as the engine does for a shared partial block) is
// uploaded before the next step reads it: continuing from the copy equals continuing from the
// original, bit for bit.
TEST(CudaRunner, FollowsHostChangesOfTheCache) {
  REQUIRE_GPU();
  GpuSetup g = make_gpu(DType::F16, 32);
  ASSERT_NE(g.runner, nullptr);
  const std::vector<int32_t> prompt = random_tokens(20, 9);
  (void)step(*g.runner, prompt, 0, {0, 1});
  g.kv->copy_positions(1, 5, 4);  // positions 16..19 into block 5, on the host only
  const std::vector<float> original = step(*g.runner, {42}, 20, {0, 1});
  const std::vector<float> copy = step(*g.runner, {42}, 20, {0, 5});
  EXPECT_EQ(0, std::memcmp(original.data(), copy.data(), kVocab * sizeof(float)));
}

// CUDA graphs (GpuRunnerOptions::graphs): steps replayed from a graph give the bits of the same
// steps launched op by op: a bucket's first use (op by op), its capture, its replays, and steps
// padded to their bucket (3 rows in bucket 4, 5 in 8).
TEST(CudaRunner, GraphsGiveTheBitsOfOpByOpSteps) {
  REQUIRE_GPU();
  for (DType type : {DType::Q4_K, DType::F16, DType::F32}) {
    SCOPED_TRACE(dtype_name(type));
    GpuRunnerOptions o;
    o.max_batch_tokens = 64;
    GpuRunnerOptions og = o;
    og.graphs = true;
    TwoRunners r = two_runners(type, o, og);
    ASSERT_TRUE(r.a.runner && r.b.runner);
    const std::vector<int32_t> t0 = {0, 1}, t1 = {2, 3};
    auto same = [&](const std::vector<int32_t>& tokens, int32_t n_past, const std::vector<int32_t>& table) {
      return same_bits(step(*r.a.runner, tokens, n_past, table), step(*r.b.runner, tokens, n_past, table));
    };
    EXPECT_TRUE(same(random_tokens(5, 7), 0, t0)) << "5 rows in bucket 8";
    EXPECT_TRUE(same(random_tokens(3, 8), 0, t1)) << "3 rows in bucket 4";
    for (int32_t i = 0; i < 4; ++i) EXPECT_TRUE(same({static_cast<int32_t>(11 + i)}, 5 + i, t0)) << "decode " << i;
    for (int32_t i = 0; i < 3; ++i) EXPECT_TRUE(same(random_tokens(3, 20 + i), 3 + 3 * i, t1)) << "3 rows, use " << i;
  }
}

// Split attention (GpuRunnerOptions::split_attention) on a 700-token prompt and decode steps
// past 512 positions: the op-by-op runner's logits within float rounding; its first 512
// positions attend in one chunk, so a 20-token prompt gives the same bits.
TEST(CudaRunner, SplitAttentionFollowsTheWholeKernel) {
  REQUIRE_GPU();
  GpuRunnerOptions o;
  o.max_batch_tokens = 704;
  GpuRunnerOptions os = o;
  os.split_attention = true;
  TwoRunners r = two_runners(DType::F16, o, os);
  ASSERT_TRUE(r.a.runner && r.b.runner);
  ModelRunner& a = *r.a.runner;
  ModelRunner& b = *r.b.runner;
  std::vector<int32_t> table(48);
  std::iota(table.begin(), table.end(), 0);
  const std::vector<int32_t> short_table = {50, 51};
  EXPECT_TRUE(same_bits(step(a, random_tokens(20, 30), 0, short_table), step(b, random_tokens(20, 30), 0, short_table)))
      << "one chunk";
  const std::vector<int32_t> prompt = random_tokens(700, 31);
  EXPECT_LT(rel_l2(step(b, prompt, 0, table), step(a, prompt, 0, table)), 1e-4) << "700-token prompt";
  for (int32_t i = 0; i < 3; ++i) {
    const std::vector<int32_t> token = {40 + i};
    EXPECT_LT(rel_l2(step(b, token, 700 + i, table), step(a, token, 700 + i, table)), 1e-4) << "decode " << i;
  }
}

// -ngl 1 of 2: layer 0 on the CPU, layer 1 on the GPU, the output layer on either side. Against
// the CPU alone (float activations on both), and a batch of sequences equal to each alone, bit
// for bit (both parts are batch-invariant); the host cache holds both parts' K / V rows.
TEST(CudaRunner, SplitWithTheCpuMatchesTheCpuAndKeepsBatchInvariance) {
  REQUIRE_GPU();
  for (bool output_on_cpu : {false, true}) {
    SCOPED_TRACE(output_on_cpu ? "output layer on the CPU" : "output layer on the GPU");
    Result<std::unique_ptr<LlamaModel>> m = LlamaModel::load(write_model(DType::Q8_0));
    ASSERT_TRUE(m.ok()) << m.message();
    std::unique_ptr<KvCache> kv = make_kv(), kv_cpu = make_kv();
    GpuRunnerOptions o;
    o.max_batch_tokens = 64;
    o.gpu_layers = 1;
    o.output_on_cpu = output_on_cpu;
    Result<GpuPart> part = make_cuda_runner(**m, *kv, o);
    ASSERT_TRUE(part.ok()) << part.message();
    EXPECT_EQ(part.value().placement.first_layer, 1);
    EXPECT_EQ(part.value().placement.output, !output_on_cpu);
    ThreadPool pool(2);
    RunnerOptions ro;
    ro.max_batch_tokens = 64;
    ro.int8_activations = false;
    std::unique_ptr<ModelRunner> split = with_cpu_parts(std::move(part.value()), **m, *kv, pool, ro);
    EXPECT_NE(split->where().find("1 of 2 layers"), std::string::npos) << split->where();
    CpuRunner cpu(**m, *kv_cpu, pool, 64, /*int8_activations=*/false);

    const std::vector<int32_t> pa = random_tokens(37, 3), pb = random_tokens(5, 4);
    const std::vector<int32_t> ta = {0, 1, 2, 3}, tb = {8};
    EXPECT_LT(rel_l2(step(*split, pa, 0, ta), step(cpu, pa, 0, ta)), 5e-3) << "37-token prompt";
    EXPECT_LT(rel_l2(step(*split, {7}, 37, ta), step(cpu, {7}, 37, ta)), 5e-3) << "decode";
    for (int64_t l = 0; l < kLayers; ++l) {  // both parts' rows reached the host cache
      const auto* a = reinterpret_cast<const uint16_t*>(kv->k_row(l, ta[2], 5));
      const auto* b = reinterpret_cast<const uint16_t*>(kv_cpu->k_row(l, ta[2], 5));
      EXPECT_NEAR(f16_to_f32(a[3]), f16_to_f32(b[3]), 0.05) << "layer " << l;
    }
    // Batch invariance: two sequences together against each alone.
    const std::vector<float> solo_b = step(*split, pb, 0, tb);
    const std::vector<int32_t> pc = random_tokens(9, 5), tc = {9};
    const std::vector<float> solo_c = step(*split, pc, 0, tc);
    std::vector<int32_t> tokens = pb;
    tokens.insert(tokens.end(), pc.begin(), pc.end());
    const std::vector<int32_t> tb2 = {10}, tc2 = {11};
    SeqBatch seqs[2];
    seqs[0].n_tokens = 5;
    seqs[0].block_table = tb2;
    seqs[1].token_begin = 5;
    seqs[1].n_tokens = 9;
    seqs[1].block_table = tc2;
    const int32_t rows[2] = {4, 13};
    BatchPlan p;
    p.tokens = tokens;
    p.seqs = seqs;
    p.logit_rows = rows;
    std::vector<float> logits(2 * kVocab);
    Status st = split->forward(p, logits.data());
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(0, std::memcmp(logits.data(), solo_b.data(), kVocab * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(logits.data() + kVocab, solo_c.data(), kVocab * sizeof(float)));
  }
}

// --host-weights pinned: layer 0 runs on the GPU from pinned host memory, layer 1 from device
// memory. The same kernels read the same bytes, so the logits are the all-device runner's bits.
TEST(CudaRunner, PinnedHostWeightsGiveTheBitsOfDeviceWeights) {
  REQUIRE_GPU();
  for (DType type : {DType::Q8_0, DType::Q4_K, DType::F16}) {
    SCOPED_TRACE(dtype_name(type));
    GpuRunnerOptions o;
    o.max_batch_tokens = 64;
    GpuRunnerOptions oh = o;
    oh.gpu_layers = 1;
    oh.host_weights_pinned = true;
    TwoRunners r = two_runners(type, o, oh);
    ASSERT_TRUE(r.a.runner && r.b.runner);
    EXPECT_EQ(r.b.placement.first_layer, 0);
    EXPECT_EQ(r.b.host_weight_layers, 1);
    EXPECT_NE(r.b.runner->where().find("pinned host memory"), std::string::npos) << r.b.runner->where();
    const std::vector<int32_t> table = {0, 1, 2};
    const std::vector<int32_t> prompt = random_tokens(21, 12);
    EXPECT_TRUE(same_bits(step(*r.a.runner, prompt, 0, table), step(*r.b.runner, prompt, 0, table))) << "prompt";
    EXPECT_TRUE(same_bits(step(*r.a.runner, {5}, 21, table), step(*r.b.runner, {5}, 21, table))) << "decode";
  }
}

// Too little device memory for the layers asked for is refused with the sizes; -1 (the
// default) takes the GPU only whole and says which -ngl fits.
TEST(CudaRunner, SaysHowManyLayersFit) {
  REQUIRE_GPU();
  Result<std::unique_ptr<LlamaModel>> m = LlamaModel::load(write_model(DType::F16));
  ASSERT_TRUE(m.ok()) << m.message();
  std::unique_ptr<KvCache> kv = make_kv();
  GpuRunnerOptions o;
  o.gpu_layers = 2;
  o.memory_cap = 1 << 20;  // 1 MiB: not even the activations
  Result<GpuPart> none = make_cuda_runner(**m, *kv, o);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.message().find("2 layers on the GPU need"), std::string::npos) << none.message();
  o.gpu_layers = 1;
  o.memory_cap = 0;
  Result<GpuPart> one = make_cuda_runner(**m, *kv, o);
  ASSERT_TRUE(one.ok()) << one.message();
  const int64_t one_layer = one.value().placement.bytes;
  one.value().runner.reset();
  o.gpu_layers = -1;
  o.memory_cap = one_layer;  // room for one layer and the output layer, not two
  Result<GpuPart> whole = make_cuda_runner(**m, *kv, o);
  ASSERT_FALSE(whole.ok());
  EXPECT_NE(whole.message().find("-ngl 1 fits"), std::string::npos) << whole.message();
}

// A KV type the device cache does not hold is refused with the reason.
TEST(CudaRunner, RefusesOtherKvTypes) {
  REQUIRE_GPU();
  Result<std::unique_ptr<LlamaModel>> m = LlamaModel::load(write_model(DType::F16));
  ASSERT_TRUE(m.ok()) << m.message();
  KvCacheConfig c;
  c.n_layers = kLayers;
  c.n_kv_heads = kKvHeads;
  c.head_dim = 32;
  c.n_blocks = 8;
  c.type = DType::Q8_0;
  Result<std::unique_ptr<KvCache>> kv = KvCache::create(c);
  ASSERT_TRUE(kv.ok());
  Result<GpuPart> gpu = make_cuda_runner(**m, **kv, GpuRunnerOptions());
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(gpu.message().find("F16 KV cache"), std::string::npos) << gpu.message();
}

}  // namespace
}  // namespace ll3
