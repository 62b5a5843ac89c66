// The engine: the request queue and the loop that turns scheduler steps into forward passes,
// samples, and callbacks. One thread runs the loop; submit / cancel / stats only touch the
// inbox under a mutex. A step (engine_step.cpp) is guess -> plan -> run -> sample -> verify ->
// deliver; the guessing and verifying of speculative decoding are in engine_spec.cpp.
#include "ll3/engine.h"

#include <algorithm>
#include <cstdio>
#include <future>

#include "core/resource_limits.h"
#include "engine/engine_impl.h"

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

DType kv_dtype(KvType t) {
  switch (t) {
    case KvType::kF32: return DType::F32;
    case KvType::kQ8_0: return DType::Q8_0;
    case KvType::kQ4_0: return DType::Q4_0;
    case KvType::kF16: break;
  }
  return DType::F16;
}

// Bytes one position takes in the KV cache (K and V of every layer).
int64_t kv_bytes_per_token(const LlamaConfig& c, DType t) {
  const int64_t row = c.n_kv_heads * static_cast<int64_t>(dtype_row_bytes(t, c.head_dim));  // as KvCache lays it out
  return 2 * c.n_layers * row;
}
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
  if (!std::isfinite(opt.itl_target_ms)) return Status::invalid("itl_target_ms must be a number of milliseconds", "itl_target_ms");
  if (opt.spec_max_guesses < 1 || opt.spec_max_guesses > 32) {
    return Status::invalid("spec_max_guesses must be in 1..32", "spec_max_guesses");
  }
  if (opt.spec_min_guesses < 0 || opt.spec_min_guesses > opt.spec_max_guesses) {
    return Status::invalid("spec_min_guesses must be in 0..spec_max_guesses", "spec_min_guesses");
  }
  if (opt.spec == SpecMode::kDraft && !opt.draft_model) return Status::invalid("speculation by a draft model needs one", "draft_model");
  if (opt.max_queue < 0 || opt.kv_memory < 0 || opt.ctx < 0 || opt.session_memory < 0 || !(opt.batch_wait_ms >= 0)) {
    return Status::error("engine options must not be negative", StatusCode::kInvalid);
  }
  pool = std::make_unique<ThreadPool>(opt.threads);
  LL3_RETURN_IF_ERROR(make_kv());
  SchedulerOptions so;
  so.batch_tokens = opt.batch_tokens;
  so.max_seqs = opt.max_seqs;
  so.max_seq_blocks = (max_seq_tokens + opt.block_size - 1) / opt.block_size;
  // Guesses get logit rows of their own: up to 64 a step, shared (32 MB at a 128k vocabulary).
  if (opt.spec != SpecMode::kOff) so.draft_rows = std::min<int64_t>(64, opt.max_seqs * opt.spec_max_guesses);
  // Prompt chunks beside running streams are sized to an inter-token target by a cost model
  // of this engine's own steps (Scheduler, StepCostModel).
  step_cost = std::make_unique<StepCostModel>(StepCostModel::prior_for(m.config, static_cast<double>(m.weight_bytes())));
  so.cost = step_cost.get();
  so.itl_target_s = opt.itl_target_ms / 1e3;
  // A token a step is progress enough: late in a long prompt one KV block of it (attention over
  // thousands of positions per token) alone took more than the target (measured: 16 tokens made
  // 118 ms steps against a 92 ms target on two Zen 5 cores).
  so.min_prompt_chunk = 1;
  sched = std::make_unique<Scheduler>(*kvm, so);
  RunnerOptions ro;
  ro.gpu_layers = opt.gpu_layers;
  ro.gpu_memory = opt.gpu_memory;
  ro.host_weights_pinned = opt.host_weights_pinned;
  ro.max_batch_tokens = opt.batch_tokens;
  ro.int8_activations = opt.int8_activations;
  ro.amx_prompts = opt.amx_prompts;
  ro.lora = lora_enabled();
  ro.log = log;
  Result<std::unique_ptr<ModelRunner>> r = make_runner(m, *kv, *pool, ro);
  if (!r.ok()) return r.status();
  runner = std::move(r.value());
  if (opt.spec == SpecMode::kDraft) LL3_RETURN_IF_ERROR(make_draft(ro));
  const int64_t V = m.config.n_vocab;
  for (int t = 0; t < pool->size(); ++t) samplers.push_back(std::make_unique<Sampler>(static_cast<int32_t>(V)));
  plan_seqs.reserve(static_cast<size_t>(opt.max_seqs));
  plan_seq_ptrs.reserve(static_cast<size_t>(opt.max_seqs));
  plan_lora_sets.reserve(static_cast<size_t>(opt.max_seqs));
  plan_seq_lora.reserve(static_cast<size_t>(opt.max_seqs));
  if (opt.max_loras < 0) return Status::invalid("max_loras must not be negative", "max_loras");
  for (const LoraSpec& spec : opt.loras) LL3_RETURN_IF_ERROR(load_lora(spec));
  to_sample.reserve(static_cast<size_t>(opt.max_seqs));
  const int64_t rows = std::min(opt.max_seqs, opt.batch_tokens) + so.prompt_logit_rows + so.draft_rows;
  draft_jobs.reserve(static_cast<size_t>(opt.max_seqs));
  guessed.reserve(static_cast<size_t>(opt.max_seqs));
  plan_rows.reserve(static_cast<size_t>(rows));
  prompt_rows.reserve(static_cast<size_t>(rows));
  logits.resize(static_cast<size_t>(rows * V));
  hidden.resize(static_cast<size_t>(opt.batch_tokens * m.config.dim));
  hidden_rows.reserve(static_cast<size_t>(opt.batch_tokens));
  hidden_runs.reserve(static_cast<size_t>(opt.max_seqs));
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
  const bool embedding = r.pooling != Pooling::kNone;
  if (embedding) LL3_RETURN_IF_ERROR(prepare_embedding(&r));  // engine_embed.cpp
  prepare_grammar(r);
  const int64_t n = static_cast<int64_t>(r.tokens.size());
  if (!embedding) LL3_RETURN_IF_ERROR(check_fits(n, r.max_tokens));
  auto s = std::make_unique<Seq>(std::move(r), tok, opt.spec_max_guesses);
  s->prompt = std::move(s->req.tokens);
  s->max_len = s->req.max_tokens >= 0 ? n + s->req.max_tokens : max_seq_tokens;
  if (embedding) s->pooled.assign(static_cast<size_t>(m.config.dim), 0.0);
  if (s->req.prompt_logprobs >= 0) {
    s->prompt_lps.resize(static_cast<size_t>(n - 1));
    for (int64_t i = 1; i < n; ++i) {
      s->prompt_lps[i - 1].token = s->prompt[i];
      s->prompt_lps[i - 1].top_logprobs.reserve(static_cast<size_t>(s->req.prompt_logprobs) + 1);
    }
  }
  s->t_submit = now_seconds();
  std::lock_guard<std::mutex> lk(mu);
  if (stopping) return Status::error("the engine is shutting down", StatusCode::kUnavailable);
  if (queued >= opt.max_queue) {
    ++stats.requests_rejected;
    return Status::error(strprintf("the queue is full: %lld requests waiting (max_queue %lld)", static_cast<long long>(queued),
                                   static_cast<long long>(opt.max_queue)),
                         StatusCode::kUnavailable);
  }
  if (!s->req.loras.empty()) {
    Result<std::shared_ptr<const EngineLoraSet>> set = resolve_loras(s->req.loras);
    if (!set.ok()) return set.status();
    s->lora = std::move(set.value());
  }
  s->session_key = s->req.session_id;
  if (s->lora && !s->session_key.empty()) s->session_key += strprintf("#lora-%016llx", static_cast<unsigned long long>(s->lora->salt));
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
    const uint64_t salt = s->lora ? s->lora->salt : 0;
    if (!s->session_key.empty()) {
      Status st = sessions->restore(s->session_key, salt);
      if (!st.ok()) {
        s->session_warning = st.message();
        log.warn(st.message());
      }
    }
    sched->add(s->id, std::move(s->prompt), s->max_len, s->req.priority, s->req.prompt_logprobs >= 0,
               s->req.pooling != Pooling::kNone, salt);
    if (draft && s->req.speculative) draft->open(s->id, s->max_len);
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
  // What the client saw: not the guesses accepted after a stop (their KV is valid all the same).
  const int64_t n = std::min(q.n_computed, s->keep_limit);
  const size_t nb = static_cast<size_t>((n + bs - 1) / bs);
  sessions->pin(s->session_key, std::span<const int32_t>(q.tokens).first(static_cast<size_t>(n)),
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
  const double t = now_seconds();
  info.queued_seconds = (s->t_scheduled > 0 ? s->t_scheduled : t) - s->t_submit;
  info.first_token_seconds = s->t_first > 0 ? s->t_first - s->t_submit : 0;
  info.total_seconds = t - s->t_submit;
  info.session_warning = s->session_warning;
  const bool was_waiting = !q.admitted_once;
  if (!s->req.session_id.empty() && reason != FinishReason::kError) keep_session(s);
  sched->remove(s->id);
  if (draft) draft->close(s->id);
  release_loras(s);
  if (s->req.on_finish) s->req.on_finish(info);
  std::lock_guard<std::mutex> lk(mu);
  live.erase(s->id);
  if (was_waiting) --queued;
  ++stats.requests_finished;
  settled = false;
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

Status Engine::load_lora(const LoraSpec& spec) { return impl_->load_lora(spec); }
Status Engine::unload_lora(const std::string& name) { return impl_->unload_lora(name); }

std::vector<LoraInfo> Engine::loras() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  std::vector<LoraInfo> out;
  for (const auto& [name, e] : impl_->loras) {
    LoraInfo i;
    i.name = name;
    i.path = e.spec.path;
    i.format = e.adapter->format;
    i.scale = e.spec.scale;
    i.rank = e.adapter->max_rank;
    i.bytes = static_cast<int64_t>(e.adapter->bytes());
    i.requests = e.requests;
    i.running = e.running;
    out.push_back(std::move(i));
  }
  return out;
}

const Model& Engine::model() const { return *impl_->model; }
const EngineOptions& Engine::options() const { return impl_->opt; }

}  // namespace ll3
