// Perplexity and KL divergence: the row math against direct double-precision computations on
// random logits, the whole run against an independent per-chunk computation on the tiny model,
// and the base file's checks.
#include "eval/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "eval/sequence_evaluator.h"
#include "model/model_tokenizer.h"
#include "test_support.h"

namespace ll3 {
namespace {

std::vector<double> log_softmax_double(const float* l, int64_t n) {
  double m = l[0];
  for (int64_t i = 1; i < n; ++i) m = std::max(m, static_cast<double>(l[i]));
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(l[i] - m);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = l[i] - m - std::log(s);
  return out;
}

TEST(PerplexityMath, NllMatchesDoubleLogSoftmax) {
  for (int64_t n : {2, 7, 1001}) {
    auto l = test::random_normal(n, static_cast<uint32_t>(n), 4.f);
    auto lp = log_softmax_double(l.data(), n);
    for (int32_t t : {0, static_cast<int32_t>(n / 2), static_cast<int32_t>(n - 1)}) {
      EXPECT_NEAR(token_nll(l.data(), n, t), -lp[static_cast<size_t>(t)], 1e-5);
      std::vector<uint16_t> rec(static_cast<size_t>(log_prob_record_size(n)));
      EXPECT_NEAR(token_nll_quantized(l.data(), n, t, rec.data()), -lp[static_cast<size_t>(t)], 1e-5);
    }
  }
}

TEST(PerplexityMath, QuantizedLogProbsWithinHalfAStep) {
  const int64_t n = 3001;  // odd: the record is padded
  auto l = test::random_normal(n, 7, 6.f);
  auto lp = log_softmax_double(l.data(), n);
  std::vector<uint16_t> rec(static_cast<size_t>(log_prob_record_size(n)), 0xffff);
  token_nll_quantized(l.data(), n, 3, rec.data());
  float scale, min_lp;
  std::memcpy(&scale, rec.data(), 4);
  std::memcpy(&min_lp, rec.data() + 2, 4);
  EXPECT_GT(scale, 0.f);
  EXPECT_LE(scale, 16.f / 65535.f * 1.0001f);
  const double best = *std::max_element(lp.begin(), lp.end());
  for (int64_t i = 0; i < n; ++i) {
    const double got = scale * rec[static_cast<size_t>(4 + i)] + min_lp;
    if (lp[static_cast<size_t>(i)] > best - 16) {
      EXPECT_NEAR(got, lp[static_cast<size_t>(i)], 0.5 * scale + 1e-5) << i;
    } else {
      EXPECT_FLOAT_EQ(static_cast<float>(got), min_lp);  // clamped
    }
  }
  EXPECT_EQ(rec.back(), 0);  // padding cleared
}

TEST(PerplexityMath, KlAgainstDirectComputation) {
  const int64_t n = 5000;
  auto base = test::random_normal(n, 11, 4.f);
  auto other = base;
  std::mt19937 rng(5);
  std::normal_distribution<float> noise(0.f, 0.3f);
  for (float& x : other) x += noise(rng);
  std::vector<uint16_t> rec(static_cast<size_t>(log_prob_record_size(n)));
  token_nll_quantized(base.data(), n, 17, rec.data());

  // Against itself (shifted by a constant, which changes no probability): ~0, same top.
  auto shifted = base;
  for (float& x : shifted) x += 3.25f;
  KlRow self = kl_row(shifted.data(), n, 17, rec.data());
  EXPECT_LT(std::fabs(self.kld), 2e-4);
  EXPECT_TRUE(self.same_top);
  EXPECT_NEAR(self.nll, self.nll_base, 2e-4);

  auto lb = log_softmax_double(base.data(), n), lo = log_softmax_double(other.data(), n);
  double kl = 0;
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    kl += std::exp(lb[k]) * (lb[k] - lo[k]);
  }
  KlRow r = kl_row(other.data(), n, 17, rec.data());
  EXPECT_GT(kl, 1e-3);
  EXPECT_NEAR(r.kld, kl, 2e-3 * kl + 2e-4);
  EXPECT_NEAR(r.nll, -lo[17], 1e-4);
  EXPECT_NEAR(r.p_diff, std::exp(lo[17]) - std::exp(lb[17]), 1e-4);
}

TEST(PerplexityMath, StatisticsAsLlamaCppComputesThem) {
  std::vector<float> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 1.0), 4.0);
  EXPECT_NEAR(percentile_sorted(v, 0.99), 3.97, 1e-6);
  // Standard error of the mean with the (count - 1) correction.
  PplAccum a;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0.5, 4.0);
  std::vector<double> xs;
  for (int i = 0; i < 200; ++i) xs.push_back(u(rng));
  for (double x : xs) a.add(x);
  double mean = 0;
  for (double x : xs) mean += x / xs.size();
  double var = 0;
  for (double x : xs) var += (x - mean) * (x - mean) / xs.size();
  EXPECT_NEAR(a.ppl(), std::exp(mean), 1e-9 * std::exp(mean));
  EXPECT_NEAR(a.ppl_error(), std::exp(mean) * std::sqrt(var / 199), 1e-9);
}

// --- the whole run on the tiny model ---

std::string random_text(int words, uint32_t seed) {
  static const char* kWords[] = {"the",   "model",  "reads", "a",     "long",  "river", "of",      "tokens", "and",
                                 "counts", "every", "word",  "that",  "falls", "into",  "its",     "small",  "window",
                                 "while",  "green", "hills", "sleep", "under", "quiet", "numbers", "seven",  "apples"};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, sizeof(kWords) / sizeof(kWords[0]) - 1);
  std::string s;
  for (int i = 0; i < words; ++i) {
    if (i) s += (i % 13 == 0) ? ". " : " ";
    s += kWords[pick(rng)];
  }
  return s;
}

struct Tiny {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<SequenceEvaluator> session;
};

Tiny load_tiny(int64_t ctx) {
  Tiny t;
  auto m = LlamaModel::load(test::shared_dir() + "/models/tiny-llama3-f32.gguf");
  EXPECT_TRUE(m.ok()) << m.message();
  t.model = std::move(m.value());
  auto tk = load_model_tokenizer(*t.model);
  EXPECT_TRUE(tk.ok()) << tk.message();
  t.tok = std::move(tk.value());
  EvaluatorOptions o;
  o.context = ctx;
  o.batch = 32;
  o.threads = 2;
  o.kv_type = DType::F32;
  auto s = SequenceEvaluator::create(*t.model, o);
  EXPECT_TRUE(s.ok()) << s.message();
  t.session = std::move(s.value());
  return t;
}

TEST(Perplexity, MatchesIndependentComputation) {
  LL3_REQUIRE_SHARED();
  const int64_t ctx = 48;
  Tiny t = load_tiny(ctx);
  std::vector<int32_t> tokens = t.tok->encode(random_text(150, 1), true, false);
  ASSERT_GE(tokens.size(), 3u * ctx + 5);  // a partial last chunk, which is ignored
  int progress_calls = 0;
  PerplexityOptions opt;
  opt.n_ctx = ctx;
  auto r = compute_perplexity(*t.session, tokens, t.tok->bos_id(), opt,
                              [&](const PerplexityProgress& p) { EXPECT_EQ(p.chunk, ++progress_calls); });
  ASSERT_TRUE(r.ok()) << r.message();
  const int64_t n_chunk = static_cast<int64_t>(tokens.size()) / ctx;
  EXPECT_EQ(r->n_chunk, n_chunk);
  EXPECT_EQ(progress_calls, n_chunk);
  ASSERT_EQ(r->ppl.count, n_chunk * (ctx - 1 - ctx / 2));

  // Independently: each chunk in one eval with every row's logits, BOS in front, log-softmax
  // in double over positions [ctx/2, ctx-1).
  const int64_t V = t.session->n_vocab();
  double sum = 0;
  int64_t count = 0;
  for (int64_t c = 0; c < n_chunk; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * ctx, tokens.begin() + (c + 1) * ctx);
    chunk[0] = t.tok->bos_id();
    t.session->truncate(0);
    ASSERT_TRUE(t.session->eval(chunk, true).ok());
    for (int64_t i = ctx / 2; i < ctx - 1; ++i) {
      auto lp = log_softmax_double(t.session->logits().data() + i * V, V);
      const double nll = -lp[static_cast<size_t>(chunk[static_cast<size_t>(i + 1)])];
      EXPECT_NEAR(r->nll[static_cast<size_t>(count)], nll, 1e-3) << "chunk " << c << " pos " << i;
      sum += nll;
      ++count;
    }
  }
  EXPECT_NEAR(r->ppl.ppl(), std::exp(sum / count), 1e-4 * std::exp(sum / count));
  EXPECT_GT(r->ppl.ppl_error(), 0);

  // --chunks 1: only the first chunk.
  opt.max_chunks = 1;
  auto one = compute_perplexity(*t.session, tokens, t.tok->bos_id(), opt);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->ppl.count, ctx - 1 - ctx / 2);
  EXPECT_FLOAT_EQ(one->nll[0], r->nll[0]);
}

TEST(Perplexity, SelfKlIsZeroAndBaseMismatchesAreRejected) {
  LL3_REQUIRE_SHARED();
  const int64_t ctx = 32;
  Tiny t = load_tiny(ctx);
  std::vector<int32_t> tokens = t.tok->encode(random_text(80, 2), true, false);
  const std::string dir = test::temp_dir();
  const std::string path = dir + "/base.bin";
  PerplexityOptions opt;
  opt.n_ctx = ctx;
  opt.save_path = path;
  auto saved = compute_perplexity(*t.session, tokens, t.tok->bos_id(), opt);
  ASSERT_TRUE(saved.ok()) << saved.message();
  const int64_t n_scored = saved->ppl.count;

  auto reader = LogProbReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.message();
  EXPECT_EQ((*reader)->n_ctx(), ctx);
  EXPECT_EQ((*reader)->n_chunk(), saved->n_chunk);
  opt.save_path.clear();
  opt.kl_base = reader->get();
  auto self = compute_perplexity(*t.session, tokens, t.tok->bos_id(), opt);
  ASSERT_TRUE(self.ok()) << self.message();
  ASSERT_TRUE(self->has_kl);
  EXPECT_EQ(self->kl.count, n_scored);
  EXPECT_LT(std::fabs(self->kl.kld.mean), 1e-5);  // only the base's 16-bit rounding
  EXPECT_LT(self->kl.kld_max, 1e-4);
  EXPECT_DOUBLE_EQ(self->kl.same_top.mean, 1.0);
  EXPECT_NEAR(self->kl.ppl.mean, saved->ppl.ppl(), 1e-4 * saved->ppl.ppl());
  // The base file clamps log-probabilities 16 nats below the best token (llama.cpp's format),
  // which a random-weight model's targets often are: its base perplexity can only come out lower.
  EXPECT_LE(self->kl.ppl_base.mean, saved->ppl.ppl() * (1 + 1e-4));
  EXPECT_GT(self->kl.ppl_base.mean, 1.0);

  // Another text: rejected, naming the first differing token.
  std::vector<int32_t> other = t.tok->encode(random_text(80, 3), true, false);
  auto bad = compute_perplexity(*t.session, other, t.tok->bos_id(), opt);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("different text"), std::string::npos) << bad.message();
  // Another context.
  PerplexityOptions opt16 = opt;
  opt16.n_ctx = 16;
  bad = compute_perplexity(*t.session, tokens, t.tok->bos_id(), opt16);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("context of 32"), std::string::npos) << bad.message();

  // A truncated file and one with a wrong magic.
  std::string bytes = test::read_file(path);
  test::write_file(dir + "/cut.bin", bytes.substr(0, bytes.size() - 100));
  auto cut = LogProbReader::open(dir + "/cut.bin");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.message().find("truncated"), std::string::npos) << cut.message();
  std::string wrong = bytes;
  wrong[1] = 'L';
  test::write_file(dir + "/magic.bin", wrong);
  auto mg = LogProbReader::open(dir + "/magic.bin");
  ASSERT_FALSE(mg.ok());
  EXPECT_NE(mg.message().find("not a log-probability file"), std::string::npos) << mg.message();
  // A corrupt record header (NaN scale) is caught when its chunk is read.
  std::string nan_rec = bytes;
  const size_t rec0 = 20 + 4 * static_cast<size_t>(saved->n_chunk * ctx);
  const float qnan = std::nanf("");
  std::memcpy(&nan_rec[rec0], &qnan, 4);
  test::write_file(dir + "/nan.bin", nan_rec);
  auto nr = LogProbReader::open(dir + "/nan.bin");
  ASSERT_TRUE(nr.ok());
  opt.kl_base = nr->get();
  bad = compute_perplexity(*t.session, tokens, t.tok->bos_id(), opt);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("corrupt record"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace ll3
