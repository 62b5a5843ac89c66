// Perplexity and KL divergence over a text, with llama-perplexity's conventions: the text is
// tokenized once (BOS first), cut into non-overlapping chunks of n_ctx tokens, each chunk's first
// token replaced by BOS and evaluated from an empty cache, and the logits at positions
// [n_ctx/2, n_ctx-1) scored against the next token. The base log-probabilities for KL are
// stored in llama.cpp's `--kl-divergence-base` file format, so files are interchangeable:
//
//   char[8]  "_logits_"
//   uint32   n_ctx
//   int32    n_vocab
//   int32    n_chunk
//   int32    tokens[n_chunk * n_ctx]          the tokenized text (before the BOS substitution)
//   then per chunk, per scored position (n_ctx - 1 - n_ctx/2 of them) one record of
//   uint16   rec[kv] with kv = 2*((n_vocab+1)/2) + 4:
//            rec[0..1] float scale, rec[2..3] float min_log_prob (little endian),
//            rec[4 + i] q_i:  log p_i ~= scale * q_i + min_log_prob
//   (log-probabilities more than 16 nats below the best token are clamped to min_log_prob; the
//   quantization step is at most 16/65535 nats.) Size: ~2 bytes * n_vocab per scored token,
//   e.g. 256 KiB per token for Llama-3's 128256 entries (1000 scored tokens = 250 MiB).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace ll3 {

class SequenceEvaluator;

// uint16 entries per stored position (header floats included), as llama.cpp lays them out.
inline int64_t log_prob_record_size(int64_t n_vocab) { return 2 * ((n_vocab + 1) / 2) + 4; }

// Negative log-likelihood of `target` under softmax(logits[0..n_vocab)).
double token_nll(const float* logits, int64_t n_vocab, int32_t target);
// The same, and the row's quantized log-probabilities into rec (log_prob_record_size entries).
double token_nll_quantized(const float* logits, int64_t n_vocab, int32_t target, uint16_t* rec);

// One scored position compared with the base distribution stored in `base_rec`.
struct KlRow {
  double kld = 0;        // KL(base || this)
  float nll = 0;         // -log p(target) under this model
  float nll_base = 0;    // ... under the base
  float p_diff = 0;      // p(target) - p_base(target)
  bool same_top = false; // argmax agrees
};
KlRow kl_row(const float* logits, int64_t n_vocab, int32_t target, const uint16_t* base_rec);

// Mean and its standard error from sums, as llama.cpp computes them (error 0 for <= 10 values).
struct MeanErr {
  double mean = 0, err = 0;
};
MeanErr mean_and_uncertainty(double sum, double sum2, int64_t count);

// Running perplexity: exp(mean nll) +/- ppl * stderr(nll).
struct PplAccum {
  double sum = 0, sum2 = 0;
  int64_t count = 0;
  void add(double nll) {
    sum += nll;
    sum2 += nll * nll;
    ++count;
  }
  double ppl() const;
  double ppl_error() const;  // 0 until two values
};

// Everything llama-perplexity --kl-divergence reports.
struct KlSummary {
  int64_t count = 0;
  MeanErr ppl, ppl_base, ln_ppl_ratio, ppl_ratio, ppl_diff;
  double ln_ppl_correlation = 0;
  MeanErr kld;
  double kld_max = 0, kld_p999 = 0, kld_p99 = 0, kld_median = 0, kld_p10 = 0, kld_p5 = 0, kld_p1 = 0,
         kld_min = 0;
  MeanErr p_diff;  // mean of p - p_base
  double p_diff_max = 0, p_diff_p99 = 0, p_diff_median = 0, p_diff_p1 = 0, p_diff_min = 0;
  MeanErr p_diff_rms;
  MeanErr same_top;  // fraction
};

class KlAccum {
 public:
  // Room for n values (the per-token KL and Δp lists the percentiles need).
  void reserve(int64_t n);
  void add(const KlRow& r);
  int64_t count() const { return count_; }
  KlSummary summary() const;  // sorts copies; call at the end or per chunk

 private:
  double sum_nll_ = 0, sum_nll2_ = 0, sum_nll_base_ = 0, sum_nll_base2_ = 0, sum_nll_nll_base_ = 0;
  double sum_kld_ = 0, sum_kld2_ = 0, sum_p_diff_ = 0, sum_p_diff2_ = 0, sum_p_diff4_ = 0;
  int64_t n_same_top_ = 0, count_ = 0;
  std::vector<float> kld_values_, p_diff_values_;
};

// Linear interpolation between order statistics of sorted values (fraction in [0, 1]).
double percentile_sorted(const std::vector<float>& sorted, double fraction);

// --- the base log-probability file ---

class LogProbWriter {
 public:
  static Result<std::unique_ptr<LogProbWriter>> create(const std::string& path, int64_t n_ctx, int64_t n_vocab,
                                                       int64_t n_chunk, std::span<const int32_t> tokens);
  ~LogProbWriter();
  // records: (n_ctx - 1 - n_ctx/2, log_prob_record_size(n_vocab)) for the next chunk.
  Status write_chunk(std::span<const uint16_t> records);
  Status close();

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

class LogProbReader {
 public:
  // Checks the header and that the file size matches it exactly.
  static Result<std::unique_ptr<LogProbReader>> open(const std::string& path);
  ~LogProbReader();
  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_vocab() const { return n_vocab_; }
  int64_t n_chunk() const { return n_chunk_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Reads chunk `c`'s records into out (resized once; no allocation after the first call) and
  // checks every record's scale and offset are finite.
  Status read_chunk(int64_t c, std::vector<uint16_t>& out);

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
  int64_t n_ctx_ = 0, n_vocab_ = 0, n_chunk_ = 0, data_offset_ = 0;
  std::vector<int32_t> tokens_;
};

// --- the whole run ---

struct PerplexityOptions {
  int64_t n_ctx = 512;
  int64_t max_chunks = -1;  // < 0: all whole chunks of the text
  std::string save_path;    // write the base log-probabilities here
  LogProbReader* kl_base = nullptr;
};

struct PerplexityProgress {
  int64_t chunk = 0;  // chunks done
  int64_t n_chunk = 0;
  double seconds = 0;  // since the start
  const PplAccum* ppl = nullptr;
  const KlAccum* kl = nullptr;  // with a base
};

struct PerplexityResult {
  int64_t n_chunk = 0;
  int64_t n_tokens = 0;  // tokens of the text
  PplAccum ppl;
  std::vector<float> nll;  // per scored position, in order
  bool has_kl = false;
  KlSummary kl;
};

// tokens: the whole text tokenized with BOS first. The evaluator must hold n_ctx positions.
// Fails on a text shorter than one chunk, or one that does not match the base file.
Result<PerplexityResult> compute_perplexity(SequenceEvaluator& evaluator, std::span<const int32_t> tokens, int32_t bos_id,
                                            const PerplexityOptions& opt,
                                            const std::function<void(const PerplexityProgress&)>& progress = {});

}  // namespace ll3
