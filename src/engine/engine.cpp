// The engine: the request queue and the loop that turns scheduler steps into forward passes,
// samples, and callbacks. One thread runs the loop; submit / cancel / stats only touch the
// inbox under a mutex.
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

#include "backend/backend.h"
#include "backend/gpu_runner.h"
#include "core/thread_pool.h"
#include "engine/model_impl.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/session_store.h"
#include "engine/stop_strings.h"
#include "kv/block_pool.h"
#include "kv/kv_cache.h"
#include "model/llama_forward.h"

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

constexpr int kMaxTopLogprobs = 20;
constexpr size_t kMaxSessionIdBytes = 256;

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

// One request as the engine thread sees it.
struct Seq {
  Seq(Request r, const Tokenizer& tok)
      : req(std::move(r)), sampler(req.sampling), decoder(tok), stops(req.stop) {
    // Room for any token's text up front: the per-token path then never allocates.
    ev.piece.reserve(256);
    ev.text.reserve(512);
    decoded.reserve(256);
  }
  SeqState st;
  Request req;
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

}  // namespace

struct Engine::Impl {
  std::shared_ptr<const Model> model;
  const LlamaModel& m;
  const Tokenizer& tok;
  EngineOptions opt;
  int64_t max_seq_tokens = 0;

  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<BlockPool> blocks;
  std::unique_ptr<Scheduler> sched;
  std::unique_ptr<SessionStore> sessions;
  std::unique_ptr<ModelRunner> runner;
  std::vector<std::unique_ptr<Sampler>> samplers;  // one per pool thread

  // Per step, sized once.
  std::vector<int32_t> plan_tokens;
  std::vector<SeqBatch> plan_seqs;
  std::vector<int32_t> plan_rows;
  std::vector<float> logits;      // (min(max_seqs, batch_tokens) + prompt logit rows, n_vocab)
  std::vector<Seq*> to_sample;
  std::vector<int32_t> sample_rows;  // the logits row of each to_sample entry
  struct PromptRow {
    Seq* seq;
    int64_t pos;  // the row's position: its logits score prompt token pos + 1
    int32_t row;
  };
  std::vector<PromptRow> prompt_rows;

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
  Status save_result;
  RequestId next_id = 1;
  EngineStats stats;

  // The engine thread's own.
  std::unordered_map<RequestId, std::unique_ptr<Seq>> seqs;
  std::thread thread;

  Impl(std::shared_ptr<const Model> mod, const EngineOptions& o)
      : model(std::move(mod)), m(*model->impl().llama), tok(*model->impl().tokenizer), opt(o) {}

  Status init();
  Status make_runner();
  Result<RequestId> submit(Request r);
  void loop();
  void step();
  void take_inbox();
  void handle_token(Seq* s);
  void finish(Seq* s, FinishReason reason, const std::string& error = "");
  void publish_stats();
  void sample_all();
  void score_prompts();
  bool save_now();
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

// The GPU when one is usable and asked for (gpu_layers), else the CPU.
Status Engine::Impl::make_runner() {
  const int64_t layers = m.config.n_layers;
  if (opt.gpu_layers < -1) return Status::error("gpu_layers must be -1 (all), 0 or a layer count", StatusCode::kInvalid);
  if (opt.gpu_layers > 0 && opt.gpu_layers < layers) {
    return Status::errorf("--gpu-layers %d of %lld: splitting the layers between the GPU and the CPU is not built yet "
                          "(use 0 for the CPU, or all)",
                          opt.gpu_layers, static_cast<long long>(layers));
  }
  std::string why;
  if (opt.gpu_layers != 0 && !cuda_devices(&why).empty()) {
    GpuRunnerOptions go;
    go.max_batch_tokens = opt.batch_tokens;
    Result<std::unique_ptr<ModelRunner>> g = make_cuda_runner(m, *kv, go);
    if (g.ok()) {
      runner = std::move(g.value());
      std::fprintf(stderr, "ll3: running on %s\n", runner->where().c_str());
      return Status();
    }
    if (opt.gpu_layers > 0) return g.status();
    std::fprintf(stderr, "ll3: not on the GPU (%s): running on the CPU\n", g.message().c_str());
  } else if (opt.gpu_layers > 0) {
    return Status::error("--gpu-layers: " + (cuda_compiled_archs().empty() ? std::string("this ll3 was built without CUDA") : why));
  }
  runner = std::make_unique<LlamaRunner>(m, *kv, *pool, opt.batch_tokens, opt.int8_activations, opt.amx_prompts);
  return Status();
}

Status Engine::Impl::init() {
  const LlamaConfig& c = m.config;
  if (opt.block_size < 1 || opt.block_size > 1024) return Status::error("block size must be in 1..1024", StatusCode::kInvalid);
  if (opt.max_seqs < 1) return Status::error("max_seqs must be at least 1", StatusCode::kInvalid);
  if (opt.batch_tokens < 1) return Status::error("batch_tokens must be at least 1", StatusCode::kInvalid);
  if (opt.max_queue < 0 || opt.kv_memory < 0 || opt.ctx < 0 || opt.session_memory < 0 || !(opt.batch_wait_ms >= 0)) {
    return Status::error("engine options must not be negative", StatusCode::kInvalid);
  }
  const DType kt = kv_dtype(opt.kv_type);
  const int64_t per_token = kv_bytes_per_token(c, kt);
  const int64_t bs = opt.block_size;
  int64_t tokens = opt.ctx > 0 ? opt.ctx : std::min<int64_t>(c.context_length, 16384);
  if (opt.kv_memory > 0) tokens = opt.kv_memory / per_token;
  if (tokens < 1) {
    return Status::errorf("a KV pool of %lld bytes holds no position (%lld bytes each)",
                          static_cast<long long>(opt.kv_memory), static_cast<long long>(per_token));
  }
  const int64_t n_blocks = (tokens + bs - 1) / bs;
  max_seq_tokens = std::min<int64_t>(c.context_length, tokens);
  pool = std::make_unique<ThreadPool>(opt.threads);
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
  blocks = std::make_unique<BlockPool>(static_cast<int32_t>(n_blocks), static_cast<int32_t>(bs), model->impl().id);
  SchedulerOptions so;
  so.batch_tokens = opt.batch_tokens;
  so.max_seqs = opt.max_seqs;
  so.prefix_cache = opt.prefix_cache;
  sched = std::make_unique<Scheduler>(*blocks, so);
  const int64_t session_blocks = opt.session_memory > 0 ? opt.session_memory / (per_token * bs) : n_blocks / 4;
  sessions = std::make_unique<SessionStore>(*blocks, *kv, model->impl().id, session_blocks, opt.session_dir);
  sched->set_reclaim([this] { return sessions->evict_one(); });
  LL3_RETURN_IF_ERROR(make_runner());
  for (int t = 0; t < pool->size(); ++t) samplers.push_back(std::make_unique<Sampler>(static_cast<int32_t>(c.n_vocab)));
  plan_tokens.reserve(static_cast<size_t>(opt.batch_tokens));
  plan_seqs.reserve(static_cast<size_t>(opt.max_seqs));
  to_sample.reserve(static_cast<size_t>(opt.max_seqs));
  sample_rows.reserve(static_cast<size_t>(opt.max_seqs));
  const int64_t rows = std::min(opt.max_seqs, opt.batch_tokens) + so.prompt_logit_rows;
  plan_rows.reserve(static_cast<size_t>(rows));
  prompt_rows.reserve(static_cast<size_t>(rows));
  logits.resize(static_cast<size_t>(rows * c.n_vocab));
  stats.kv_blocks = n_blocks;
  stats.block_size = bs;
  stats.max_seq_tokens = max_seq_tokens;
  thread = std::thread([this] { loop(); });
  return Status();
}

Result<RequestId> Engine::Impl::submit(Request r) {
  auto invalid = [](const std::string& msg) { return Status::error(msg, StatusCode::kInvalid); };
  const int64_t V = m.config.n_vocab;
  if (r.tokens.empty()) {
    if (r.text.empty()) return invalid("the prompt is empty");
    r.tokens = tok.encode(r.text, r.add_bos, true);
    if (r.tokens.empty()) return invalid("the prompt is empty");
  }
  for (int32_t t : r.tokens) {
    if (t < 0 || t >= V) return invalid(strprintf("prompt token id %d is out of range (vocabulary of %lld)", t, static_cast<long long>(V)));
  }
  if (Status st = validate(r.sampling); !st.ok()) return invalid(st.message());
  if (r.top_logprobs < 0 || r.top_logprobs > kMaxTopLogprobs) {
    return invalid(strprintf("top_logprobs must be in 0..%d, got %d", kMaxTopLogprobs, r.top_logprobs));
  }
  if (r.max_tokens < -1) return invalid(strprintf("max_tokens must be >= 0 (-1: until the context is full), got %lld", static_cast<long long>(r.max_tokens)));
  if (r.session_id.size() > kMaxSessionIdBytes) return invalid("session id longer than 256 bytes");
  if (r.prompt_logprobs < -1 || r.prompt_logprobs > kMaxTopLogprobs) {
    return invalid(strprintf("prompt_logprobs must be in -1..%d, got %d", kMaxTopLogprobs, r.prompt_logprobs));
  }
  if (r.prompt_logprobs >= 0 && !r.session_id.empty()) {
    return invalid("prompt log-probabilities need the whole prompt computed: not with a session");
  }
  const int64_t n = static_cast<int64_t>(r.tokens.size());
  if (n >= max_seq_tokens) {
    return Status::error(strprintf("the prompt has %lld tokens; a sequence holds at most %lld (context %lld, KV pool %lld)",
                                   static_cast<long long>(n), static_cast<long long>(max_seq_tokens),
                                   static_cast<long long>(m.config.context_length),
                                   static_cast<long long>(stats.kv_blocks * stats.block_size)),
                         StatusCode::kTooLong);
  }
  if (r.max_tokens > 0 && n + r.max_tokens > max_seq_tokens) {
    return Status::error(strprintf("prompt (%lld tokens) + max_tokens (%lld) = %lld exceed the %lld tokens a sequence can hold",
                                   static_cast<long long>(n), static_cast<long long>(r.max_tokens),
                                   static_cast<long long>(n + r.max_tokens), static_cast<long long>(max_seq_tokens)),
                         StatusCode::kTooLong);
  }
  auto s = std::make_unique<Seq>(std::move(r), tok);
  s->st.tokens = std::move(s->req.tokens);
  s->st.n_prompt = n;
  // The token list and the block table reach their longest here: reserved now, so that
  // generating never reallocates them.
  const int64_t max_len = s->req.max_tokens >= 0 ? n + s->req.max_tokens : max_seq_tokens;
  s->st.tokens.reserve(static_cast<size_t>(max_len));
  s->st.blocks.reserve(static_cast<size_t>((max_len + stats.block_size - 1) / stats.block_size));
  s->st.priority = s->req.priority;
  if (s->req.prompt_logprobs >= 0) {
    s->st.all_logits = true;
    s->prompt_lps.resize(static_cast<size_t>(n - 1));
    for (int64_t i = 1; i < n; ++i) {
      s->prompt_lps[i - 1].token = s->st.tokens[i];
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
  s->st.id = id;
  s->st.arrival = id;
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
        std::fprintf(stderr, "ll3: %s\n", st.message().c_str());
      }
    }
    sched->enqueue(&s->st);
    const RequestId id = s->st.id;
    seqs.emplace(id, std::move(s));
  }
  for (RequestId id : cn) {
    auto it = seqs.find(id);
    if (it != seqs.end() && !it->second->done) finish(it->second.get(), FinishReason::kCancelled);
  }
}

void Engine::Impl::finish(Seq* s, FinishReason reason, const std::string& error) {
  s->done = true;
  FinishInfo info;
  info.reason = reason;
  info.error = error;
  if (reason != FinishReason::kError && !s->stops.stopped()) {
    StopStringMatcher::Step tail = s->stops.feed(s->decoder.flush());
    info.text = std::string(tail.emit);
    if (!tail.stopped) info.text += s->stops.flush();
  }
  info.stop_string = std::string(s->stops.matched());
  info.prompt_tokens = s->st.n_prompt;
  info.cached_tokens = s->st.cached_tokens;
  info.completion_tokens = s->n_generated;
  info.preemptions = s->st.preemptions;
  const double t = now();
  info.queued_seconds = (s->t_scheduled > 0 ? s->t_scheduled : t) - s->t_submit;
  info.first_token_seconds = s->t_first > 0 ? s->t_first - s->t_submit : 0;
  info.total_seconds = t - s->t_submit;
  info.session_warning = s->session_warning;
  const bool was_waiting = !s->st.admitted_once;
  if (!s->req.session_id.empty() && reason != FinishReason::kError && s->st.n_computed > 0) {
    sched->name_tail(&s->st);
    const int64_t bs = blocks->block_size();
    const size_t nb = static_cast<size_t>((s->st.n_computed + bs - 1) / bs);
    sessions->pin(s->req.session_id,
                  std::span<const int32_t>(s->st.tokens).first(static_cast<size_t>(s->st.n_computed)),
                  std::span<const int32_t>(s->st.blocks).first(nb));
  }
  sched->remove(&s->st);
  if (s->req.on_finish) s->req.on_finish(info);
  std::lock_guard<std::mutex> lk(mu);
  live.erase(s->st.id);
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
      Seq* s = to_sample[i];
      const float* row = &logits[static_cast<size_t>(sample_rows[i] * V)];
      s->sampled = samplers[thread]->sample(s->sampler, row, s->st.tokens);
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
             static_cast<int64_t>(s->st.tokens.size()) + 1 > max_seq_tokens) {
    finish(s, FinishReason::kLength);
  } else {
    s->st.tokens.push_back(t);
  }
}

void Engine::Impl::step() {
  const Scheduler::Step& st = sched->schedule();
  const double t0 = now();
  for (SeqState* a : st.admitted) {
    Seq* s = seqs.at(a->id).get();
    if (s->t_scheduled == 0) {
      s->t_scheduled = t0;
      std::lock_guard<std::mutex> lk(mu);
      --queued;
      stats.prompt_tokens += a->n_prompt;
      stats.prompt_tokens_cached += a->cached_tokens;
    }
  }
  if (!st.preempted.empty()) {
    std::lock_guard<std::mutex> lk(mu);
    stats.preemptions += static_cast<int64_t>(st.preempted.size());
  }
  if (st.items.empty()) {
    // Nothing fits even with every cached block evicted and every session unpinned: the
    // oldest waiting request cannot run (submit's checks make this unreachable).
    if (sched->running().empty() && !sched->waiting().empty()) {
      finish(seqs.at(sched->waiting().front()->id).get(), FinishReason::kError, "the request does not fit the KV pool");
    }
    return;
  }
  // Copy on write of partly matching cached blocks, before anything writes the pool.
  for (const Scheduler::Copy& c : st.copies) kv->copy_positions(c.src, c.dst, c.n_tokens);
  plan_tokens.clear();
  plan_seqs.clear();
  plan_rows.clear();
  to_sample.clear();
  sample_rows.clear();
  prompt_rows.clear();
  int64_t prompt_computed = 0;
  for (const Scheduler::Item& it : st.items) {
    SeqState* q = it.seq;
    SeqBatch sb;
    sb.n_past = static_cast<int32_t>(q->n_computed);
    sb.token_begin = static_cast<int32_t>(plan_tokens.size());
    sb.n_tokens = static_cast<int32_t>(it.n_tokens);
    sb.block_table = q->blocks;
    plan_tokens.insert(plan_tokens.end(), q->tokens.begin() + q->n_computed, q->tokens.begin() + q->n_computed + it.n_tokens);
    plan_seqs.push_back(sb);
    Seq* s = seqs.at(q->id).get();
    if (it.all_logits) {
      // Every row: row i scores prompt token n_computed + i + 1 (the last row of the prompt
      // scores none; it samples).
      for (int64_t i = 0; i < it.n_tokens; ++i) {
        const int64_t pos = q->n_computed + i;
        if (pos + 1 < q->n_prompt) prompt_rows.push_back({s, pos, static_cast<int32_t>(plan_rows.size())});
        if (i + 1 < it.n_tokens) plan_rows.push_back(sb.token_begin + static_cast<int32_t>(i));
      }
    }
    if (it.logits || it.all_logits) plan_rows.push_back(static_cast<int32_t>(plan_tokens.size() - 1));
    if (it.logits) {
      to_sample.push_back(s);
      sample_rows.push_back(static_cast<int32_t>(plan_rows.size() - 1));
    }
    prompt_computed += std::max<int64_t>(0, std::min(q->n_computed + it.n_tokens, q->n_prompt) - q->n_computed);
  }
  BatchPlan plan;
  plan.tokens = plan_tokens;
  plan.seqs = plan_seqs;
  plan.logit_rows = plan_rows;
  Status fs = runner->forward(plan, logits.data());
  if (!fs.ok()) {
    for (const Scheduler::Item& it : st.items) finish(seqs.at(it.seq->id).get(), FinishReason::kError, fs.message());
    return;
  }
  sched->computed(st);
  {
    std::lock_guard<std::mutex> lk(mu);
    ++stats.steps;
    stats.prompt_tokens_computed += prompt_computed;
    auto bucket = [](int64_t n) {
      size_t b = 0;
      while (b < kStepBucketBounds.size() && static_cast<double>(n) > kStepBucketBounds[b]) ++b;
      return b;
    };
    ++stats.step_tokens[bucket(st.n_tokens)];
    ++stats.step_seqs[bucket(static_cast<int64_t>(st.items.size()))];
    stats.step_tokens_sum += st.n_tokens;
    stats.step_seqs_sum += static_cast<int64_t>(st.items.size());
  }
  score_prompts();
  sample_all();
  for (Seq* s : to_sample) {
    if (s->done) continue;
    if (s->st.all_logits) {
      // The prompt is scored: hand it over before the first token (and use the cache again if
      // the sequence is ever recomputed).
      s->st.all_logits = false;
      if (s->req.on_prompt) s->req.on_prompt(s->prompt_lps);
    }
    handle_token(s);
  }
}

void Engine::Impl::publish_stats() {
  std::lock_guard<std::mutex> lk(mu);
  stats.requests_running = static_cast<int64_t>(sched->running().size());
  stats.requests_waiting = static_cast<int64_t>(sched->waiting().size() + inbox.size());  // preempted ones too
  stats.kv_blocks_used = blocks->used_blocks();
  stats.kv_blocks_cached = blocks->cached_blocks();
  stats.sessions = sessions->sessions();
  stats.session_blocks = sessions->pinned_blocks();
  stats.sessions_saved = sessions->saved;
  stats.sessions_restored = sessions->restored;
  stats.session_files_rejected = sessions->rejected;
  settled = true;
  idle.notify_all();
}

void Engine::Impl::loop() {
  for (;;) {
    if (save_now()) continue;
    {
      std::unique_lock<std::mutex> lk(mu);
      while (!stopping && !save_requested && inbox.empty() && cancels.empty() && seqs.empty()) {
        if (sessions->has_unsaved()) {
          // Idle: save the sessions now, off any request's path.
          lk.unlock();
          Status st = sessions->save_all();
          if (!st.ok()) std::fprintf(stderr, "ll3: %s\n", st.message().c_str());
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
    publish_stats();
  }
  // Shutdown: whatever is still queued or running is cancelled, then sessions are saved.
  take_inbox();
  for (auto& [id, s] : seqs) {
    if (!s->done) finish(s.get(), FinishReason::kCancelled);
  }
  seqs.clear();
  Status st = sessions->save_all();
  if (!st.ok()) std::fprintf(stderr, "ll3: %s\n", st.message().c_str());
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
  impl_->idle.wait(lk, [&] { return impl_->live.empty() && impl_->settled; });
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
