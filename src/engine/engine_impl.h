// The engine's inside, shared by its translation units: a request as the engine thread sees it
// (Seq) and Engine::Impl, whose methods are split by topic: engine.cpp (the queue, the loop,
// admission, finishing, sessions), engine_step.cpp (one step: plan -> run -> sample -> deliver)
// and engine_spec.cpp (speculative decoding: guessing before a step, verifying after it).
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/runner.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "engine/draft_model.h"
#include "engine/model_impl.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/session_store.h"
#include "engine/speculator.h"
#include "engine/step_cost.h"
#include "engine/stop_strings.h"
#include "grammar/matcher.h"
#include "grammar/token_filter.h"
#include "kv/block_pool.h"
#include "kv/kv_cache.h"
#include "kv/kv_manager.h"
#include "ll3/engine.h"
#include "model/lora.h"

namespace ll3 {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The log-probabilities of one sampled row (Request::logprobs / top_logprobs).
struct RowLogprob {
  float logprob = 0;
  std::vector<TopLogprob> top;
};

// A request's LoRA adapters as the runner takes them (BatchPlan::lora_sets), what keeps them
// loaded while it runs, and the fingerprint its KV is keyed by. Requests with the same adapters
// at the same scales share one (their rows share the pass over A and B).
struct EngineLoraSet {
  LoraSet set;
  std::vector<std::shared_ptr<const LoraAdapter>> keep;
  std::vector<std::string> names;
  uint64_t salt = 0;
};

// A loaded adapter (engine_lora.cpp).
struct LoraEntry {
  std::shared_ptr<const LoraAdapter> adapter;
  LoraSpec spec;
  uint64_t last_used = 0;
  int64_t requests = 0, running = 0;
};

// One request as the engine thread sees it. Its tokens and KV are the scheduler's.
struct Seq {
  Seq(Request r, const Tokenizer& tok, int max_guesses)
      : req(std::move(r)), sampler(req.sampling), decoder(tok), stops(req.stop) {
    // Room for any token's text up front, and for every row a step can sample for it: the
    // per-token path then never allocates.
    ev.piece.reserve(256);
    ev.text.reserve(512);
    ev.top_logprobs.reserve(static_cast<size_t>(kMaxTopLogprobs) + 1);
    decoded.reserve(256);
    guesses.resize(static_cast<size_t>(max_guesses));
    lps.resize(static_cast<size_t>(max_guesses) + 1);
    for (RowLogprob& lp : lps) lp.top.reserve(static_cast<size_t>(req.top_logprobs) + 1);
    if (req.grammar) grammar.emplace(req.grammar);
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
  // Speculation: this step's guesses (the scheduler holds the ones it runs), how many of them the
  // model accepted, where they start in the token list, and the recent acceptance.
  std::vector<int32_t> guesses;
  int64_t n_accepted = 0;
  int64_t guess_base = 0;
  AcceptanceRate spec_rate;
  std::vector<RowLogprob> lps;  // per sampled row of the step: the accepted guesses, then the new token
  int64_t keep_limit = INT64_MAX;  // a session keeps at most this many tokens (a stop mid-run)
  TokenEvent ev;
  std::vector<PromptTokenLogprob> prompt_lps;  // Request::prompt_logprobs: entry i is token i + 1
  std::string decoded;  // this token's complete UTF-8 text (capacity reused)
  std::string session_warning;
  // Embedding requests (engine_embed.cpp): the sum (kMean) or the last row (kLast) of the
  // prompt's final hidden rows, (dim), and how many positions it holds.
  std::vector<double> pooled;
  int64_t n_pooled = 0;
  std::optional<grammar::Matcher> grammar;  // Request::grammar: how far its output is in it
  std::shared_ptr<const EngineLoraSet> lora;  // Request::loras; null: the base model
  // The session's name in the store: Request::session_id, keyed by the adapter set's fingerprint.
  std::string session_key;
};

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
  std::unique_ptr<StepCostModel> step_cost;  // timed forward passes; sizes the scheduler's prompt chunks
  std::unique_ptr<SessionStore> sessions;
  std::unique_ptr<ModelRunner> runner;
  std::vector<std::unique_ptr<Sampler>> samplers;  // one per pool thread
  std::unique_ptr<DraftModel> draft;                // SpecMode::kDraft

  // LoRA adapters by name, the sets requests use (engine_lora.cpp), under mu.
  std::map<std::string, LoraEntry> loras;
  std::map<std::string, std::weak_ptr<const EngineLoraSet>> lora_sets;
  uint64_t lora_clock = 0;

  // Per step, sized once.
  std::vector<SeqBatch> plan_seqs;
  std::vector<Seq*> plan_seq_ptrs;  // the request of each of plan_seqs
  std::vector<const LoraSet*> plan_lora_sets;
  std::vector<int32_t> plan_seq_lora;
  std::vector<int32_t> plan_rows;
  std::vector<float> logits;      // (min(max_seqs, batch_tokens) + prompt logit rows, n_vocab)
  struct SampleRow {
    Seq* seq;
    const std::vector<int32_t>* history;  // its tokens so far, guesses included (penalties)
    int32_t row;                          // its first logits row
    int32_t n_guesses;                    // rows row .. row + n_guesses verify its guesses
  };
  std::vector<SampleRow> to_sample;
  struct PromptRow {
    Seq* seq;
    int64_t pos;  // the row's position: its logits score prompt token pos + 1
    int32_t row;
  };
  std::vector<PromptRow> prompt_rows;
  int64_t step_prompt_tokens = 0;  // prompt tokens the step computes
  // Embedding requests' final hidden rows this step (engine_embed.cpp): runs of consecutive
  // positions of one sequence.
  std::vector<float> hidden;          // (batch_tokens, dim)
  std::vector<int32_t> hidden_rows;   // BatchPlan::hidden_rows
  struct HiddenRun {
    Seq* seq;
    int64_t pos;  // the first row's position
    int32_t row;  // its index in `hidden`
    int32_t n;
  };
  std::vector<HiddenRun> hidden_runs;
  std::vector<DraftModel::Job> draft_jobs;
  std::vector<Seq*> guessed;       // sequences that guessed before this step
  bool draft_failed = false;       // the draft model failed a step: no more guessing
  // Constrained sampling (Request::grammar): the vocabulary's bytes in a trie, made for the first
  // such request, and per pool thread a matcher to try a token on and the allowed-token flags.
  std::once_flag token_filter_once;
  std::unique_ptr<grammar::TokenFilter> token_filter;
  std::vector<std::optional<grammar::Matcher>> grammar_trial;
  std::vector<std::vector<uint8_t>> grammar_allowed;

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
  Status make_draft(const RunnerOptions& ro);
  Result<int64_t> fit_memory_limit(int64_t tokens, int64_t per_token) const;
  Result<RequestId> submit(Request r);
  Status check_fits(int64_t n_prompt, int64_t max_tokens) const;
  Status prepare_embedding(Request* r) const;
  void loop();
  void take_inbox();
  bool save_now();
  void publish_stats();

  // One step: guess -> plan -> run -> sample -> verify -> deliver.
  void step();
  void propose();
  struct GuessCost {
    int64_t rows;          // the step's decode rows
    double step_s, row_s;  // their predicted seconds; what one more row adds
  };
  GuessCost guess_cost() const;
  int guesses_for(const Seq* s, const SeqState& q, const GuessCost& c) const;
  void verify_guesses();
  void rollback_draft();
  void note_admissions(const SchedulerOutput& out);
  BatchPlan plan(const SchedulerOutput& out);
  void count_step(const SchedulerOutput& out);
  void score_prompts();
  void plan_hidden(Seq* s, const ScheduledSeq& it);
  void pool_hidden();
  void sample_all();
  void prepare_grammar(Request& r);
  int32_t sample_constrained(int thread, Seq* s, const float* row, std::span<const int32_t> history);
  void deliver();
  void handle_token(Seq* s, int32_t t, int64_t pos, const RowLogprob& lp);
  void finish(Seq* s, FinishReason reason, const std::string& error = "");
  void keep_session(Seq* s);

  // LoRA (engine_lora.cpp).
  bool lora_enabled() const { return !opt.loras.empty() || opt.lora_runtime; }
  Status load_lora(const LoraSpec& spec);
  Status unload_lora(const std::string& name);
  // Under mu: the request's adapters, resolved and counted as running; null for none.
  Result<std::shared_ptr<const EngineLoraSet>> resolve_loras(const std::vector<LoraUse>& uses);
  void release_loras(const Seq* s);
  void plan_loras(BatchPlan* p);
};
}  // namespace ll3
