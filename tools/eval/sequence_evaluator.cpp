#include "eval/sequence_evaluator.h"

#include <algorithm>
#include <cstring>

namespace ll3 {

SequenceEvaluator::~SequenceEvaluator() = default;

Result<std::unique_ptr<SequenceEvaluator>> SequenceEvaluator::create(const LlamaModel& model, const EvaluatorOptions& opt) {
  std::unique_ptr<SequenceEvaluator> s(new SequenceEvaluator(model));
  const LlamaConfig& c = model.config;
  s->context_ = opt.context > 0 ? opt.context : std::min<int64_t>(c.context_length, 4096);
  if (s->context_ > c.context_length) {
    return Status::errorf("context %lld exceeds the model's %lld positions", static_cast<long long>(s->context_),
                          static_cast<long long>(c.context_length));
  }
  s->batch_ = std::max<int64_t>(1, std::min(opt.batch, s->context_));
  s->pool_ = std::make_unique<ThreadPool>(opt.threads);
  KvCacheConfig kc;
  kc.n_layers = c.n_layers;
  kc.n_kv_heads = c.n_kv_heads;
  kc.head_dim = c.head_dim;
  kc.block_size = 16;
  kc.n_blocks = (s->context_ + kc.block_size - 1) / kc.block_size;
  kc.type = opt.kv_type;
  Result<std::unique_ptr<KvCache>> kv = KvCache::create(kc);
  if (!kv.ok()) return kv.status();
  s->kv_ = std::move(kv.value());
  s->pool_blocks_ = std::make_unique<BlockPool>(static_cast<int32_t>(kc.n_blocks), static_cast<int32_t>(kc.block_size), 0);
  s->runner_ = std::make_unique<CpuRunner>(model, *s->kv_, *s->pool_, s->batch_, opt.int8_activations,
                                             opt.amx_prompts);
  if (opt.tap) s->runner_->set_tap(opt.tap);
  if (opt.lora != nullptr) s->runner_->enable_lora();
  s->lora_ = opt.lora;
  s->history_.reserve(static_cast<size_t>(s->context_));
  s->blocks_.reserve(static_cast<size_t>(kc.n_blocks));
  s->rows_.reserve(static_cast<size_t>(s->batch_));
  s->logits_.resize(static_cast<size_t>(c.n_vocab));
  return s;
}

Status SequenceEvaluator::eval(std::span<const int32_t> tokens, bool all_logits) {
  if (tokens.empty()) return Status::error("eval: no tokens");
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n_past() + n > context_) {
    return Status::errorf("context full: %lld tokens in the cache + %lld new exceed the context of %lld",
                          static_cast<long long>(n_past()), static_cast<long long>(n),
                          static_cast<long long>(context_));
  }
  const int64_t V = n_vocab();
  if (all_logits) {
    logits_.resize(static_cast<size_t>(n * V));
  } else {
    logits_.resize(static_cast<size_t>(V));
  }
  const int64_t bs = kv_->config().block_size;
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(batch_, n - done);
    const int64_t end = n_past() + m;
    const int64_t need = (end + bs - 1) / bs - static_cast<int64_t>(blocks_.size());
    for (int64_t i = 0; i < need; ++i) blocks_.push_back(pool_blocks_->allocate());  // the context check above leaves room

    SeqBatch seq;
    seq.n_past = static_cast<int32_t>(n_past());
    seq.token_begin = 0;
    seq.n_tokens = static_cast<int32_t>(m);
    seq.block_table = blocks_;
    rows_.clear();
    float* out;
    if (all_logits) {
      for (int64_t i = 0; i < m; ++i) rows_.push_back(static_cast<int32_t>(i));
      out = logits_.data() + done * V;
    } else {
      if (done + m == n) rows_.push_back(static_cast<int32_t>(m - 1));
      out = logits_.data();
    }
    BatchPlan plan;
    plan.tokens = tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(m));
    plan.seqs = std::span<const SeqBatch>(&seq, 1);
    plan.logit_rows = rows_;
    const int32_t set = 0;
    if (lora_ != nullptr) {
      plan.lora_sets = std::span<const LoraSet* const>(&lora_, 1);
      plan.seq_lora = std::span<const int32_t>(&set, 1);
    }
    LL3_RETURN_IF_ERROR(runner_->forward(plan, out));
    history_.insert(history_.end(), plan.tokens.begin(), plan.tokens.end());
    done += m;
  }
  return Status();
}

void SequenceEvaluator::truncate(int64_t n) {
  if (n >= n_past()) return;
  history_.resize(static_cast<size_t>(std::max<int64_t>(0, n)));
  const int64_t bs = kv_->config().block_size;
  const size_t keep = static_cast<size_t>((n_past() + bs - 1) / bs);
  if (keep < blocks_.size()) {
    for (size_t i = keep; i < blocks_.size(); ++i) pool_blocks_->release(blocks_[i]);
    blocks_.resize(keep);
  }
}

}  // namespace ll3
