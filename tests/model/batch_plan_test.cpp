// Several sequences in one forward step (what continuous batching will do): each sequence's
// logits equal those of running it alone, whatever its KV blocks and its place in the batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kv/block_pool.h"
#include "backend/cpu/cpu_runner.h"
#include "reference_llama.h"
#include "test_support.h"

namespace ll3 {
namespace {

struct Seq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;
  int32_t n_past = 0;
};

TEST(BatchPlan, MixedPrefillAndDecodeOfThreeSequences) {
  LL3_REQUIRE_SHARED();
  auto m = LlamaModel::load(test::shared_dir() + "/models/tiny-llama3-f32.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  const LlamaModel& model = **m;
  KvCacheConfig kc{model.config.n_layers, model.config.n_kv_heads, model.config.head_dim, 16, 64, DType::F32};
  auto kv = KvCache::create(kc);
  ASSERT_TRUE(kv.ok()) << kv.message();
  ThreadPool pool(2);
  CpuRunner runner(model, **kv, pool, 128);
  const int64_t V = model.config.n_vocab;

  std::mt19937 rng(8);
  std::vector<Seq> seqs(3);
  const int lengths[3] = {37, 5, 60};
  for (int s = 0; s < 3; ++s) {
    seqs[s].tokens.push_back(128000);
    while (static_cast<int>(seqs[s].tokens.size()) < lengths[s]) seqs[s].tokens.push_back(static_cast<int32_t>(rng() % 128000));
  }
  // Interleave block allocation so the sequences' blocks are not contiguous.
  BlockPool blocks(64, 16, 0);
  for (int round = 0; round < 4; ++round)
    for (Seq& s : seqs) s.blocks.push_back(blocks.allocate());

  // Step 1: prompts of sequences 0 and 2 minus their last tokens, sequence 1 whole.
  // Step 2: the last tokens of 0 and 2 (decode) plus nothing of 1. Logits of every last token.
  std::vector<float> out(3 * V);
  for (int step = 0; step < 2; ++step) {
    std::vector<int32_t> tokens, rows;
    std::vector<SeqBatch> plan_seqs;
    std::vector<int> which;
    for (int s = 0; s < 3; ++s) {
      Seq& q = seqs[s];
      const int32_t total = static_cast<int32_t>(q.tokens.size());
      const int32_t end = step == 0 ? (s == 1 ? total : total - 1) : total;
      if (end <= q.n_past) continue;
      SeqBatch b;
      b.n_past = q.n_past;
      b.token_begin = static_cast<int32_t>(tokens.size());
      b.n_tokens = end - q.n_past;
      b.block_table = q.blocks;
      tokens.insert(tokens.end(), q.tokens.begin() + q.n_past, q.tokens.begin() + end);
      if (end == total) {
        rows.push_back(static_cast<int32_t>(tokens.size()) - 1);
        which.push_back(s);
      }
      plan_seqs.push_back(b);
      q.n_past = end;
    }
    std::vector<float> logits(rows.size() * V);
    // The final hidden rows of the same positions (embeddings): what the LM head read.
    const int64_t dim = model.config.dim;
    std::vector<float> hidden(rows.size() * dim);
    BatchPlan plan{tokens, plan_seqs, rows, rows};
    ASSERT_TRUE(runner.forward(plan, logits.data(), hidden.data()).ok());
    std::vector<uint8_t> wbuf(model.output.row_bytes);
    std::vector<float> w(dim);
    for (size_t i = 0; i < which.size(); ++i) {
      std::copy(logits.begin() + i * V, logits.begin() + (i + 1) * V, out.begin() + which[i] * V);
      for (int64_t v : {int64_t{0}, int64_t{9906}, V - 1}) {
        model.output.traits->to_float(model.output.row_in(v, wbuf.data()), w.data(), dim);
        double dot = 0;
        for (int64_t j = 0; j < dim; ++j) dot += static_cast<double>(w[j]) * hidden[i * dim + j];
        EXPECT_NEAR(dot, logits[i * V + v], 1e-4 * (1 + std::fabs(dot))) << "row " << i << " token " << v;
      }
    }
  }
  for (int s = 0; s < 3; ++s) {
    const int64_t last = static_cast<int64_t>(seqs[s].tokens.size()) - 1;
    auto ref = test::reference_logits(model, seqs[s].tokens, {last});
    EXPECT_LE(test::rel_l2(out.data() + s * V, ref[0].data(), V), 1e-4) << "sequence " << s;
  }
}

// A sequence past two chunks of positions (kernels/attention.h), prefilled in steps of 128
// rows and then decoded: on 8 threads its (run, KV head) pairs are split by chunks over the
// threads and merged; on one they are not. Every step's logits have the same bits.
TEST(BatchPlan, AttentionSplitOverThreadsHasTheSameBits) {
  LL3_REQUIRE_SHARED();
  auto m = LlamaModel::load(test::shared_dir() + "/models/tiny-llama3-f32.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  const LlamaModel& model = **m;
  const int64_t V = model.config.n_vocab, n = 2300;
  KvCacheConfig kc{model.config.n_layers, model.config.n_kv_heads, model.config.head_dim, 16, 160, DType::F16};
  std::mt19937 rng(12);
  std::vector<int32_t> tokens{128000};
  while (static_cast<int64_t>(tokens.size()) < n) tokens.push_back(static_cast<int32_t>(rng() % 128000));
  std::vector<int32_t> blocks(150);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>((i * 37) % 150);  // out of order
  std::vector<std::vector<float>> logits[2];
  int64_t splits[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    auto kv = KvCache::create(kc);
    ASSERT_TRUE(kv.ok()) << kv.message();
    ThreadPool pool(k == 0 ? 1 : 8);
    CpuRunner runner(model, **kv, pool, 128);
    for (int32_t past = 0; past < n;) {
      const int32_t step = std::min<int32_t>(past < 2176 ? 128 : 1, static_cast<int32_t>(n) - past);
      std::vector<int32_t> step_tokens(tokens.begin() + past, tokens.begin() + past + step), rows{step - 1};
      SeqBatch b;
      b.n_past = past;
      b.token_begin = 0;
      b.n_tokens = step;
      b.block_table = blocks;
      const std::vector<SeqBatch> seqs{b};
      BatchPlan plan{step_tokens, seqs, rows, {}};
      std::vector<float> out(static_cast<size_t>(V));
      ASSERT_TRUE(runner.forward(plan, out.data(), nullptr).ok());
      logits[k].push_back(std::move(out));
      splits[k] += runner.attention_splits();
      past += step;
    }
  }
  EXPECT_EQ(splits[0], 0);
  EXPECT_GT(splits[1], 0);
  ASSERT_EQ(logits[0].size(), logits[1].size());
  for (size_t i = 0; i < logits[0].size(); ++i) {
    ASSERT_EQ(std::memcmp(logits[0][i].data(), logits[1][i].data(), static_cast<size_t>(V) * sizeof(float)), 0)
        << "step " << i;
  }
}

TEST(BatchPlan, RejectsInconsistentPlans) {
  LL3_REQUIRE_SHARED();
  auto m = LlamaModel::load(test::shared_dir() + "/models/tiny-llama3-f32.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  KvCacheConfig kc{(*m)->config.n_layers, (*m)->config.n_kv_heads, (*m)->config.head_dim, 16, 4, DType::F16};
  auto kv = KvCache::create(kc);
  ASSERT_TRUE(kv.ok());
  ThreadPool pool(1);
  CpuRunner runner(**m, **kv, pool, 8);
  std::vector<float> logits((*m)->config.n_vocab);
  std::vector<int32_t> tokens{1, 2, 3};
  std::vector<int32_t> blocks{0};
  std::vector<int32_t> rows{2};
  SeqBatch s;
  s.n_tokens = 3;
  s.n_past = 15;  // positions 15..17 need two blocks
  s.block_table = blocks;
  std::vector<SeqBatch> seqs{s};
  Status st = runner.forward(BatchPlan{tokens, seqs, rows, {}}, logits.data());
  EXPECT_EQ(st.message(), "forward: block table of 1 blocks cannot hold 18 positions");
  seqs[0].n_past = 0;
  seqs[0].n_tokens = 2;
  st = runner.forward(BatchPlan{tokens, seqs, rows, {}}, logits.data());
  EXPECT_EQ(st.message(), "forward: sequences do not cover the batch");
  std::vector<int32_t> many(9, 1);
  seqs[0].n_tokens = 9;
  st = runner.forward(BatchPlan{many, seqs, rows, {}}, logits.data());
  EXPECT_EQ(st.message(), "forward: batch of 9 tokens exceeds the maximum of 8");
  std::vector<int32_t> bad_block{7};
  seqs[0].n_tokens = 3;
  seqs[0].block_table = bad_block;
  st = runner.forward(BatchPlan{tokens, seqs, rows, {}}, logits.data());
  EXPECT_EQ(st.message(), "forward: KV block id 7 out of range");
  seqs[0].block_table = blocks;
  std::vector<int32_t> hidden_rows{3};
  std::vector<float> hidden((*m)->config.dim);
  st = runner.forward(BatchPlan{tokens, seqs, rows, hidden_rows}, logits.data(), hidden.data());
  EXPECT_EQ(st.message(), "forward: hidden row 3 out of range");
  hidden_rows = {0};
  st = runner.forward(BatchPlan{tokens, seqs, rows, hidden_rows}, logits.data());
  EXPECT_EQ(st.message(), "forward: hidden rows asked for without a buffer");
}

}  // namespace
}  // namespace ll3
