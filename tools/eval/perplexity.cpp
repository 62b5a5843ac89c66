#include "eval/perplexity.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

#include "eval/sequence_evaluator.h"

namespace ll3 {

namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
// Log-probabilities further than this below the best are clamped (llama.cpp's choice: the
// KL terms they would add are below e^-16 each).
constexpr float kLogProbRange = 16.f;

struct RowStats {
  float max = 0;
  int32_t imax = 0;
  double log_sum_exp = 0;  // log sum exp(l - max)
};

RowStats row_stats(const float* l, int64_t n) {
  RowStats s;
  s.max = l[0];
  for (int64_t i = 1; i < n; ++i) {
    if (l[i] > s.max) {
      s.max = l[i];
      s.imax = static_cast<int32_t>(i);
    }
  }
  // expf in float, summed in double: the accuracy llama.cpp's numbers have.
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(l[i] - s.max);
  s.log_sum_exp = std::log(sum);
  return s;
}

float rec_float(const uint16_t* rec, int k) {
  float v;
  std::memcpy(&v, rec + 2 * k, sizeof v);
  return v;
}

}  // namespace

double token_nll(const float* logits, int64_t n_vocab, int32_t target) {
  RowStats s = row_stats(logits, n_vocab);
  return static_cast<double>(s.max) + s.log_sum_exp - logits[target];
}

double token_nll_quantized(const float* logits, int64_t n_vocab, int32_t target, uint16_t* rec) {
  RowStats s = row_stats(logits, n_vocab);
  float min_logit = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) min_logit = std::min(min_logit, logits[i]);
  min_logit = std::max(min_logit, s.max - kLogProbRange);
  const float lse = static_cast<float>(s.log_sum_exp);
  const float min_log_prob = min_logit - s.max - lse;
  const float scale = (s.max - min_logit) / 65535.f;
  std::memcpy(rec, &scale, sizeof scale);
  std::memcpy(rec + 2, &min_log_prob, sizeof min_log_prob);
  uint16_t* q = rec + 4;
  if (scale > 0) {
    const float inv = 1.f / scale;
    for (int64_t i = 0; i < n_vocab; ++i) {
      q[i] = logits[i] > min_logit ? static_cast<uint16_t>(std::min(65535.f, std::nearbyint(inv * (logits[i] - min_logit))))
                                   : uint16_t{0};
    }
  } else {
    std::memset(q, 0, static_cast<size_t>(n_vocab) * sizeof(uint16_t));
  }
  const int64_t pad = log_prob_record_size(n_vocab) - 4 - n_vocab;
  if (pad > 0) std::memset(q + n_vocab, 0, static_cast<size_t>(pad) * sizeof(uint16_t));
  return static_cast<double>(s.max) + s.log_sum_exp - logits[target];
}

KlRow kl_row(const float* logits, int64_t n_vocab, int32_t target, const uint16_t* base_rec) {
  RowStats s = row_stats(logits, n_vocab);
  const float scale = rec_float(base_rec, 0);
  const float min_log_prob = rec_float(base_rec, 1);
  const uint16_t* q = base_rec + 4;
  KlRow r;
  const float log_norm = s.max + static_cast<float>(s.log_sum_exp);  // log p_i = l_i - log_norm
  r.nll = log_norm - logits[target];
  r.nll_base = -(scale * q[target] + min_log_prob);
  double kld = 0;
  int32_t imax_base = 0;
  uint16_t qmax = q[0];
  for (int64_t i = 0; i < n_vocab; ++i) {
    if (q[i] > qmax) {
      qmax = q[i];
      imax_base = static_cast<int32_t>(i);
    }
    const float lp_base = scale * q[i] + min_log_prob;
    if (lp_base > -kLogProbRange) kld += std::exp(lp_base) * (lp_base - (logits[i] - log_norm));
  }
  r.kld = kld;
  r.same_top = imax_base == s.imax;
  r.p_diff = std::exp(-r.nll) - std::exp(-r.nll_base);
  return r;
}

MeanErr mean_and_uncertainty(double sum, double sum2, int64_t count) {
  MeanErr m;
  if (count < 1) return m;
  m.mean = sum / count;
  const double var = sum2 / count - m.mean * m.mean;
  m.err = var > 0 && count > 10 ? std::sqrt(var / (count - 1)) : 0.0;
  return m;
}

double PplAccum::ppl() const { return count > 0 ? std::exp(sum / count) : 0.0; }

double PplAccum::ppl_error() const {
  if (count < 2) return 0;
  const double mean = sum / count;
  const double var = sum2 / count - mean * mean;
  return var > 0 ? std::sqrt(var / (count - 1)) * ppl() : 0.0;
}

void KlAccum::reserve(int64_t n) {
  kld_values_.reserve(static_cast<size_t>(n));
  p_diff_values_.reserve(static_cast<size_t>(n));
}

void KlAccum::add(const KlRow& r) {
  sum_nll_ += r.nll;
  sum_nll2_ += static_cast<double>(r.nll) * r.nll;
  sum_nll_base_ += r.nll_base;
  sum_nll_base2_ += static_cast<double>(r.nll_base) * r.nll_base;
  sum_nll_nll_base_ += static_cast<double>(r.nll) * r.nll_base;
  sum_kld_ += r.kld;
  sum_kld2_ += r.kld * r.kld;
  const double d2 = static_cast<double>(r.p_diff) * r.p_diff;
  sum_p_diff_ += r.p_diff;
  sum_p_diff2_ += d2;
  sum_p_diff4_ += d2 * d2;
  n_same_top_ += r.same_top ? 1 : 0;
  ++count_;
  kld_values_.push_back(static_cast<float>(r.kld));
  p_diff_values_.push_back(r.p_diff);
}

double percentile_sorted(const std::vector<float>& v, double fraction) {
  if (v.empty()) return 0;
  if (fraction <= 0) return v.front();
  if (fraction >= 1) return v.back();
  double p = fraction * static_cast<double>(v.size() - 1);
  size_t i = static_cast<size_t>(p);
  p -= static_cast<double>(i);
  return (1 - p) * v[i] + p * v[std::min(i + 1, v.size() - 1)];
}

KlSummary KlAccum::summary() const {
  KlSummary k;
  k.count = count_;
  if (count_ == 0) return k;
  const MeanErr lp = mean_and_uncertainty(sum_nll_, sum_nll2_, count_);
  const MeanErr lb = mean_and_uncertainty(sum_nll_base_, sum_nll_base2_, count_);
  // Covariance of the two mean log-perplexities (the same tokens, so strongly correlated).
  const double cov = count_ < 10 ? 0.0
                                 : (sum_nll_nll_base_ / count_ - (sum_nll_ / count_) * (sum_nll_base_ / count_)) /
                                       static_cast<double>(count_ - 1);
  k.ppl = {std::exp(lp.mean), std::exp(lp.mean) * lp.err};
  k.ppl_base = {std::exp(lb.mean), std::exp(lb.mean) * lb.err};
  k.ln_ppl_correlation = lp.err > 0 && lb.err > 0 ? cov / (lp.err * lb.err) : 0.0;
  const double ratio_var = lp.err * lp.err + lb.err * lb.err - 2 * cov;
  k.ln_ppl_ratio = {lp.mean - lb.mean, ratio_var > 0 ? std::sqrt(ratio_var) : 0.0};
  k.ppl_ratio = {std::exp(k.ln_ppl_ratio.mean), std::exp(k.ln_ppl_ratio.mean) * k.ln_ppl_ratio.err};
  const double diff_var = k.ppl.err * k.ppl.err + k.ppl_base.err * k.ppl_base.err -
                          2 * k.ppl.mean * k.ppl_base.mean * cov;
  k.ppl_diff = {k.ppl.mean - k.ppl_base.mean, diff_var > 0 ? std::sqrt(diff_var) : 0.0};

  k.kld = mean_and_uncertainty(sum_kld_, sum_kld2_, count_);
  std::vector<float> s = kld_values_;
  std::sort(s.begin(), s.end());
  k.kld_min = s.front();
  k.kld_max = s.back();
  k.kld_median = percentile_sorted(s, 0.5);
  k.kld_p999 = percentile_sorted(s, 0.999);
  k.kld_p99 = percentile_sorted(s, 0.99);
  k.kld_p10 = percentile_sorted(s, 0.10);
  k.kld_p5 = percentile_sorted(s, 0.05);
  k.kld_p1 = percentile_sorted(s, 0.01);

  k.p_diff = mean_and_uncertainty(sum_p_diff_, sum_p_diff2_, count_);
  s = p_diff_values_;
  std::sort(s.begin(), s.end());
  k.p_diff_min = s.front();
  k.p_diff_max = s.back();
  k.p_diff_median = percentile_sorted(s, 0.5);
  k.p_diff_p99 = percentile_sorted(s, 0.99);
  k.p_diff_p1 = percentile_sorted(s, 0.01);
  const MeanErr mse = mean_and_uncertainty(sum_p_diff2_, sum_p_diff4_, count_);
  const double rms = std::sqrt(mse.mean);
  k.p_diff_rms = {rms, rms > 0 ? 0.5 / rms * mse.err : 0.0};

  const double top = static_cast<double>(n_same_top_) / count_;
  k.same_top = {top, count_ > 1 ? std::sqrt(top * (1 - top) / (count_ - 1)) : 0.0};
  return k;
}

// --- file ---

LogProbWriter::~LogProbWriter() {
  if (f_ != nullptr) std::fclose(f_);
}

Result<std::unique_ptr<LogProbWriter>> LogProbWriter::create(const std::string& path, int64_t n_ctx, int64_t n_vocab,
                                                             int64_t n_chunk, std::span<const int32_t> tokens) {
  if (static_cast<int64_t>(tokens.size()) != n_ctx * n_chunk) {
    return Status::errorf("%s: %zu tokens given for %lld chunks of %lld", path.c_str(), tokens.size(),
                          static_cast<long long>(n_chunk), static_cast<long long>(n_ctx));
  }
  std::unique_ptr<LogProbWriter> w(new LogProbWriter());
  w->path_ = path;
  w->f_ = std::fopen(path.c_str(), "wb");
  if (w->f_ == nullptr) return Status::errorf("cannot create %s: %s", path.c_str(), std::strerror(errno));
  const uint32_t ctx32 = static_cast<uint32_t>(n_ctx);
  const int32_t vocab32 = static_cast<int32_t>(n_vocab), chunk32 = static_cast<int32_t>(n_chunk);
  bool ok = std::fwrite(kMagic, 1, 8, w->f_) == 8 && std::fwrite(&ctx32, 4, 1, w->f_) == 1 &&
            std::fwrite(&vocab32, 4, 1, w->f_) == 1 && std::fwrite(&chunk32, 4, 1, w->f_) == 1 &&
            std::fwrite(tokens.data(), 4, tokens.size(), w->f_) == tokens.size();
  if (!ok) return Status::errorf("writing %s: %s", path.c_str(), std::strerror(errno));
  return w;
}

Status LogProbWriter::write_chunk(std::span<const uint16_t> records) {
  if (std::fwrite(records.data(), sizeof(uint16_t), records.size(), f_) != records.size()) {
    return Status::errorf("writing %s: %s", path_.c_str(), std::strerror(errno));
  }
  return ok_status();
}

Status LogProbWriter::close() {
  if (f_ == nullptr) return ok_status();
  const bool ok = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok) return Status::errorf("closing %s: %s", path_.c_str(), std::strerror(errno));
  return ok_status();
}

LogProbReader::~LogProbReader() {
  if (f_ != nullptr) std::fclose(f_);
}

Result<std::unique_ptr<LogProbReader>> LogProbReader::open(const std::string& path) {
  std::unique_ptr<LogProbReader> r(new LogProbReader());
  r->path_ = path;
  r->f_ = std::fopen(path.c_str(), "rb");
  if (r->f_ == nullptr) return Status::errorf("cannot open KL base %s: %s", path.c_str(), std::strerror(errno));
  char magic[8];
  uint32_t ctx32 = 0;
  int32_t vocab32 = 0, chunk32 = 0;
  if (std::fread(magic, 1, 8, r->f_) != 8 || std::memcmp(magic, kMagic, 8) != 0) {
    return Status::errorf("%s is not a log-probability file (no '_logits_' magic; make it with --save-logits)",
                          path.c_str());
  }
  if (std::fread(&ctx32, 4, 1, r->f_) != 1 || std::fread(&vocab32, 4, 1, r->f_) != 1 ||
      std::fread(&chunk32, 4, 1, r->f_) != 1) {
    return Status::errorf("%s: truncated header", path.c_str());
  }
  if (ctx32 < 4 || ctx32 > (1u << 24) || vocab32 < 2 || vocab32 > (1 << 24) || chunk32 < 1 || chunk32 > (1 << 24)) {
    return Status::errorf("%s: implausible header (n_ctx %u, n_vocab %d, n_chunk %d)", path.c_str(), ctx32, vocab32,
                          chunk32);
  }
  r->n_ctx_ = ctx32;
  r->n_vocab_ = vocab32;
  r->n_chunk_ = chunk32;
  const int64_t n_scored = r->n_ctx_ - 1 - r->n_ctx_ / 2;
  r->data_offset_ = 20 + 4 * r->n_ctx_ * r->n_chunk_;
  const int64_t expected =
      r->data_offset_ + r->n_chunk_ * n_scored * log_prob_record_size(r->n_vocab_) * int64_t{2};
  if (std::fseek(r->f_, 0, SEEK_END) != 0) return Status::errorf("%s: cannot seek", path.c_str());
  const int64_t size = std::ftell(r->f_);
  if (size != expected) {
    return Status::errorf("%s: file is %lld bytes but its header (n_ctx %lld, n_vocab %lld, %lld chunks) needs %lld%s",
                          path.c_str(), static_cast<long long>(size), static_cast<long long>(r->n_ctx_),
                          static_cast<long long>(r->n_vocab_), static_cast<long long>(r->n_chunk_),
                          static_cast<long long>(expected), size < expected ? " (truncated?)" : "");
  }
  r->tokens_.resize(static_cast<size_t>(r->n_ctx_ * r->n_chunk_));
  if (std::fseek(r->f_, 20, SEEK_SET) != 0 ||
      std::fread(r->tokens_.data(), 4, r->tokens_.size(), r->f_) != r->tokens_.size()) {
    return Status::errorf("%s: cannot read the tokens", path.c_str());
  }
  for (size_t i = 0; i < r->tokens_.size(); ++i) {
    if (r->tokens_[i] < 0 || r->tokens_[i] >= vocab32) {
      return Status::errorf("%s: token %zu is %d, outside the vocabulary of %d", path.c_str(), i, r->tokens_[i],
                            vocab32);
    }
  }
  return r;
}

Status LogProbReader::read_chunk(int64_t c, std::vector<uint16_t>& out) {
  const int64_t n_scored = n_ctx_ - 1 - n_ctx_ / 2;
  const int64_t rec = log_prob_record_size(n_vocab_);
  out.resize(static_cast<size_t>(n_scored * rec));
  const int64_t off = data_offset_ + c * n_scored * rec * 2;
  if (c < 0 || c >= n_chunk_ || std::fseek(f_, off, SEEK_SET) != 0 ||
      std::fread(out.data(), 2, out.size(), f_) != out.size()) {
    return Status::errorf("%s: cannot read chunk %lld", path_.c_str(), static_cast<long long>(c));
  }
  for (int64_t i = 0; i < n_scored; ++i) {
    const float scale = rec_float(out.data() + i * rec, 0), lp = rec_float(out.data() + i * rec, 1);
    if (!std::isfinite(scale) || scale < 0 || scale > 1 || !std::isfinite(lp) || lp > 1e-3f || lp < -1e4f) {
      return Status::errorf("%s: corrupt record (chunk %lld, position %lld: scale %g, min log-prob %g)", path_.c_str(),
                            static_cast<long long>(c), static_cast<long long>(i), scale, lp);
    }
  }
  return ok_status();
}

// --- run ---

namespace {

// A KL base must come from the same context size, vocabulary and text, and hold the chunks asked
// for; the run then scores the chunks the base holds (n_chunk is cut to them).
Status check_kl_base(const LogProbReader& base, std::span<const int32_t> tokens, int64_t n_ctx, int64_t n_vocab,
                     int64_t max_chunks, int64_t* n_chunk) {
  if (base.n_ctx() != n_ctx) {
    return Status::errorf("KL base was made with a context of %lld, this run uses %lld",
                          static_cast<long long>(base.n_ctx()), static_cast<long long>(n_ctx));
  }
  if (base.n_vocab() != n_vocab) {
    return Status::errorf("KL base has a vocabulary of %lld, this model %lld", static_cast<long long>(base.n_vocab()),
                          static_cast<long long>(n_vocab));
  }
  if (max_chunks > base.n_chunk()) {
    return Status::errorf("KL base holds %lld chunks, %lld were asked for", static_cast<long long>(base.n_chunk()),
                          static_cast<long long>(max_chunks));
  }
  *n_chunk = std::min(*n_chunk, base.n_chunk());
  const auto& bt = base.tokens();
  for (int64_t i = 0; i < *n_chunk * n_ctx; ++i) {
    if (bt[static_cast<size_t>(i)] != tokens[static_cast<size_t>(i)]) {
      return Status::errorf(
          "KL base was made from a different text: token %lld (chunk %lld) is %d there and %d here",
          static_cast<long long>(i), static_cast<long long>(i / n_ctx), bt[static_cast<size_t>(i)],
          tokens[static_cast<size_t>(i)]);
    }
  }
  if (*n_chunk < base.n_chunk() && max_chunks < 0) {
    return Status::errorf("KL base holds %lld chunks but the text has only %lld", static_cast<long long>(base.n_chunk()),
                          static_cast<long long>(*n_chunk));
  }
  return ok_status();
}

// How many chunks the run scores (the text's whole chunks, at most opt.max_chunks, with a KL base
// the ones it holds), or why the options do not fit the evaluator, the text or the base.
Result<int64_t> chunks_to_score(const SequenceEvaluator& s, std::span<const int32_t> tokens,
                                const PerplexityOptions& opt) {
  const int64_t n_ctx = opt.n_ctx;
  if (n_ctx < 4) return Status::errorf("perplexity: context %lld is too small", static_cast<long long>(n_ctx));
  if (n_ctx > s.context()) {
    return Status::errorf("perplexity: chunks of %lld tokens do not fit the evaluator's context of %lld",
                          static_cast<long long>(n_ctx), static_cast<long long>(s.context()));
  }
  const int64_t n_avail = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (n_avail < 1) {
    return Status::errorf("perplexity: the text has %zu tokens, fewer than one chunk of %lld", tokens.size(),
                          static_cast<long long>(n_ctx));
  }
  int64_t n_chunk = opt.max_chunks < 0 ? n_avail : std::min(opt.max_chunks, n_avail);
  if (opt.kl_base != nullptr) {
    LL3_RETURN_IF_ERROR(check_kl_base(*opt.kl_base, tokens, n_ctx, s.n_vocab(), opt.max_chunks, &n_chunk));
  }
  return n_chunk;
}

// One run over n_chunk chunks: the evaluator, the KL base and the log-probability file being
// written (either may be absent), the per-chunk scratch (allocated once) and the sums so far.
class PerplexityRun {
 public:
  PerplexityRun(SequenceEvaluator& s, std::span<const int32_t> tokens, int32_t bos_id, const PerplexityOptions& opt,
                int64_t n_chunk)
      : s_(s), tokens_(tokens), bos_id_(bos_id), n_ctx_(opt.n_ctx), n_vocab_(s.n_vocab()), n_chunk_(n_chunk),
        base_(opt.kl_base) {
    res_.n_chunk = n_chunk_;
    res_.n_tokens = static_cast<int64_t>(tokens_.size());
    res_.has_kl = base_ != nullptr;
  }

  // The file for --save-logits, when asked for: created before the first chunk is evaluated, so a
  // path that cannot be written fails at once.
  Status create_writer(const std::string& path) {
    if (path.empty()) return ok_status();
    Result<std::unique_ptr<LogProbWriter>> w =
        LogProbWriter::create(path, n_ctx_, n_vocab_, n_chunk_, tokens_.first(static_cast<size_t>(n_chunk_ * n_ctx_)));
    if (!w.ok()) return w.status();
    writer_ = std::move(w.value());
    return ok_status();
  }

  // All the run's memory, before the first chunk (after create_writer: with a file to write, the
  // rows' records need a buffer even without a base).
  void allocate() {
    res_.nll.reserve(static_cast<size_t>(n_chunk_ * n_scored_));
    if (base_ != nullptr) kl_.reserve(n_chunk_ * n_scored_);
    chunk_.resize(static_cast<size_t>(n_ctx_));
    row_nll_.resize(static_cast<size_t>(n_scored_));
    row_kl_.resize(base_ != nullptr ? static_cast<size_t>(n_scored_) : 0);
    records_.resize(writer_ || base_ ? static_cast<size_t>(n_scored_ * rec_) : 0);
  }

  // Chunk c from an empty cache, its first token replaced by BOS. The first half only provides
  // context: no logits needed except the evaluator's last row.
  Status eval_chunk(int64_t c) {
    std::copy_n(tokens_.begin() + c * n_ctx_, n_ctx_, chunk_.begin());
    chunk_[0] = bos_id_;
    s_.truncate(0);
    LL3_RETURN_IF_ERROR(s_.eval(std::span<const int32_t>(chunk_.data(), static_cast<size_t>(first_))));
    return s_.eval(std::span<const int32_t>(chunk_.data() + first_, static_cast<size_t>(n_ctx_ - first_)), true);
  }

  // The evaluated chunk's positions [first, n_ctx - 1) against their next tokens (and the base's
  // rows of chunk c), added to the sums; their records written to the file.
  Status score_chunk(int64_t c) {
    const float* logits = s_.logits().data();  // (n_ctx - first, V): rows for positions first..n_ctx-1
    if (base_ != nullptr) LL3_RETURN_IF_ERROR(base_->read_chunk(c, records_));
    // Rows are independent: split them over the evaluator's threads; sums are taken in order
    // afterwards so the result does not depend on the thread count.
    s_.pool().parallel_for(n_scored_, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) score_row(i, logits + i * n_vocab_);
    });
    for (int64_t i = 0; i < n_scored_; ++i) {
      res_.ppl.add(row_nll_[static_cast<size_t>(i)]);
      res_.nll.push_back(static_cast<float>(row_nll_[static_cast<size_t>(i)]));
      if (base_ != nullptr) kl_.add(row_kl_[static_cast<size_t>(i)]);
    }
    if (writer_) LL3_RETURN_IF_ERROR(writer_->write_chunk(records_));
    return ok_status();
  }

  PerplexityProgress progress(int64_t chunks_done, double seconds) const {
    PerplexityProgress p;
    p.chunk = chunks_done;
    p.n_chunk = n_chunk_;
    p.seconds = seconds;
    p.ppl = &res_.ppl;
    p.kl = base_ != nullptr ? &kl_ : nullptr;
    return p;
  }

  // Leaves the evaluator empty, closes the file and summarizes the KL divergence.
  Result<PerplexityResult> finish() {
    s_.truncate(0);
    if (writer_) LL3_RETURN_IF_ERROR(writer_->close());
    if (base_ != nullptr) res_.kl = kl_.summary();
    return std::move(res_);
  }

 private:
  // Scored row i: its NLL, and with a base its KL terms, without one its record for the file.
  void score_row(int64_t i, const float* row) {
    const int32_t target = chunk_[static_cast<size_t>(first_ + i + 1)];
    if (base_ != nullptr) {
      row_kl_[static_cast<size_t>(i)] = kl_row(row, n_vocab_, target, records_.data() + i * rec_);
      row_nll_[static_cast<size_t>(i)] = row_kl_[static_cast<size_t>(i)].nll;
    } else if (writer_) {
      row_nll_[static_cast<size_t>(i)] = token_nll_quantized(row, n_vocab_, target, records_.data() + i * rec_);
    } else {
      row_nll_[static_cast<size_t>(i)] = token_nll(row, n_vocab_, target);
    }
  }

  SequenceEvaluator& s_;
  std::span<const int32_t> tokens_;
  const int32_t bos_id_;
  const int64_t n_ctx_, n_vocab_, n_chunk_;
  const int64_t first_ = n_ctx_ / 2;             // the first scored position
  const int64_t n_scored_ = n_ctx_ - 1 - first_;  // scored positions per chunk
  const int64_t rec_ = log_prob_record_size(n_vocab_);
  LogProbReader* base_;
  std::unique_ptr<LogProbWriter> writer_;
  PerplexityResult res_;
  KlAccum kl_;
  std::vector<int32_t> chunk_;     // (n_ctx) the chunk evaluated, BOS first
  std::vector<double> row_nll_;    // (n_scored)
  std::vector<KlRow> row_kl_;      // (n_scored) with a base
  std::vector<uint16_t> records_;  // (n_scored, rec) the base's rows, or the rows to write
};

}  // namespace

Result<PerplexityResult> compute_perplexity(SequenceEvaluator& s, std::span<const int32_t> tokens, int32_t bos_id,
                                            const PerplexityOptions& opt,
                                            const std::function<void(const PerplexityProgress&)>& progress) {
  Result<int64_t> n_chunk = chunks_to_score(s, tokens, opt);
  if (!n_chunk.ok()) return n_chunk.status();
  PerplexityRun run(s, tokens, bos_id, opt, n_chunk.value());
  LL3_RETURN_IF_ERROR(run.create_writer(opt.save_path));
  run.allocate();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < n_chunk.value(); ++c) {
    LL3_RETURN_IF_ERROR(run.eval_chunk(c));
    LL3_RETURN_IF_ERROR(run.score_chunk(c));
    if (progress) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      progress(run.progress(c + 1, seconds));
    }
  }
  return run.finish();
}

}  // namespace ll3
