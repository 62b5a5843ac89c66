// The engine: the request queue and the loop that turns scheduler steps into forward passes,
// samples, and callbacks. One thread runs the loop; submit / cancel / stats only touch the
// inbox under a mutex. A step is plan -> run -> sample -> deliver (Engine::Impl::step).
#include "ll3/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "backend/runner.h"
#include "core/log.h"
#include "core/resource_limits.h"
#include "core/thread_pool.h"
#include "engine/model_impl.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/session_store.h"
#include "engine/stop_strings.h"
#include "kv/block_pool.h"
#include "kv/kv_cache.h"
#include "kv/kv_manager.h"

namespace ll3 {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "error";
}

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

DType kv_dtype(KvType t) {
  switch (t) {
    case KvType::kF32: return DType::F32;
    case KvType::kQ8_0: return DType::Q8_0;
    case KvType::kF16: break;
  }
  return DType::F16;
}

// Bytes one position takes in the KV cache (K and V of every layer).
int64_t kv_bytes_per_token(const LlamaConfig& c, DType t) {
  const int64_t row = c.n_kv_heads * static_cast<int64_t>(dtype_row_bytes(t, c.head_dim));  // as KvCache lays it out
  return 2 * c.n_layers * row;
}

// The log-softmax of `row` at `target`, and the k (<= kMaxTopLogprobs) best into `top`, best
// first, ties to the lower id. `top` has room for k: nothing is allocated.
float log_softmax_at(const float* row, int64_t V, int32_t target, int k, std::vector<TopLogprob>* top) {
  float mx = -INFINITY;
  for (int64_t v = 0; v < V; ++v) mx = std::max(mx, row[v]);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v] - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  top->clear();
  for (int64_t v = 0; v < V && k > 0; ++v) {
    if (static_cast<int>(top->size()) == k && row[v] - lse <= top->back().logprob) continue;
    TopLogprob t{static_cast<int32_t>(v), row[v] - lse};
    auto pos = std::find_if(top->begin(), top->end(), [&](const TopLogprob& x) { return t.logprob > x.logprob; });
    top->insert(pos, t);
    if (static_cast<int>(top->size()) > k) top->pop_back();
  }
  return row[target] - lse;
}

// One request as the engine thread sees it. Its tokens and KV are the scheduler's.
struct Seq {
  Seq(Request r, const Tokenizer& tok)
      : req(std::move(r)), sampler(req.sampling), decoder(tok), stops(req.stop) {
    // Room for any token's text up front: the per-token path then never allocates.
    ev.piece.reserve(256);
    ev.text.reserve(512);
    decoded.reserve(256);
  }
  RequestId id = 0;
  Request req;
  std::vector<int32_t> prompt;  // until the engine thread hands it to the scheduler
  int64_t max_len = 0;          // the most tokens the sequence can hold
  SamplerState sampler;
  StreamDecoder decoder;
  StopStringMatcher stops;
  int64_t n_generated = 0;
  double t_submit = 0, t_scheduled = 0, t_first = 0;
  bool done = false;
  int32_t sampled = -1;
  TokenEvent ev;
  std::vector<PromptTokenLogprob> prompt_lps;  // Request::prompt_logprobs: entry i is token i + 1
  std::string decoded;  // this token's complete UTF-8 text (capacity reused)
  std::string session_warning;
};

// A request's own fields (not whether it fits): the first one at fault, named as Request names it.
Status validate_request(const Request& r, int64_t n_vocab) {
  if (r.tokens.empty()) return Status::invalid("the prompt is empty", "prompt");
  for (int32_t t : r.tokens) {
    if (t < 0 || t >= n_vocab) {
      return Status::invalid(strprintf("prompt token id %d is out of range (vocabulary of %lld)", t, static_cast<long long>(n_vocab)),
                             "prompt");
    }
  }
  LL3_RETURN_IF_ERROR(validate(r.sampling));
  if (r.top_logprobs < 0 || r.top_logprobs > kMaxTopLogprobs) {
    return Status::invalid(strprintf("top_logprobs must be in 0..%d, got %d", kMaxTopLogprobs, r.top_logprobs), "top_logprobs");
  }
  if (r.max_tokens < -1) {
    return Status::invalid(strprintf("max_tokens must be >= 0 (-1: until the context is full), got %lld",
                                     static_cast<long long>(r.max_tokens)),
                           "max_tokens");
  }
  if (r.session_id.size() > kMaxSessionIdBytes) {
    return Status::invalid(strprintf("session id longer than %zu bytes", kMaxSessionIdBytes), "session_id");
  }
  if (r.prompt_logprobs < -1 || r.prompt_logprobs > kMaxTopLogprobs) {
    return Status::invalid(strprintf("prompt_logprobs must be in -1..%d, got %d", kMaxTopLogprobs, r.prompt_logprobs),
                           "prompt_logprobs");
  }
  if (r.prompt_logprobs >= 0 && !r.session_id.empty()) {
    return Status::invalid("prompt log-probabilities need the whole prompt computed: not with a session", "prompt_logprobs");
  }
  return Status();
}

}  // namespace

struct Engine::Impl {
  std::shared_ptr<const Model> model;
  const LlamaModel& m;
  const Tokenizer& tok;
  EngineOptions opt;
  Logger log;
  int64_t max_seq_tokens = 0;

  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<BlockPool> blocks;
  std::unique_ptr<KvManager> kvm;
  std::unique_ptr<Scheduler> sched;
  std::unique_ptr<SessionStore> sessions;
  std::unique_ptr<ModelRunner> runner;
  std::vector<std::unique_ptr<Sampler>> samplers;  // one per pool thread

  // Per step, sized once.
  std::vector<SeqBatch> plan_seqs;
  std::vector<int32_t> plan_rows;
  std::vector<float> logits;      // (min(max_seqs, batch_tokens) + prompt logit rows, n_vocab)
  struct SampleRow {
    Seq* seq;
    const std::vector<int32_t>* history;  // its tokens so far (penalties)
    int32_t row;                          // its logits row
  };
  std::vector<SampleRow> to_sample;
  struct PromptRow {
    Seq* seq;
    int64_t pos;  // the row's position: its logits score prompt token pos + 1
    int32_t row;
  };
  std::vector<PromptRow> prompt_rows;
  int64_t step_prompt_tokens = 0;  // prompt tokens the step computes

  // Shared with the callers' threads, under mu.
  mutable std::mutex mu;
  std::condition_variable wake, idle;
  std::vector<std::unique_ptr<Seq>> inbox;
  std::vector<RequestId> cancels;
  std::unordered_set<RequestId> live;  // submitted, not finished
  int64_t queued = 0;                  // submitted, not yet admitted
  bool stopping = false;
  bool settled = true;  // stats published since the last finish (wait_idle waits for it)
  bool save_requested = false;  // save_sessions() waits for the loop to clear it
  bool written = false;         // a session write finished: the loop reaps it
  bool writes_pending = false;  // session writes not yet reaped (wait_idle waits for them)
  Status save_result;
  RequestId next_id = 1;
  EngineStats stats;

  // The engine thread's own.
  std::unordered_map<RequestId, std::unique_ptr<Seq>> seqs;
  std::thread thread;

  Impl(std::shared_ptr<const Model> mod, const EngineOptions& o)
      : model(std::move(mod)),
        m(*model_impl(*model).llama),
        tok(*model_impl(*model).tokenizer),
        opt(o),
        log(o.log) {}

  Status init();
  Status make_kv();
  Result<int64_t> fit_memory_limit(int64_t tokens, int64_t per_token) const;
  Result<RequestId> submit(Request r);
  Status check_fits(int64_t n_prompt, int64_t max_tokens) const;
  void loop();
  void take_inbox();
  bool save_now();
  void publish_stats();

  // One step: plan -> run -> sample -> deliver.
  void step();
  void note_admissions(const SchedulerOutput& out);
  BatchPlan plan(const SchedulerOutput& out);
  void count_step(const SchedulerOutput& out);
  void score_prompts();
  void sample_all();
  void deliver();
  void handle_token(Seq* s);
  void finish(Seq* s, FinishReason reason, const std::string& error = "");
  void keep_session(Seq* s);
};

// Serves a save_sessions() call, on this thread (the sessions and the pool are its own).
bool Engine::Impl::save_now() {
  {
    std::lock_guard<std::mutex> lk(mu);
    if (!save_requested) return false;
  }
  Status st = sessions->save_all();
  publish_stats();
  std::lock_guard<std::mutex> lk(mu);
  save_result = st;
  save_requested = false;
  idle.notify_all();
  return true;
}

// Within a memory limit (a container's cgroup), the KV pool must fit beside the weights and the
// scratch: the default pool shrinks to what fits, a pool asked for explicitly is kept with a
// warning, and a model that leaves no room for even a few blocks is an error that says so.
Result<int64_t> Engine::Impl::fit_memory_limit(int64_t tokens, int64_t per_token) const {
  const ResourceLimits lim = read_resource_limits();
  if (lim.memory_limit <= 0) return tokens;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const int64_t weights = static_cast<int64_t>(m.weight_bytes());
  // A copy of the weights is in the usage already; mapped ones are charged as they are read.
  const int64_t reserve = std::max<int64_t>(int64_t{256} << 20, lim.memory_limit / 10);  // scratch, logits, the heap
  const int64_t room = lim.memory_limit - lim.memory_usage - (m.weights_copied() ? 0 : weights) - reserve;
  const int64_t min_tokens = 4 * opt.block_size;
  if (room < min_tokens * per_token) {
    return Status::error(strprintf("the model (%.2f GiB of weights) leaves no room for a KV cache within the memory limit of "
                                   "%.2f GiB (%.2f GiB in use): raise the limit or use a smaller quantization",
                                   weights / kGiB, lim.memory_limit / kGiB, lim.memory_usage / kGiB));
  }
  const int64_t fits = room / per_token;
  if (tokens <= fits) return tokens;
  if (opt.ctx > 0 || opt.kv_memory > 0) {
    log.warn(strprintf("a KV pool of %lld tokens (%.2f GiB) may not fit the memory limit of %.2f GiB (room for %lld)",
                       static_cast<long long>(tokens), tokens * per_token / kGiB, lim.memory_limit / kGiB,
                       static_cast<long long>(fits)));
    return tokens;
  }
  log.info(strprintf("KV pool of %lld tokens, to fit the memory limit of %.2f GiB", static_cast<long long>(fits),
                     lim.memory_limit / kGiB));
  return fits;
}

// The KV pool: kv_memory bytes, else ctx tokens, else min(model context, 16384) tokens.
Status Engine::Impl::make_kv() {
  const LlamaConfig& c = m.config;
  const DType kt = kv_dtype(opt.kv_type);
  const int64_t per_token = kv_bytes_per_token(c, kt);
  const int64_t bs = opt.block_size;
  int64_t tokens = opt.ctx > 0 ? opt.ctx : std::min<int64_t>(c.context_length, 16384);
  if (opt.kv_memory > 0) tokens = opt.kv_memory / per_token;
  if (tokens < 1) {
    return Status::invalid(strprintf("a KV pool of %lld bytes holds no position (%lld bytes each)",
                                     static_cast<long long>(opt.kv_memory), static_cast<long long>(per_token)),
                           "kv_memory");
  }
  Result<int64_t> fit = fit_memory_limit(tokens, per_token);
  if (!fit.ok()) return fit.status();
  tokens = fit.value();
  const int64_t n_blocks = (tokens + bs - 1) / bs;
  max_seq_tokens = std::min<int64_t>(c.context_length, tokens);
  KvCacheConfig kc;
  kc.n_layers = c.n_layers;
  kc.n_kv_heads = c.n_kv_heads;
  kc.head_dim = c.head_dim;
  kc.block_size = bs;
  kc.n_blocks = n_blocks;
  kc.type = kt;
  Result<std::unique_ptr<KvCache>> k = KvCache::create(kc);
  if (!k.ok()) return k.status();
  kv = std::move(k.value());
  const uint64_t model_id = model_impl(*model).id;
  blocks = std::make_unique<BlockPool>(static_cast<int32_t>(n_blocks), static_cast<int32_t>(bs), model_id);
  kvm = std::make_unique<KvManager>(*blocks, opt.prefix_cache);
  const int64_t session_blocks = opt.session_memory > 0 ? opt.session_memory / (per_token * bs) : n_blocks / 4;
  sessions = std::make_unique<SessionStore>(*blocks, *kv, model_id, session_blocks, opt.session_dir, log);
  // Short of blocks, unpinning a session comes before preempting a running sequence.
  kvm->set_reclaim([this] { return sessions->evict_one(); });
  sessions->set_on_written([this] {
    std::lock_guard<std::mutex> lk(mu);
    written = true;
    wake.notify_all();
  });
  stats.kv_blocks = n_blocks;
  stats.block_size = bs;
  stats.max_seq_tokens = max_seq_tokens;
  return Status();
}

Status Engine::Impl::init() {
  if (opt.block_size < 1 || opt.block_size > 1024) return Status::invalid("block size must be in 1..1024", "block_size");
  if (opt.max_seqs < 1) return Status::invalid("max_seqs must be at least 1", "max_seqs");
  if (opt.batch_tokens < 1) return Status::invalid("batch_tokens must be at least 1", "batch_tokens");
  if (opt.max_queue < 0 || opt.kv_memory < 0 || opt.ctx < 0 || opt.session_memory < 0 || !(opt.batch_wait_ms >= 0)) {
    return Status::error("engine options must not be negative", StatusCode::kInvalid);
  }
  pool = std::make_unique<ThreadPool>(opt.threads);
  LL3_RETURN_IF_ERROR(make_kv());
  SchedulerOptions so;
  so.batch_tokens = opt.batch_tokens;
  so.max_seqs = opt.max_seqs;
  so.max_seq_blocks = (max_seq_tokens + opt.block_size - 1) / opt.block_size;
  sched = std::make_unique<Scheduler>(*kvm, so);
  RunnerOptions ro;
  ro.gpu_layers = opt.gpu_layers;
  ro.max_batch_tokens = opt.batch_tokens;
  ro.int8_activations = opt.int8_activations;
  ro.amx_prompts = opt.amx_prompts;
  ro.log = log;
  Result<std::unique_ptr<ModelRunner>> r = make_runner(m, *kv, *pool, ro);
  if (!r.ok()) return r.status();
  runner = std::move(r.value());
  const int64_t V = m.config.n_vocab;
  for (int t = 0; t < pool->size(); ++t) samplers.push_back(std::make_unique<Sampler>(static_cast<int32_t>(V)));
  plan_seqs.reserve(static_cast<size_t>(opt.max_seqs));
  to_sample.reserve(static_cast<size_t>(opt.max_seqs));
  const int64_t rows = std::min(opt.max_seqs, opt.batch_tokens) + so.prompt_logit_rows;
  plan_rows.reserve(static_cast<size_t>(rows));
  prompt_rows.reserve(static_cast<size_t>(rows));
  logits.resize(static_cast<size_t>(rows * V));
  thread = std::thread([this] { loop(); });
  return Status();
}

// Whether a prompt of n tokens, with max_tokens to generate, can ever fit one sequence.
Status Engine::Impl::check_fits(int64_t n, int64_t max_tokens) const {
  if (n >= max_seq_tokens) {
    return Status::invalid(strprintf("the prompt has %lld tokens; a sequence holds at most %lld (context %lld, KV pool %lld)",
                                     static_cast<long long>(n), static_cast<long long>(max_seq_tokens),
                                     static_cast<long long>(m.config.context_length),
                                     static_cast<long long>(stats.kv_blocks * stats.block_size)),
                           "prompt", StatusCode::kTooLong);
  }
  if (max_tokens > 0 && n + max_tokens > max_seq_tokens) {
    return Status::invalid(strprintf("prompt (%lld tokens) + max_tokens (%lld) = %lld exceed the %lld tokens a sequence can hold",
                                     static_cast<long long>(n), static_cast<long long>(max_tokens),
                                     static_cast<long long>(n + max_tokens), static_cast<long long>(max_seq_tokens)),
                           "max_tokens", StatusCode::kTooLong);
  }
  return Status();
}

Result<RequestId> Engine::Impl::submit(Request r) {
  if (r.tokens.empty() && !r.text.empty()) r.tokens = tok.encode(r.text, r.add_bos, true);
  LL3_RETURN_IF_ERROR(validate_request(r, m.config.n_vocab));
  const int64_t n = static_cast<int64_t>(r.tokens.size());
  LL3_RETURN_IF_ERROR(check_fits(n, r.max_tokens));
  auto s = std::make_unique<Seq>(std::move(r), tok);
  s->prompt = std::move(s->req.tokens);
  s->max_len = s->req.max_tokens >= 0 ? n + s->req.max_tokens : max_seq_tokens;
  if (s->req.prompt_logprobs >= 0) {
    s->prompt_lps.resize(static_cast<size_t>(n - 1));
    for (int64_t i = 1; i < n; ++i) {
      s->prompt_lps[i - 1].token = s->prompt[i];
      s->prompt_lps[i - 1].top_logprobs.reserve(static_cast<size_t>(s->req.prompt_logprobs) + 1);
    }
  }
  s->t_submit = now();
  std::lock_guard<std::mutex> lk(mu);
  if (stopping) return Status::error("the engine is shutting down", StatusCode::kUnavailable);
  if (queued >= opt.max_queue) {
    ++stats.requests_rejected;
    return Status::error(strprintf("the queue is full: %lld requests waiting (max_queue %lld)", static_cast<long long>(queued),
                                   static_cast<long long>(opt.max_queue)),
                         StatusCode::kUnavailable);
  }
  const RequestId id = next_id++;
  s->id = id;
  inbox.push_back(std::move(s));
  live.insert(id);
  ++queued;
  wake.notify_one();
  return id;
}

void Engine::Impl::take_inbox() {
  std::vector<std::unique_ptr<Seq>> in;
  std::vector<RequestId> cn;
  {
    std::lock_guard<std::mutex> lk(mu);
    in.swap(inbox);
    cn.swap(cancels);
  }
  for (std::unique_ptr<Seq>& s : in) {
    if (!s->req.session_id.empty()) {
      Status st = sessions->restore(s->req.session_id);
      if (!st.ok()) {
        s->session_warning = st.message();
        log.warn(st.message());
      }
    }
    sched->add(s->id, std::move(s->prompt), s->max_len, s->req.priority, s->req.prompt_logprobs >= 0);
    const RequestId id = s->id;
    seqs.emplace(id, std::move(s));
  }
  for (RequestId id : cn) {
    auto it = seqs.find(id);
    if (it != seqs.end() && !it->second->done) finish(it->second.get(), FinishReason::kCancelled);
  }
}

// A session's KV stays pinned after its request: the blocks of what it computed, its tail named.
void Engine::Impl::keep_session(Seq* s) {
  const SeqState& q = sched->seq(s->id);
  if (q.n_computed == 0) return;
  kvm->name_tail(s->id, q.tokens, q.n_computed);
  const int64_t bs = blocks->block_size();
  const size_t nb = static_cast<size_t>((q.n_computed + bs - 1) / bs);
  sessions->pin(s->req.session_id, std::span<const int32_t>(q.tokens).first(static_cast<size_t>(q.n_computed)),
                kvm->blocks(s->id).first(nb));
}

void Engine::Impl::finish(Seq* s, FinishReason reason, const std::string& error) {
  s->done = true;
  const SeqState& q = sched->seq(s->id);
  FinishInfo info;
  info.reason = reason;
  info.error = error;
  if (reason != FinishReason::kError && !s->stops.stopped()) {
    StopStringMatcher::Step tail = s->stops.feed(s->decoder.flush());
    info.text = std::string(tail.emit);
    if (!tail.stopped) info.text += s->stops.flush();
  }
  info.stop_string = std::string(s->stops.matched());
  info.prompt_tokens = q.n_prompt;
  info.cached_tokens = q.cached_tokens;
  info.completion_tokens = s->n_generated;
  info.preemptions = q.preemptions;
  const double t = now();
  info.queued_seconds = (s->t_scheduled > 0 ? s->t_scheduled : t) - s->t_submit;
  info.first_token_seconds = s->t_first > 0 ? s->t_first - s->t_submit : 0;
  info.total_seconds = t - s->t_submit;
  info.session_warning = s->session_warning;
  const bool was_waiting = !q.admitted_once;
  if (!s->req.session_id.empty() && reason != FinishReason::kError) keep_session(s);
  sched->remove(s->id);
  if (s->req.on_finish) s->req.on_finish(info);
  std::lock_guard<std::mutex> lk(mu);
  live.erase(s->id);
  if (was_waiting) --queued;
  ++stats.requests_finished;
  settled = false;
}

// Samples the next token of every sequence whose logits this step made, in parallel (one
// sampler's scratch per thread), with log-probabilities where asked.
void Engine::Impl::sample_all() {
  const int64_t V = m.config.n_vocab;
  pool->parallel_for_dynamic(static_cast<int64_t>(to_sample.size()), 1, [&](int64_t b, int64_t e, int thread) {
    for (int64_t i = b; i < e; ++i) {
      const SampleRow& sr = to_sample[i];
      Seq* s = sr.seq;
      const float* row = &logits[static_cast<size_t>(sr.row * V)];
      s->sampled = samplers[thread]->sample(s->sampler, row, *sr.history);
      if (!s->req.logprobs && s->req.top_logprobs == 0) continue;
      s->ev.logprob = log_softmax_at(row, V, s->sampled, s->req.top_logprobs, &s->ev.top_logprobs);
    }
  });
}

// The log-probabilities of the prompt tokens this step's rows scored, in parallel.
void Engine::Impl::score_prompts() {
  const int64_t V = m.config.n_vocab;
  pool->parallel_for_dynamic(static_cast<int64_t>(prompt_rows.size()), 1, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const PromptRow& pr = prompt_rows[i];
      PromptTokenLogprob& lp = pr.seq->prompt_lps[static_cast<size_t>(pr.pos)];
      lp.logprob = log_softmax_at(&logits[static_cast<size_t>(pr.row * V)], V, lp.token, pr.seq->req.prompt_logprobs,
                                  &lp.top_logprobs);
    }
  });
}

void Engine::Impl::handle_token(Seq* s) {
  const int32_t t = s->sampled;
  if (s->req.max_tokens == 0) {  // the prompt only
    finish(s, FinishReason::kLength);
    return;
  }
  if (!s->req.ignore_eos && tok.is_eog(t)) {
    finish(s, FinishReason::kStop);
    return;
  }
  const double tn = now();
  if (s->n_generated == 0) s->t_first = tn;
  ++s->n_generated;
  s->ev.index = s->n_generated - 1;
  s->ev.token = t;
  s->ev.piece.assign(tok.piece(t));
  s->decoder.push(t, &s->decoded);
  StopStringMatcher::Step sp = s->stops.feed(s->decoded);
  s->ev.text.assign(sp.emit);
  s->ev.seconds = tn - s->t_submit;
  const bool keep = !s->req.on_token || s->req.on_token(s->ev);
  {
    std::lock_guard<std::mutex> lk(mu);
    ++stats.generated_tokens;
  }
  if (sp.stopped) {
    finish(s, FinishReason::kStop);
  } else if (!keep) {
    finish(s, FinishReason::kCancelled);
  } else if ((s->req.max_tokens >= 0 && s->n_generated >= s->req.max_tokens) ||
             static_cast<int64_t>(sched->seq(s->id).tokens.size()) + 1 > max_seq_tokens) {
    finish(s, FinishReason::kLength);
  } else {
    sched->append(s->id, t);
  }
}

// Queue statistics of the sequences this step admitted or preempted.
void Engine::Impl::note_admissions(const SchedulerOutput& out) {
  const double t0 = now();
  std::lock_guard<std::mutex> lk(mu);
  for (RequestId id : out.admitted) {
    Seq* s = seqs.at(id).get();
    if (s->t_scheduled > 0) continue;  // readmitted after a preemption
    s->t_scheduled = t0;
    const SeqState& q = sched->seq(id);
    --queued;
    stats.prompt_tokens += q.n_prompt;
    stats.prompt_tokens_cached += q.cached_tokens;
  }
  stats.preemptions += static_cast<int64_t>(out.preempted.size());
}

// The runner's view of the step, and which logits rows are sampled or score a prompt.
BatchPlan Engine::Impl::plan(const SchedulerOutput& out) {
  plan_seqs.clear();
  plan_rows.clear();
  to_sample.clear();
  prompt_rows.clear();
  step_prompt_tokens = 0;
  for (const ScheduledSeq& it : out.seqs) {
    SeqBatch sb;
    sb.n_past = static_cast<int32_t>(it.n_past);
    sb.token_begin = it.token_begin;
    sb.n_tokens = static_cast<int32_t>(it.n_tokens);
    sb.block_table = out.block_table(it);
    plan_seqs.push_back(sb);
    Seq* s = seqs.at(it.id).get();
    const SeqState& q = sched->seq(it.id);
    if (it.all_logits) {
      // Every row: row i scores prompt token n_past + i + 1 (the last row of the prompt scores
      // none; it samples).
      for (int64_t i = 0; i < it.n_tokens; ++i) {
        const int64_t pos = it.n_past + i;
        if (pos + 1 < q.n_prompt) prompt_rows.push_back({s, pos, static_cast<int32_t>(plan_rows.size())});
        if (i + 1 < it.n_tokens) plan_rows.push_back(sb.token_begin + static_cast<int32_t>(i));
      }
    }
    const int32_t last = sb.token_begin + sb.n_tokens - 1;
    if (it.logits || it.all_logits) plan_rows.push_back(last);
    if (it.logits) to_sample.push_back({s, &q.tokens, static_cast<int32_t>(plan_rows.size() - 1)});
    step_prompt_tokens += std::max<int64_t>(0, std::min(it.n_past + it.n_tokens, q.n_prompt) - it.n_past);
  }
  BatchPlan p;
  p.tokens = out.tokens;
  p.seqs = plan_seqs;
  p.logit_rows = plan_rows;
  return p;
}

// Step statistics: counts and the histograms of tokens and sequences per step.
void Engine::Impl::count_step(const SchedulerOutput& out) {
  auto bucket = [](int64_t n) {
    size_t b = 0;
    while (b < kStepBucketBounds.size() && static_cast<double>(n) > kStepBucketBounds[b]) ++b;
    return b;
  };
  const int64_t n_seqs = static_cast<int64_t>(out.seqs.size());
  std::lock_guard<std::mutex> lk(mu);
  ++stats.steps;
  stats.prompt_tokens_computed += step_prompt_tokens;
  ++stats.step_tokens[bucket(out.n_tokens)];
  ++stats.step_seqs[bucket(n_seqs)];
  stats.step_tokens_sum += out.n_tokens;
  stats.step_seqs_sum += n_seqs;
}

// Hands each sampled token to its request (after the prompt's log-probabilities, if asked).
void Engine::Impl::deliver() {
  for (const SampleRow& sr : to_sample) {
    Seq* s = sr.seq;
    if (s->done) continue;
    if (sched->seq(s->id).all_logits) {
      // The prompt is scored: hand it over before the first token (and use the cache again if
      // the sequence is ever recomputed).
      sched->prompt_scored(s->id);
      if (s->req.on_prompt) s->req.on_prompt(s->prompt_lps);
    }
    handle_token(s);
  }
}

void Engine::Impl::step() {
  const SchedulerOutput& out = sched->schedule();
  note_admissions(out);
  if (out.seqs.empty()) {
    // Nothing fits even with every cached block evicted and every session unpinned: the
    // oldest waiting request cannot run (submit's checks make this unreachable).
    if (sched->n_running() == 0 && sched->n_waiting() > 0) {
      finish(seqs.at(sched->next_waiting()).get(), FinishReason::kError, "the request does not fit the KV pool");
    }
    return;
  }
  // Copy on write of partly matching cached blocks, before anything writes the pool.
  for (const BlockCopy& c : out.copies) kv->copy_positions(c.src, c.dst, c.n_tokens);
  Status st = runner->forward(plan(out), logits.data());
  if (!st.ok()) {
    for (const ScheduledSeq& it : out.seqs) finish(seqs.at(it.id).get(), FinishReason::kError, st.message());
    return;
  }
  sched->computed(out);
  count_step(out);
  score_prompts();
  sample_all();
  deliver();
}

void Engine::Impl::publish_stats() {
  std::lock_guard<std::mutex> lk(mu);
  stats.requests_running = static_cast<int64_t>(sched->n_running());
  stats.requests_waiting = static_cast<int64_t>(sched->n_waiting() + inbox.size());  // preempted ones too
  stats.kv_blocks_used = blocks->used_blocks();
  stats.kv_blocks_cached = blocks->cached_blocks();
  stats.sessions = sessions->sessions();
  stats.session_blocks = sessions->pinned_blocks();
  stats.sessions_saved = sessions->saved;
  stats.sessions_restored = sessions->restored;
  stats.session_files_rejected = sessions->rejected;
  writes_pending = sessions->writes_in_flight() > 0;
  settled = true;
  idle.notify_all();
}

void Engine::Impl::loop() {
  for (;;) {
    if (save_now()) continue;
    {
      std::unique_lock<std::mutex> lk(mu);
      while (!stopping && !save_requested && inbox.empty() && cancels.empty() && seqs.empty()) {
        if (written || sessions->has_unsaved()) {
          // Idle: take back the blocks of finished session writes, and save what is unsaved.
          written = false;
          lk.unlock();
          sessions->reap();
          if (sessions->has_unsaved()) {
            Status st = sessions->save_all();
            if (!st.ok()) log.warn(st.message());
          }
          publish_stats();
          lk.lock();
          continue;
        }
        idle.notify_all();
        wake.wait(lk);
      }
      if (stopping) break;
      if (save_requested) continue;
      // An idle engine waits a moment for more arrivals, so they start in one step.
      if (seqs.empty() && opt.batch_wait_ms > 0) {
        wake.wait_for(lk, std::chrono::duration<double, std::milli>(opt.batch_wait_ms), [&] { return stopping; });
        if (stopping) break;
      }
    }
    take_inbox();
    step();
    for (auto it = seqs.begin(); it != seqs.end();) it = it->second->done ? seqs.erase(it) : std::next(it);
    sessions->reap();
    publish_stats();
  }
  // Shutdown: whatever is still queued or running is cancelled, then sessions are saved.
  take_inbox();
  for (auto& [id, s] : seqs) {
    if (!s->done) finish(s.get(), FinishReason::kCancelled);
  }
  seqs.clear();
  Status st = sessions->save_all();
  if (!st.ok()) log.warn(st.message());
  sessions->set_on_written({});  // the writer is idle now, and mu goes before the store
  publish_stats();
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stopping = true;
    impl_->wake.notify_all();
  }
  if (impl_->thread.joinable()) impl_->thread.join();
}

Result<std::unique_ptr<Engine>> Engine::create(const std::string& model_path, const EngineOptions& options) {
  Result<std::shared_ptr<const Model>> m = Model::load(model_path);
  if (!m.ok()) return m.status();
  return create(std::move(m.value()), options);
}

Result<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<const Model> model, const EngineOptions& options) {
  if (!model) return Status::error("no model", StatusCode::kInvalid);
  auto impl = std::make_unique<Impl>(std::move(model), options);
  LL3_RETURN_IF_ERROR(impl->init());
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Result<RequestId> Engine::submit(Request request) { return impl_->submit(std::move(request)); }

bool Engine::cancel(RequestId id) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  if (impl_->live.count(id) == 0) return false;
  impl_->cancels.push_back(id);
  impl_->wake.notify_one();
  return true;
}

Result<Engine::Completion> Engine::generate(Request request) {
  auto done = std::make_shared<std::promise<void>>();
  auto out = std::make_shared<Completion>();
  auto user_token = std::move(request.on_token);
  auto user_finish = std::move(request.on_finish);
  request.on_token = [out, user_token](const TokenEvent& ev) {
    out->text += ev.text;
    out->tokens.push_back(ev.token);
    out->events.push_back(ev);
    return user_token ? user_token(ev) : true;
  };
  request.on_finish = [out, done, user_finish](const FinishInfo& info) {
    out->text += info.text;
    out->finish = info;
    if (user_finish) user_finish(info);
    done->set_value();
  };
  std::future<void> f = done->get_future();
  Result<RequestId> id = submit(std::move(request));
  if (!id.ok()) return id.status();
  f.wait();
  return std::move(*out);
}

void Engine::wait_idle() {
  std::unique_lock<std::mutex> lk(impl_->mu);
  impl_->idle.wait(lk, [&] { return impl_->live.empty() && impl_->settled && !impl_->writes_pending; });
}

Status Engine::save_sessions() {
  std::unique_lock<std::mutex> lk(impl_->mu);
  impl_->save_requested = true;
  impl_->wake.notify_all();
  impl_->idle.wait(lk, [&] { return !impl_->save_requested || impl_->stopping; });
  return impl_->save_result;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->stats;
}

std::string Engine::where() const { return impl_->runner->where(); }

const Model& Engine::model() const { return *impl_->model; }
const EngineOptions& Engine::options() const { return impl_->opt; }

}  // namespace ll3
