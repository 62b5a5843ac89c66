// A forward pass split into parts (backend/split_runner.h), as `-ngl N` runs it with the GPU as
// the back part: here every part is a CPU runner, so the split must give the whole pass's bits
// (logits, hidden rows and every K / V row written) wherever the cut falls and whichever part
// holds the output layer. And the placement arithmetic that picks the cut
// (backend/gpu_placement.h).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backend/cpu/cpu_runner.h"
#include "backend/gpu_placement.h"
#include "backend/split_runner.h"
#include "kv/block_pool.h"
#include "test_support.h"

namespace ll3 {
namespace {

// Each sequence's four KV blocks of 16 positions.
const std::vector<int32_t> kTables[3] = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}};

struct Step {
  std::vector<int32_t> tokens, rows;
  std::vector<SeqBatch> seqs;
};

// Two steps over three sequences: prompts (one of them whole), then a decode row each beside
// the rest of a prompt; logit and hidden rows at every sequence's last token of the step.
std::vector<Step> two_steps(int64_t vocab) {
  std::mt19937 rng(5);
  const int prompt[3] = {21, 4, 40};
  std::vector<Step> steps(2);
  int32_t n_past[3] = {0, 0, 0};
  for (int step = 0; step < 2; ++step) {
    Step& st = steps[static_cast<size_t>(step)];
    for (int s = 0; s < 3; ++s) {
      const int32_t n = step == 0 ? (s == 2 ? 25 : prompt[s]) : (s == 2 ? prompt[s] - 25 : 1);
      SeqBatch b;
      b.n_past = n_past[s];
      b.token_begin = static_cast<int32_t>(st.tokens.size());
      b.n_tokens = n;
      b.block_table = kTables[s];
      for (int32_t i = 0; i < n; ++i) st.tokens.push_back(static_cast<int32_t>(rng() % vocab));
      st.rows.push_back(static_cast<int32_t>(st.tokens.size()) - 1);
      st.seqs.push_back(b);
      n_past[s] += n;
    }
  }
  return steps;
}

struct Outputs {
  std::vector<float> logits, hidden;
  std::vector<uint8_t> kv;  // every layer's K and V rows of the blocks used
};

Outputs run(ModelRunner& runner, const KvCache& kv, const LlamaModel& m, const std::vector<Step>& steps) {
  Outputs out;
  for (const Step& st : steps) {
    std::vector<float> logits(st.rows.size() * m.config.n_vocab), hidden(st.rows.size() * m.config.dim);
    Status s = runner.forward(BatchPlan{st.tokens, st.seqs, st.rows, st.rows}, logits.data(), hidden.data());
    EXPECT_TRUE(s.ok()) << s.message();
    out.logits.insert(out.logits.end(), logits.begin(), logits.end());
    out.hidden.insert(out.hidden.end(), hidden.begin(), hidden.end());
  }
  // The positions the steps wrote (the rest of a block is whatever the pool held).
  int32_t written[3] = {0, 0, 0};
  for (const Step& st : steps) {
    for (size_t s = 0; s < st.seqs.size(); ++s) written[s] = st.seqs[s].n_past + st.seqs[s].n_tokens;
  }
  const int64_t bs = kv.config().block_size;
  for (int64_t l = 0; l < m.config.n_layers; ++l) {
    for (int s = 0; s < 3; ++s) {
      for (int32_t p = 0; p < written[s]; ++p) {
        const int32_t b = kTables[s][static_cast<size_t>(p / bs)];
        out.kv.insert(out.kv.end(), kv.k_row(l, b, p % bs), kv.k_row(l, b, p % bs) + kv.row_bytes());
        out.kv.insert(out.kv.end(), kv.v_row(l, b, p % bs), kv.v_row(l, b, p % bs) + kv.row_bytes());
      }
    }
  }
  return out;
}

std::unique_ptr<KvCache> fresh_kv(const LlamaConfig& c) {
  auto kv = KvCache::create({c.n_layers, c.n_kv_heads, c.head_dim, 16, 16, DType::F16});
  EXPECT_TRUE(kv.ok()) << kv.message();
  return std::move(kv.value());
}

TEST(SplitRunner, CpuPartsGiveTheWholePassBitForBit) {
  LL3_REQUIRE_SHARED();
  for (const char* file : {"small-llama31-q4_k_m.gguf", "tiny-llama3-f32.gguf"}) {
    auto m = LlamaModel::load(test::shared_dir() + "/models/" + file);
    ASSERT_TRUE(m.ok()) << m.message();
    const LlamaModel& model = **m;
    const int64_t n = model.config.n_layers;
    ASSERT_GE(n, 2);
    const std::vector<Step> steps = two_steps(model.config.n_vocab);
    ThreadPool pool(2);
    std::unique_ptr<KvCache> kv_whole = fresh_kv(model.config);
    CpuRunner whole(model, *kv_whole, pool, 64);
    const Outputs want = run(whole, *kv_whole, model, steps);

    for (int64_t cut : {int64_t{0}, int64_t{1}, n - 1, n}) {
      for (bool output_in_back : {true, false}) {
        SCOPED_TRACE(std::string(file) + ": layers [0, " + std::to_string(cut) + ") in front, output layer " +
                     (output_in_back ? "in the back part" : "on its own"));
        std::unique_ptr<KvCache> kv = fresh_kv(model.config);
        auto part = [&](LayerRange r) { return std::make_unique<CpuRunner>(model, *kv, pool, 64, true, true, r); };
        SplitRunner split(cut > 0 ? part({0, cut, false}) : nullptr, part({cut, n, output_in_back}),
                          output_in_back ? nullptr : part({n, n, true}), model.config.dim, "cpu + cpu");
        EXPECT_EQ(split.max_batch_tokens(), 64);
        const Outputs got = run(split, *kv, model, steps);
        ASSERT_EQ(got.logits.size(), want.logits.size());
        EXPECT_EQ(std::memcmp(got.logits.data(), want.logits.data(), want.logits.size() * sizeof(float)), 0);
        EXPECT_EQ(std::memcmp(got.hidden.data(), want.hidden.data(), want.hidden.size() * sizeof(float)), 0);
        EXPECT_TRUE(got.kv == want.kv) << "the K / V rows written";
      }
    }
  }
}

TEST(SplitRunner, PartsRefuseTheWrongEnds) {
  LL3_REQUIRE_SHARED();
  auto m = LlamaModel::load(test::shared_dir() + "/models/tiny-llama3-f32.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  const LlamaModel& model = **m;
  const int64_t n = model.config.n_layers;
  std::unique_ptr<KvCache> kv = fresh_kv(model.config);
  ThreadPool pool(1);
  const std::vector<Step> steps = two_steps(model.config.n_vocab);
  const Step& st = steps[0];
  const BatchPlan plan{st.tokens, st.seqs, st.rows, {}};
  std::vector<float> logits(st.rows.size() * model.config.n_vocab), x(st.tokens.size() * model.config.dim, 0.5f);

  CpuRunner front(model, *kv, pool, 64, true, true, {0, 1, false});
  EXPECT_EQ(front.forward(plan, logits.data()).message(), "forward: this CPU runner holds part of the layers (use forward_part)");
  EXPECT_EQ(front.forward_part(plan, nullptr, nullptr, logits.data(), nullptr).message(),
            "forward_part: the residual stream goes out exactly when the output layer is not here");
  EXPECT_TRUE(front.forward_part(plan, nullptr, x.data(), nullptr, nullptr).ok());
  CpuRunner back(model, *kv, pool, 64, true, true, {1, n, true});
  EXPECT_EQ(back.forward_part(plan, nullptr, nullptr, logits.data(), nullptr).message(),
            "forward_part: the residual stream comes in exactly when the first layer is not layer 0");
  EXPECT_TRUE(back.forward_part(plan, x.data(), nullptr, logits.data(), nullptr).ok());
  // A bad plan fails in the first part, before any part writes the cache.
  std::vector<int32_t> bad = st.tokens;
  bad[0] = static_cast<int32_t>(model.config.n_vocab);
  CpuRunner whole(model, *kv, pool, 64);
  SplitRunner split(std::make_unique<CpuRunner>(model, *kv, pool, 64, true, true, LayerRange{0, 1, false}),
                    std::make_unique<CpuRunner>(model, *kv, pool, 64, true, true, LayerRange{1, n, true}), nullptr,
                    model.config.dim, "cpu + cpu");
  EXPECT_EQ(split.forward(BatchPlan{bad, st.seqs, st.rows, {}}, logits.data()).message(),
            whole.forward(BatchPlan{bad, st.seqs, st.rows, {}}, logits.data()).message());
}

// A block's version tells a device mirror to upload it again. A split's CPU front writes layers
// no mirror holds (the GPU's are the last ones), so its steps leave the versions alone; the part
// that runs the last layers counts its writes as changes.
TEST(SplitRunner, OnlyThePartWithTheLastLayersCountsAsAChangeOfTheBlocks) {
  LL3_REQUIRE_SHARED();
  auto m = LlamaModel::load(test::shared_dir() + "/models/tiny-llama3-f32.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  const LlamaModel& model = **m;
  const int64_t n = model.config.n_layers;
  std::unique_ptr<KvCache> kv = fresh_kv(model.config);
  ThreadPool pool(1);
  const std::vector<Step> steps = two_steps(model.config.n_vocab);
  const Step& st = steps[0];
  const BatchPlan plan{st.tokens, st.seqs, st.rows, {}};
  std::vector<float> logits(st.rows.size() * model.config.n_vocab), x(st.tokens.size() * model.config.dim);
  auto versions = [&] {
    std::vector<uint64_t> v;
    for (const std::vector<int32_t>& t : kTables) v.push_back(kv->version(t[0]));
    return v;
  };
  const std::vector<uint64_t> before = versions();
  CpuRunner front(model, *kv, pool, 64, true, true, {0, n - 1, false});
  ASSERT_TRUE(front.forward_part(plan, nullptr, x.data(), nullptr, nullptr).ok());
  EXPECT_EQ(versions(), before) << "the front's writes";
  CpuRunner back(model, *kv, pool, 64, true, true, {n - 1, n, true});
  ASSERT_TRUE(back.forward_part(plan, x.data(), nullptr, logits.data(), nullptr).ok());
  const std::vector<uint64_t> after = versions();
  for (size_t s = 0; s < after.size(); ++s) EXPECT_GT(after[s], before[s]) << "sequence " << s << "'s first block";
}

constexpr int64_t kGiB = int64_t{1} << 30;

GpuNeeds four_layers() {
  GpuNeeds n;
  n.layer_bytes = {10 * kGiB, 10 * kGiB, 10 * kGiB, 10 * kGiB};
  n.output_bytes = 15 * kGiB;
  n.fixed_bytes = 5 * kGiB;
  return n;
}

TEST(GpuPlacement, AsManyLastLayersAsFitThenTheOutputLayer) {
  struct Case {
    int64_t budget_gib;
    int requested;
    int64_t first_layer;
    bool output;
    int64_t bytes_gib;
  };
  const Case cases[] = {
      {100, -1, 0, true, 60},  // everything
      {60, -1, 0, true, 60},   // exactly
      {50, -1, 0, false, 45},  // every layer, the output layer on the CPU
      {30, -1, 2, false, 25},  // the last two layers
      {45, 2, 2, true, 40},    // two asked for: the output layer fits beside them
      {100, 1, 3, true, 30},
      {100, 99, 0, true, 60},  // more than the model has: all
      {100, 4, 0, true, 60},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("budget " + std::to_string(c.budget_gib) + " GiB, -ngl " + std::to_string(c.requested));
    Result<GpuPlacement> p = place_on_gpu(four_layers(), c.budget_gib * kGiB, c.requested);
    ASSERT_TRUE(p.ok()) << p.message();
    EXPECT_EQ(p.value().first_layer, c.first_layer);
    EXPECT_EQ(p.value().output, c.output);
    EXPECT_EQ(p.value().bytes, c.bytes_gib * kGiB);
  }
}

TEST(GpuPlacement, SaysWhatDoesNotFit) {
  EXPECT_EQ(place_on_gpu(four_layers(), 30 * kGiB, 3).message(),
            "3 layers on the GPU need 35.00 GiB of device memory and 30.00 GiB is available, which holds 2");
  EXPECT_EQ(place_on_gpu(four_layers(), 12 * kGiB, -1).message(),
            "1 layer on the GPU needs 15.00 GiB of device memory and 12.00 GiB is available, which holds 0");
  EXPECT_FALSE(place_on_gpu(four_layers(), 100 * kGiB, 0).ok());
  EXPECT_FALSE(place_on_gpu(four_layers(), 100 * kGiB, -2).ok());
}

}  // namespace
}  // namespace ll3
