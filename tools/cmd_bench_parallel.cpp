// ll3 bench --parallel: the serving engine under concurrent load, in one run so that the figures
// can be compared as ratios on a noisy machine:
//   - aggregate generation tokens/s with 1, 4, 16, 64 ... concurrent sequences;
//   - time to first token of a long prompt, cold and with its prefix cached;
//   - a session's second turn after a long history, with the session, without it, and after a
//     restart from the session directory;
//   - fairness: inter-token latency of running streams while a long prompt is prefilled, against
//     the same streams' before it, and the long prompt's time to first token against an idle
//     engine's (what the streams' protection costs it).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include <unistd.h>

#include "bench_parallel.h"
#include "cli_common.h"
#include "engine/model_impl.h"

namespace ll3::cli {

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double idx = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(idx);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

std::vector<int32_t> random_tokens(int n, std::mt19937& rng, int64_t vocab) {
  std::vector<int32_t> t = {128000};
  while (static_cast<int>(t.size()) < n) t.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(std::min<int64_t>(vocab, 128000))));
  return t;
}

Request greedy(std::vector<int32_t> tokens, int64_t max_tokens) {
  Request r;
  r.tokens = std::move(tokens);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  return r;
}

// Time to first token of one request (seconds), run alone.
double ttft(Engine& e, Request r) {
  r.max_tokens = 1;
  Result<Engine::Completion> c = e.generate(std::move(r));
  if (!c.ok()) {
    std::fprintf(stderr, "ll3 bench: %s\n", c.message().c_str());
    std::exit(1);
  }
  return c->finish.first_token_seconds;
}

struct AggregateRun {
  double tps = 0;         // generated tokens / wall time from the first submit to the last token
  double decode_tps = 0;  // tokens / time while every stream was past its prompt (all decoding)
  std::vector<double> itls;
};

// n streams of `prompt_len`-token prompts, `gen` tokens each, submitted together; stream i with
// LoRA adapter loras[i % loras.size()] when any are given.
AggregateRun aggregate_once(Engine& e, int n, int prompt_len, int gen, std::mt19937& rng, int64_t vocab,
                            const std::vector<std::string>& loras = {}) {
  std::vector<std::vector<double>> times(static_cast<size_t>(n));  // since t0
  std::vector<std::promise<void>> done(static_cast<size_t>(n));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    Request q = greedy(random_tokens(prompt_len, rng, vocab), gen);
    if (!loras.empty()) q.loras.push_back({loras[static_cast<size_t>(i) % loras.size()]});
    times[i].reserve(static_cast<size_t>(gen));
    const double submitted = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    q.on_token = [&times, i, submitted](const TokenEvent& ev) {
      times[i].push_back(submitted + ev.seconds);
      return true;
    };
    q.on_finish = [&done, i](const FinishInfo&) { done[i].set_value(); };
    if (Result<RequestId> id = e.submit(std::move(q)); !id.ok()) {
      std::fprintf(stderr, "ll3 bench: %s\n", id.message().c_str());
      std::exit(1);
    }
  }
  for (auto& d : done) d.get_future().wait();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  AggregateRun run;
  run.tps = static_cast<double>(n) * gen / wall;
  // The decode window: from the moment the last stream got its first token (every prompt done)
  // to the last token; what a step of n decode rows gives, without the prompts' share.
  double all_decoding = 0, last = 0;
  for (const auto& t : times) {
    if (t.empty()) continue;  // a request that failed before its first token
    all_decoding = std::max(all_decoding, t.front());
    last = std::max(last, t.back());
  }
  int64_t in_window = 0;
  for (const auto& t : times) {
    in_window += std::count_if(t.begin(), t.end(), [&](double x) { return x > all_decoding; });
    for (size_t k = 1; k < t.size(); ++k) run.itls.push_back(t[k] - t[k - 1]);
  }
  run.decode_tps = last > all_decoding ? static_cast<double>(in_window) / (last - all_decoding) : 0;
  return run;
}

struct AggregateRow {
  int n = 0;
  double tps = 0, decode_tps = 0;  // medians of the repetitions
  double itl_median = 0;           // seconds between a stream's tokens
};

// Every count once per repetition, the counts interleaved (1, 4, 16, 1, 4, 16, ...), so that a
// slow minute of a shared host hits all of them rather than one: the ratios are what counts.
std::vector<AggregateRow> aggregate(Engine& e, const std::vector<int32_t>& counts, int prompt_len, int gen, int reps,
                                    std::mt19937& rng, int64_t vocab, bool quiet) {
  std::vector<std::vector<AggregateRun>> runs(counts.size());
  for (int r = 0; r < reps; ++r) {
    for (size_t c = 0; c < counts.size(); ++c) {
      runs[c].push_back(aggregate_once(e, counts[c], prompt_len, gen, rng, vocab));
      if (!quiet) {
        std::fprintf(stderr, "ll3 bench: %d sequences: %.1f t/s (decoding %.1f t/s)\n", counts[c], runs[c].back().tps,
                     runs[c].back().decode_tps);
      }
    }
  }
  std::vector<AggregateRow> rows;
  for (size_t c = 0; c < counts.size(); ++c) {
    std::vector<double> tps, dec, itls;
    for (const AggregateRun& a : runs[c]) {
      tps.push_back(a.tps);
      dec.push_back(a.decode_tps);
      itls.insert(itls.end(), a.itls.begin(), a.itls.end());
    }
    rows.push_back({counts[c], percentile(tps, 0.5), percentile(dec, 0.5), percentile(itls, 0.5)});
  }
  return rows;
}

// The flags of ll3 bench --parallel, parsed and checked, and the engine options they make.
struct ParallelFlags {
  std::string model_path, skip;
  std::vector<int32_t> counts;  // --parallel
  int gen = 32, prompt_len = 16, reps = 3, ttft_prompt = 966, history = 2000, fair_prompt = 4096, fair_streams = 8;
  int fair_baseline = 48;
  std::string lora_mix;
  bool json = false;
  EngineFlags ef;
  EngineOptions eo;
  bool wants(const char* test) const { return skip.find(test) == std::string::npos; }
};

// Room for every stream of every test, and a session directory (a temporary one unless given).
void size_engine(ParallelFlags& f) {
  int max_n = 1;
  for (int32_t n : f.counts) max_n = std::max<int>(max_n, n);
  f.eo.max_seqs = std::max(max_n, f.fair_streams + 1);
  f.eo.max_queue = std::max<int64_t>(f.eo.max_queue, max_n);
  if (f.eo.session_dir.empty()) {
    f.eo.session_dir =
        (std::filesystem::temp_directory_path() / ("ll3-bench-sessions-" + std::to_string(getpid()))).string();
  }
}

// Returns -1 to go on, else the exit code (after --help or a usage error).
int parse_parallel_flags(int argc, char** argv, ParallelFlags& f) {
  std::string counts = "1,4,16,64";
  bool parallel_flag = false;
  ArgParser ap("bench", "ll3 bench --parallel [1,4,16,64] [-m MODEL] [-n GEN] [engine flags]",
               "The serving engine under concurrent load: aggregate generation speed, time to first token "
               "with and without a cached prefix, a session's second turn, and fairness during a long prefill.");
  ap.add({"--parallel"}, "LIST", "concurrent sequences to measure (default 1,4,16,64)", [&](const std::string& v) {
    parallel_flag = true;
    counts = v;
    return std::string();
  });
  ap.add_string({"-m", "--model"}, "MODEL", "GGUF file or Hugging Face directory (default: the default model)", &f.model_path);
  ap.add_int({"-n", "--n-gen"}, "N", "tokens each stream generates (default 32)", &f.gen);
  ap.add_int({"--prompt-len"}, "N", "prompt tokens of each stream (default 16)", &f.prompt_len);
  ap.add_int({"-r", "--repetitions"}, "N", "repetitions of each aggregate test; the median is reported (default 3)", &f.reps);
  ap.add_int({"--ttft-prompt"}, "N", "prompt tokens of the time-to-first-token test (default 966)", &f.ttft_prompt);
  ap.add_int({"--history"}, "N", "tokens of history before a session's second turn (default 2000)", &f.history);
  ap.add_int({"--fair-prompt"}, "N", "prompt prefilled during the fairness test (default 4096)", &f.fair_prompt);
  ap.add_int({"--fair-streams"}, "N", "streams running during the fairness test (default 8)", &f.fair_streams);
  ap.add_int({"--fair-baseline"}, "N", "tokens of each stream timed before the long prompt arrives (default 48)",
             &f.fair_baseline);
  ap.add_string({"--lora-mix"}, "LIST", "with --lora adapters: the aggregate test's most streams again, spread over "
                "each count of adapters of the list (0: the base), counts interleaved in one run (e.g. 0,1,4,16)", &f.lora_mix);
  ap.add_string({"--skip"}, "LIST", "tests to leave out: aggregate, ttft, session, fairness", &f.skip);
  ap.add_flag({"--json"}, "print the figures as JSON", &f.json);
  add_engine_flags(ap, &f.ef, true);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  Result<std::vector<int32_t>> ns = parse_token_list(counts);
  if (!ns.ok() || !parallel_flag) return ap.usage_error("--parallel takes a list of sequence counts like 1,4,16,64");
  if (f.gen < 2 || f.prompt_len < 1 || f.reps < 1 || f.ttft_prompt < 2 || f.history < 2 || f.fair_prompt < 2 ||
      f.fair_streams < 1 || f.fair_baseline < 2) {
    return ap.usage_error("-n must be >= 2, the other sizes >= 1");
  }
  if (std::string err = finish_engine_flags(f.ef, &f.eo); !err.empty()) return ap.usage_error(err);
  f.counts = ns.value();
  if (!f.lora_mix.empty()) {
    Result<std::vector<int32_t>> mix = parse_token_list(f.lora_mix);
    if (!mix.ok() || mix->empty()) return ap.usage_error("--lora-mix takes a list of adapter counts like 0,1,4,16");
    for (int32_t k : *mix) {
      if (k > static_cast<int32_t>(f.eo.loras.size())) {
        return ap.usage_error(strprintf("--lora-mix %d: only %zu --lora adapters are given", k, f.eo.loras.size()));
      }
    }
  }
  size_engine(f);
  return -1;
}

// An engine, or the end of the benchmark.
std::unique_ptr<Engine> start_engine(std::shared_ptr<const Model> model, const EngineOptions& o) {
  Result<std::unique_ptr<Engine>> e = Engine::create(std::move(model), o);
  if (!e.ok()) {
    std::fprintf(stderr, "ll3 bench: %s\n", e.message().c_str());
    std::exit(1);
  }
  return std::move(e.value());
}

double clock_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Streams whose tokens' times (clock_s) are recorded, for the fairness test.
struct TimedStreams {
  explicit TimedStreams(int n) : times(static_cast<size_t>(n)), done(static_cast<size_t>(n)) {}
  // Whether every stream has at least n tokens.
  bool all_have(size_t n) {
    std::lock_guard<std::mutex> lk(mu);
    return std::all_of(times.begin(), times.end(), [&](const std::vector<double>& t) { return t.size() >= n; });
  }
  // The intervals between consecutive tokens whose later token came in (from, to].
  std::vector<double> gaps(double from, double to) {
    std::lock_guard<std::mutex> lk(mu);
    std::vector<double> g;
    for (const std::vector<double>& t : times) {
      for (size_t k = 1; k < t.size(); ++k) {
        if (t[k] > from && t[k] <= to) g.push_back(t[k] - t[k - 1]);
      }
    }
    return g;
  }
  std::mutex mu;
  std::vector<std::vector<double>> times;
  std::vector<RequestId> ids;
  std::vector<std::promise<void>> done;
};

// The fairness test's figures (seconds).
struct Fairness {
  double before_p50 = 0, before_p99 = 0;  // the streams' inter-token time before the long prompt
  double during_p50 = 0, during_p99 = 0;  // ... while it is prefilled
  size_t before_n = 0, during_n = 0;      // intervals of each
  double ttft = 0, ttft_idle = 0;         // the long prompt's time to first token, beside the streams and alone
  double itl_target = 0;                  // the engine's inter-token target during the prefill
  std::array<double, 4> step_cost{};      // its step cost model then (EngineStats::step_cost)
  int64_t steps = 0;                      // steps the prefill took
};

// The tests, run in order on one engine (the session test restarts it), each leaving its
// figures for the report and in the JSON.
class ParallelBench {
 public:
  ParallelBench(const ParallelFlags& f, std::shared_ptr<const Model> model, const std::string& type)
      : f_(f), model_(std::move(model)), vocab_(model_->n_vocab()), type_(type) {
    out_ = {{"model_type", type}, {"threads", f.eo.threads}, {"batch_tokens", f.eo.batch_tokens}};
    e_ = start_engine(model_, f.eo);
    where_ = e_->where();
    out_["runs_on"] = where_;
  }

  void aggregate_test();
  void lora_test();
  void ttft_test();
  Status session_test();
  Status fairness_test();
  // Shuts the engine down and removes a temporary session directory.
  void close() {
    e_.reset();
    std::error_code ec;
    if (f_.ef.session_dir.empty()) std::filesystem::remove_all(f_.eo.session_dir, ec);
  }
  void print_json() const { std::printf("%s\n", out_.dump(2).c_str()); }
  void print_text() const;

 private:
  // One decode step of a lone stream (from the aggregate test), or 0.
  double decode_step() const { return !agg_.empty() && agg_[0].n == 1 ? agg_[0].itl_median : 0; }

  const ParallelFlags& f_;
  std::shared_ptr<const Model> model_;
  const int64_t vocab_;
  const std::string type_;
  std::mt19937 rng_{7};
  nlohmann::json out_;
  std::unique_ptr<Engine> e_;
  std::string where_;
  std::vector<AggregateRow> agg_;
  std::vector<std::pair<int, AggregateRow>> lora_;  // adapters, the most streams over them
  double cold_ = 0, warm_ = 0;
  double with_session_ = 0, without_ = 0, restarted_ = 0;
  Fairness fair_;
};

// Aggregate generation speed.
void ParallelBench::aggregate_test() {
  aggregate_once(*e_, 1, f_.prompt_len, f_.gen, rng_, vocab_);  // warm-up
  agg_ = aggregate(*e_, f_.counts, f_.prompt_len, f_.gen, f_.reps, rng_, vocab_, f_.json);
  nlohmann::json a = nlohmann::json::array();
  for (const AggregateRow& r : agg_) {
    a.push_back({{"sequences", r.n}, {"tokens_per_s", r.tps}, {"ratio_to_one", r.tps / agg_[0].tps},
                 {"decode_tokens_per_s", r.decode_tps}, {"decode_ratio_to_one", r.decode_tps / agg_[0].decode_tps},
                 {"itl_median_s", r.itl_median}});
  }
  out_["aggregate"] = a;
}

// The most streams of --parallel spread over 0 (the base), 1, 4, ... adapters, the counts
// interleaved in each repetition: what a mixed batch costs against one adapter's and the base's.
void ParallelBench::lora_test() {
  Result<std::vector<int32_t>> mix = parse_token_list(f_.lora_mix);
  std::vector<std::string> names;
  for (const LoraSpec& s : f_.eo.loras) names.push_back(s.name);
  const int n = *std::max_element(f_.counts.begin(), f_.counts.end());
  std::vector<std::vector<AggregateRun>> runs(mix->size());
  for (int r = 0; r < f_.reps; ++r) {
    for (size_t k = 0; k < mix->size(); ++k) {
      const std::vector<std::string> use(names.begin(), names.begin() + std::min<size_t>(names.size(), static_cast<size_t>((*mix)[k])));
      runs[k].push_back(aggregate_once(*e_, n, f_.prompt_len, f_.gen, rng_, vocab_, use));
      if (!f_.json) std::fprintf(stderr, "ll3 bench: %d sequences over %zu adapters: %.1f t/s\n", n, use.size(), runs[k].back().tps);
    }
  }
  nlohmann::json a = nlohmann::json::array();
  for (size_t k = 0; k < mix->size(); ++k) {
    std::vector<double> tps, dec, itls;
    for (const AggregateRun& x : runs[k]) {
      tps.push_back(x.tps);
      dec.push_back(x.decode_tps);
      itls.insert(itls.end(), x.itls.begin(), x.itls.end());
    }
    lora_.push_back({(*mix)[k], {n, percentile(tps, 0.5), percentile(dec, 0.5), percentile(itls, 0.5)}});
    a.push_back({{"adapters", (*mix)[k]}, {"sequences", n}, {"tokens_per_s", lora_.back().second.tps},
                 {"decode_tokens_per_s", lora_.back().second.decode_tps}, {"ratio_to_first", lora_.back().second.tps / lora_[0].second.tps}});
  }
  out_["lora"] = a;
}

// Time to first token: cold, then the same prefix plus 4 new tokens.
void ParallelBench::ttft_test() {
  std::vector<int32_t> p = random_tokens(f_.ttft_prompt, rng_, vocab_);
  cold_ = ttft(*e_, greedy(p, 1));
  for (int i = 0; i < 4; ++i) p.push_back(static_cast<int32_t>(rng_() % 128000));
  warm_ = ttft(*e_, greedy(p, 1));
  const double step = decode_step();
  out_["ttft"] = {{"prompt", f_.ttft_prompt}, {"cold_s", cold_}, {"warm_s", warm_}, {"cold_over_warm", cold_ / warm_},
                  {"decode_step_s", step}, {"warm_over_decode_step", step > 0 ? warm_ / step : 0}};
}

// A session's second turn after `history` tokens: with the session, without (a cold prompt),
// and from the session directory in a new engine.
Status ParallelBench::session_test() {
  Request t1 = greedy(random_tokens(f_.history, rng_, vocab_), 8);
  t1.session_id = "bench";
  Result<Engine::Completion> c1 = e_->generate(t1);
  if (!c1.ok()) return c1.status();
  std::vector<int32_t> turn2 = t1.tokens;
  turn2.insert(turn2.end(), c1->tokens.begin(), c1->tokens.end());
  for (int i = 0; i < 8; ++i) turn2.push_back(static_cast<int32_t>(rng_() % 128000));
  Request t2 = greedy(turn2, 1);
  t2.session_id = "bench";
  with_session_ = ttft(*e_, t2);
  e_.reset();  // shutdown saves the session
  EngineOptions cold_opt = f_.eo;
  cold_opt.prefix_cache = false;
  cold_opt.session_dir.clear();
  without_ = ttft(*start_engine(model_, cold_opt), greedy(turn2, 1));
  e_ = start_engine(model_, f_.eo);
  restarted_ = ttft(*e_, t2);
  out_["session"] = {{"history", f_.history},
                     {"with_session_s", with_session_},
                     {"without_s", without_},
                     {"after_restart_s", restarted_},
                     {"speedup", without_ / with_session_},
                     {"speedup_after_restart", without_ / restarted_}};
  return ok_status();
}

// Fairness: n streams decode; their inter-token times are taken for fair_baseline tokens, then a
// long prompt arrives and is prefilled beside them: their inter-token times until its first
// token, against the baseline's, and its time to first token against an idle engine's (another
// prompt of the same length, so that nothing is cached).
Status ParallelBench::fairness_test() {
  if (Result<Engine::Completion> w = e_->generate(greedy(random_tokens(16, rng_, vocab_), 4)); !w.ok()) return w.status();
  fair_.ttft_idle = ttft(*e_, greedy(random_tokens(f_.fair_prompt, rng_, vocab_), 1));
  const int n = f_.fair_streams;
  TimedStreams ts(n);
  for (int i = 0; i < n; ++i) {
    Request q = greedy(random_tokens(f_.prompt_len, rng_, vocab_), -1);
    ts.times[i].reserve(100000);
    q.on_token = [&ts, i](const TokenEvent&) {
      std::lock_guard<std::mutex> lk(ts.mu);
      ts.times[i].push_back(clock_s());
      return true;
    };
    q.on_finish = [&ts, i](const FinishInfo&) { ts.done[i].set_value(); };
    Result<RequestId> id = e_->submit(std::move(q));
    if (!id.ok()) return id.status();
    ts.ids.push_back(id.value());
  }
  // The baseline: from the moment every stream decodes (its 4th token), fair_baseline tokens more
  // of each, within a minute.
  const double t_wait = clock_s();
  while (!ts.all_have(4) && clock_s() - t_wait < 60) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const double t_base = clock_s();
  const size_t want = 4 + static_cast<size_t>(f_.fair_baseline);
  while (!ts.all_have(want) && clock_s() - t_base < 60) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const double t_submit = clock_s();
  const int64_t steps_before = e_->stats().steps;
  Result<Engine::Completion> big = e_->generate(greedy(random_tokens(f_.fair_prompt, rng_, vocab_), 1));
  const double t_first = clock_s();
  const EngineStats st = e_->stats();
  fair_.itl_target = st.itl_target_s;
  fair_.step_cost = st.step_cost;
  fair_.steps = st.steps - steps_before;
  // The streams write into ts from the engine's thread: they end before ts does, whatever happened.
  for (RequestId id : ts.ids) e_->cancel(id);
  for (auto& d : ts.done) d.get_future().wait();
  if (!big.ok()) return big.status();
  fair_.ttft = big->finish.first_token_seconds;
  const std::vector<double> before = ts.gaps(t_base, t_submit);
  fair_.before_p50 = percentile(before, 0.5);
  // Until half an interval after its first token: the streams' tokens of that same step too.
  const std::vector<double> during = ts.gaps(t_submit, t_first + fair_.before_p50 / 2);
  fair_.before_p99 = percentile(before, 0.99);
  fair_.during_p50 = percentile(during, 0.5);
  fair_.during_p99 = percentile(during, 0.99);
  fair_.before_n = before.size();
  fair_.during_n = during.size();
  const Fairness& r = fair_;
  out_["fairness"] = {{"streams", n},
                      {"prompt", f_.fair_prompt},
                      {"itl_before_p50_s", r.before_p50},
                      {"itl_before_p99_s", r.before_p99},
                      {"itl_during_p50_s", r.during_p50},
                      {"itl_during_p99_s", r.during_p99},
                      {"p99_during_over_p50_before", r.before_p50 > 0 ? r.during_p99 / r.before_p50 : 0},
                      {"intervals_before", r.before_n},
                      {"intervals", r.during_n},
                      {"ttft_s", r.ttft},
                      {"ttft_idle_s", r.ttft_idle},
                      {"ttft_over_idle", r.ttft_idle > 0 ? r.ttft / r.ttft_idle : 0},
                      {"itl_target_s", r.itl_target},
                      {"prefill_steps", r.steps},
                      {"step_cost", {{"base_s", r.step_cost[0]}, {"decode_row_s", r.step_cost[1]},
                                     {"prompt_token_s", r.step_cost[2]}, {"attention_pair_s", r.step_cost[3]}}}};
  return ok_status();
}

void ParallelBench::print_text() const {
  std::printf("model %s, %d threads, batch %lld tokens, on %s\n\n", type_.c_str(), f_.eo.threads,
              static_cast<long long>(f_.eo.batch_tokens), where_.c_str());
  if (!lora_.empty()) {
    std::printf("| LoRA adapters | sequences | generated t/s | x first | t/s while all decode | x first |\n|---|---|---|---|---|---|\n");
    for (const auto& [k, r] : lora_) {
      std::printf("| %d | %d | %.1f | %.2f | %.1f | %.2f |\n", k, r.n, r.tps, r.tps / lora_[0].second.tps, r.decode_tps,
                  r.decode_tps / lora_[0].second.decode_tps);
    }
    std::printf("\n");
  }
  if (!agg_.empty()) {
    std::printf("| sequences | generated t/s | x one | t/s while all decode | x one | median inter-token ms |\n"
                "|---|---|---|---|---|---|\n");
    for (const AggregateRow& r : agg_) {
      std::printf("| %d | %.1f | %.2f | %.1f | %.2f | %.1f |\n", r.n, r.tps, r.tps / agg_[0].tps, r.decode_tps,
                  r.decode_tps / agg_[0].decode_tps, r.itl_median * 1e3);
    }
    std::printf("\n(generated t/s: from the first submit to the last token, the %d-token prompts included; "
                "while all decode: from the last stream's first token on, steps of decode rows only)\n\n", f_.prompt_len);
  }
  const double step = decode_step();
  if (cold_ > 0) {
    std::printf("time to first token, %d-token prompt: cold %.3f s, prefix cached %.3f s (%.0fx); one decode step %.3f s "
                "(cached TTFT = %.2f steps)\n", f_.ttft_prompt, cold_, warm_, cold_ / warm_, step,
                step > 0 ? warm_ / step : 0.0);
  }
  if (with_session_ > 0) {
    std::printf("session's second turn after %d tokens: %.3f s with the session, %.3f s without (%.0fx), %.3f s after a "
                "restart (%.0fx)\n", f_.history, with_session_, without_, without_ / with_session_, restarted_,
                without_ / restarted_);
  }
  if (fair_.before_p50 > 0) {
    const Fairness& r = fair_;
    std::printf("fairness: %d streams, inter-token P50 / P99 %.1f / %.1f ms before a %d-token prompt, %.1f / %.1f ms while "
                "it is prefilled (P99 during / P50 before %.2f; target %.1f ms); its time to first token %.2f s, "
                "%.2f s on an idle engine (%.2fx)\n",
                f_.fair_streams, r.before_p50 * 1e3, r.before_p99 * 1e3, f_.fair_prompt, r.during_p50 * 1e3,
                r.during_p99 * 1e3, r.during_p99 / r.before_p50, r.itl_target * 1e3, r.ttft, r.ttft_idle,
                r.ttft_idle > 0 ? r.ttft / r.ttft_idle : 0.0);
    std::printf("  %lld steps; step cost model: %.1f ms + %.2f ms a decode row + %.2f ms a prompt token + %.3f us an "
                "attention pair\n", static_cast<long long>(r.steps), r.step_cost[0] * 1e3, r.step_cost[1] * 1e3,
                r.step_cost[2] * 1e3, r.step_cost[3] * 1e6);
  }
}

}  // namespace

int bench_parallel(int argc, char** argv) {
  ParallelFlags f;
  if (int rc = parse_parallel_flags(argc, argv, f); rc >= 0) return rc;
  Result<LoadedModel> lm = load_model_cli(f.model_path, true, f.ef.load);
  if (!lm.ok()) return fail("bench", lm.message());
  const std::string type = lm->model->file_type_name();
  ParallelBench b(f, make_model(std::move(lm->model), std::move(lm->tokenizer)), type);
  if (f.wants("aggregate")) b.aggregate_test();
  if (!f.lora_mix.empty()) b.lora_test();
  if (f.wants("ttft")) b.ttft_test();
  if (f.wants("session")) {
    if (Status st = b.session_test(); !st.ok()) return fail("bench", st.message());
  }
  if (f.wants("fairness")) {
    if (Status st = b.fairness_test(); !st.ok()) return fail("bench", st.message());
  }
  b.close();
  if (f.json)
    b.print_json();
  else
    b.print_text();
  return 0;
}

}  // namespace ll3::cli
