#include "engine/draft_model.h"

#include <algorithm>

#include "engine/sampler.h"

namespace ll3 {

Result<std::unique_ptr<DraftModel>> DraftModel::create(const LlamaModel& model, ThreadPool& pool, const DraftOptions& o) {
  std::unique_ptr<DraftModel> d(new DraftModel(model, o));
  const LlamaConfig& c = model.config;
  KvCacheConfig kc;
  kc.n_layers = c.n_layers;
  kc.n_kv_heads = c.n_kv_heads;
  kc.head_dim = c.head_dim;
  kc.block_size = o.block_size;
  kc.n_blocks = (o.positions + o.block_size - 1) / o.block_size;
  kc.type = DType::F16;
  Result<std::unique_ptr<KvCache>> kv = KvCache::create(kc);
  if (!kv.ok()) return kv.status();
  d->kv_ = std::move(kv.value());
  d->blocks_ = std::make_unique<BlockPool>(static_cast<int32_t>(kc.n_blocks), static_cast<int32_t>(o.block_size), 0);
  d->kvm_ = std::make_unique<KvManager>(*d->blocks_, false);
  RunnerOptions ro = o.runner;
  ro.max_batch_tokens = o.batch_tokens;
  Result<std::unique_ptr<ModelRunner>> r = make_runner(model, *d->kv_, pool, ro);
  if (!r.ok()) return r.status();
  d->runner_ = std::move(r.value());
  const size_t seqs = static_cast<size_t>(o.max_seqs);
  d->tokens_.reserve(static_cast<size_t>(o.batch_tokens));
  d->rows_.reserve(seqs);
  d->argmax_.reserve(seqs);
  d->seqs_.reserve(seqs);
  d->in_step_.reserve(seqs);
  d->logits_.resize(seqs * static_cast<size_t>(c.n_vocab));
  return d;
}

void DraftModel::open(uint64_t id, int64_t max_len) {
  kvm_->open(id, (max_len + opt_.block_size - 1) / opt_.block_size);
  done_[id] = 0;
}

void DraftModel::close(uint64_t id) {
  if (done_.erase(id) == 0) return;
  kvm_->drop(id);
  kvm_->close(id);
}

void DraftModel::rollback(uint64_t id, int64_t n) {
  auto it = done_.find(id);
  if (it != done_.end()) it->second = std::min(it->second, n);
}

Status DraftModel::run() {
  BatchPlan p;
  p.tokens = tokens_;
  p.seqs = seqs_;
  p.logit_rows = rows_;
  LL3_RETURN_IF_ERROR(runner_->forward(p, logits_.data()));
  const int32_t V = static_cast<int32_t>(m_.config.n_vocab);
  argmax_.clear();
  for (size_t r = 0; r < rows_.size(); ++r) argmax_.push_back(argmax(&logits_[r * static_cast<size_t>(V)], V));
  return Status();
}

Status DraftModel::guess(std::span<Job> jobs) {
  // Step 1: catch every job up (its last known token included, whose logits give guess 1).
  auto start_step = [&] {
    tokens_.clear();
    rows_.clear();
    seqs_.clear();
    in_step_.clear();
  };
  auto add = [&](size_t j, int64_t n_past, std::span<const int32_t> toks, bool logits) {
    SeqBatch sb;
    sb.n_past = static_cast<int32_t>(n_past);
    sb.token_begin = static_cast<int32_t>(tokens_.size());
    sb.n_tokens = static_cast<int32_t>(toks.size());
    sb.block_table = kvm_->blocks(jobs[j].id);
    tokens_.insert(tokens_.end(), toks.begin(), toks.end());
    seqs_.push_back(sb);
    if (logits) {
      rows_.push_back(static_cast<int32_t>(tokens_.size()) - 1);
      in_step_.push_back(j);
    }
  };
  start_step();
  int64_t budget = opt_.batch_tokens;
  for (size_t j = 0; j < jobs.size() && seqs_.size() < static_cast<size_t>(opt_.max_seqs); ++j) {
    Job& job = jobs[j];
    job.n_out = 0;
    const int64_t L = static_cast<int64_t>(job.tokens.size());
    int64_t& done = done_.at(job.id);
    done = std::min(done, L - 1);  // the last known token is always (re)computed: its row guesses
    const int64_t n = std::min(L - done, budget);
    if (n <= 0 || !kvm_->allocate(job.id, done + n)) continue;
    add(j, done, job.tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(n)), done + n == L && job.k > 0);
    done += n;
    budget -= n;
  }
  if (seqs_.empty()) return Status();
  LL3_RETURN_IF_ERROR(run());
  for (size_t r = 0; r < in_step_.size(); ++r) {
    Job& job = jobs[in_step_[r]];
    job.out[0] = argmax_[r];
    job.n_out = 1;
  }
  // Then one guess per step for every job that wants more, each feeding its last guess.
  for (int i = 1;; ++i) {
    start_step();
    for (size_t j = 0; j < jobs.size(); ++j) {
      Job& job = jobs[j];
      if (job.n_out != i || job.k <= i) continue;
      int64_t& done = done_.at(job.id);
      if (!kvm_->allocate(job.id, done + 1)) continue;
      add(j, done, job.out.subspan(static_cast<size_t>(i - 1), 1), true);
      done += 1;
    }
    if (seqs_.empty()) return Status();
    const auto t0 = std::chrono::steady_clock::now();
    LL3_RETURN_IF_ERROR(run());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    guess_s_ = guess_s_ == 0 ? s : 0.8 * guess_s_ + 0.2 * s;
    for (size_t r = 0; r < in_step_.size(); ++r) {
      Job& job = jobs[in_step_[r]];
      job.out[static_cast<size_t>(i)] = argmax_[r];
      job.n_out = i + 1;
    }
  }
}

}  // namespace ll3
