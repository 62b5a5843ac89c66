// ll3 bench --parallel: the serving engine under concurrent load, in one run so that the figures
// can be compared as ratios on a noisy machine:
//   - aggregate generation tokens/s with 1, 4, 16, 64 ... concurrent sequences;
//   - time to first token of a long prompt, cold and with its prefix cached;
//   - a session's second turn after a long history, with the session, without it, and after a
//     restart from the session directory;
//   - fairness: inter-token latency of running streams while a long prompt is prefilled.
#include <algorithm>
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

// n streams of `prompt_len`-token prompts, `gen` tokens each, submitted together.
AggregateRun aggregate_once(Engine& e, int n, int prompt_len, int gen, std::mt19937& rng, int64_t vocab) {
  std::vector<std::vector<double>> times(static_cast<size_t>(n));  // since t0
  std::vector<std::promise<void>> done(static_cast<size_t>(n));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    Request q = greedy(random_tokens(prompt_len, rng, vocab), gen);
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

}  // namespace

int bench_parallel(int argc, char** argv) {
  std::string model_path, counts = "1,4,16,64", skip;
  int gen = 32, prompt_len = 16, reps = 3, ttft_prompt = 966, history = 2000, fair_prompt = 4096, fair_streams = 8;
  bool json = false, parallel_flag = false;
  EngineFlags ef;
  ArgParser ap("bench", "ll3 bench --parallel [1,4,16,64] [-m MODEL] [-n GEN] [engine flags]",
               "The serving engine under concurrent load: aggregate generation speed, time to first token "
               "with and without a cached prefix, a session's second turn, and fairness during a long prefill.");
  ap.add({"--parallel"}, "LIST", "concurrent sequences to measure (default 1,4,16,64)", [&](const std::string& v) {
    parallel_flag = true;
    counts = v;
    return std::string();
  });
  ap.add_string({"-m", "--model"}, "MODEL", "GGUF file or Hugging Face directory (default: the default model)", &model_path);
  ap.add_int({"-n", "--n-gen"}, "N", "tokens each stream generates (default 32)", &gen);
  ap.add_int({"--prompt-len"}, "N", "prompt tokens of each stream (default 16)", &prompt_len);
  ap.add_int({"-r", "--repetitions"}, "N", "repetitions of each aggregate test; the median is reported (default 3)", &reps);
  ap.add_int({"--ttft-prompt"}, "N", "prompt tokens of the time-to-first-token test (default 966)", &ttft_prompt);
  ap.add_int({"--history"}, "N", "tokens of history before a session's second turn (default 2000)", &history);
  ap.add_int({"--fair-prompt"}, "N", "prompt prefilled during the fairness test (default 4096)", &fair_prompt);
  ap.add_int({"--fair-streams"}, "N", "streams running during the fairness test (default 8)", &fair_streams);
  ap.add_string({"--skip"}, "LIST", "tests to leave out: aggregate, ttft, session, fairness", &skip);
  ap.add_flag({"--json"}, "print the figures as JSON", &json);
  add_engine_flags(ap, &ef, true);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  Result<std::vector<int32_t>> ns = parse_token_list(counts);
  if (!ns.ok() || !parallel_flag) return ap.usage_error("--parallel takes a list of sequence counts like 1,4,16,64");
  if (gen < 2 || prompt_len < 1 || reps < 1 || ttft_prompt < 2 || history < 2 || fair_prompt < 2 || fair_streams < 1) {
    return ap.usage_error("-n must be >= 2, the other sizes >= 1");
  }
  EngineOptions eo;
  if (std::string err = finish_engine_flags(ef, &eo); !err.empty()) return ap.usage_error(err);
  int max_n = 1;
  for (int32_t n : ns.value()) max_n = std::max<int>(max_n, n);
  eo.max_seqs = std::max(max_n, fair_streams + 1);
  eo.max_queue = std::max<int64_t>(eo.max_queue, max_n);
  const std::string session_dir = eo.session_dir.empty()
                                      ? (std::filesystem::temp_directory_path() / ("ll3-bench-sessions-" + std::to_string(getpid()))).string()
                                      : eo.session_dir;
  eo.session_dir = session_dir;
  auto wants = [&](const char* name) { return skip.find(name) == std::string::npos; };

  Result<LoadedModel> lm = load_model_cli(model_path, true, ef.load);
  if (!lm.ok()) return fail("bench", lm.message());
  const std::string type = lm->model->file_type_name();
  std::shared_ptr<const Model> model = make_model(std::move(lm->model), std::move(lm->tokenizer));
  const int64_t vocab = model->n_vocab();
  auto engine = [&](const EngineOptions& o) {
    Result<std::unique_ptr<Engine>> e = Engine::create(model, o);
    if (!e.ok()) {
      std::fprintf(stderr, "ll3 bench: %s\n", e.message().c_str());
      std::exit(1);
    }
    return std::move(e.value());
  };
  std::mt19937 rng(7);
  nlohmann::json out = {{"model_type", type}, {"threads", eo.threads}, {"batch_tokens", eo.batch_tokens}};
  std::unique_ptr<Engine> e = engine(eo);
  const std::string where = e->where();
  out["runs_on"] = where;

  // Aggregate generation speed.
  std::vector<AggregateRow> agg;
  if (wants("aggregate")) {
    aggregate_once(*e, 1, prompt_len, gen, rng, vocab);  // warm-up
    agg = aggregate(*e, ns.value(), prompt_len, gen, reps, rng, vocab, json);
    nlohmann::json a = nlohmann::json::array();
    for (const AggregateRow& r : agg) {
      a.push_back({{"sequences", r.n}, {"tokens_per_s", r.tps}, {"ratio_to_one", r.tps / agg[0].tps},
                   {"decode_tokens_per_s", r.decode_tps}, {"decode_ratio_to_one", r.decode_tps / agg[0].decode_tps},
                   {"itl_median_s", r.itl_median}});
    }
    out["aggregate"] = a;
  }
  const double decode_step = !agg.empty() && agg[0].n == 1 ? agg[0].itl_median : 0;

  // Time to first token: cold, then the same prefix plus 4 new tokens.
  double cold = 0, warm = 0;
  if (wants("ttft")) {
    std::vector<int32_t> p = random_tokens(ttft_prompt, rng, vocab);
    cold = ttft(*e, greedy(p, 1));
    for (int i = 0; i < 4; ++i) p.push_back(static_cast<int32_t>(rng() % 128000));
    warm = ttft(*e, greedy(p, 1));
    out["ttft"] = {{"prompt", ttft_prompt}, {"cold_s", cold}, {"warm_s", warm}, {"cold_over_warm", cold / warm},
                   {"decode_step_s", decode_step}, {"warm_over_decode_step", decode_step > 0 ? warm / decode_step : 0}};
  }

  // A session's second turn after `history` tokens: with the session, without (a cold prompt),
  // and from the session directory in a new engine.
  double with_session = 0, without = 0, restarted = 0;
  if (wants("session")) {
    Request t1 = greedy(random_tokens(history, rng, vocab), 8);
    t1.session_id = "bench";
    Result<Engine::Completion> c1 = e->generate(t1);
    if (!c1.ok()) return fail("bench", c1.message());
    std::vector<int32_t> turn2 = t1.tokens;
    turn2.insert(turn2.end(), c1->tokens.begin(), c1->tokens.end());
    for (int i = 0; i < 8; ++i) turn2.push_back(static_cast<int32_t>(rng() % 128000));
    Request t2 = greedy(turn2, 1);
    t2.session_id = "bench";
    with_session = ttft(*e, t2);
    e.reset();  // shutdown saves the session
    EngineOptions cold_opt = eo;
    cold_opt.prefix_cache = false;
    cold_opt.session_dir.clear();
    without = ttft(*engine(cold_opt), greedy(turn2, 1));
    e = engine(eo);
    restarted = ttft(*e, t2);
    out["session"] = {{"history", history},
                      {"with_session_s", with_session},
                      {"without_s", without},
                      {"after_restart_s", restarted},
                      {"speedup", without / with_session},
                      {"speedup_after_restart", without / restarted}};
  }

  // Fairness: streams decoding while a long prompt is prefilled in chunks.
  double itl_p50 = 0, itl_p99 = 0;
  if (wants("fairness")) {
    std::mutex mu;
    std::vector<std::vector<double>> times(static_cast<size_t>(fair_streams));
    std::vector<RequestId> ids;
    std::vector<std::promise<void>> done(static_cast<size_t>(fair_streams));
    std::atomic<int> started{0};
    for (int i = 0; i < fair_streams; ++i) {
      Request q = greedy(random_tokens(prompt_len, rng, vocab), -1);
      times[i].reserve(100000);
      q.on_token = [&, i](const TokenEvent& ev) {
        std::lock_guard<std::mutex> lk(mu);
        times[i].push_back(ev.seconds);
        if (ev.index == 3) ++started;
        return true;
      };
      q.on_finish = [&done, i](const FinishInfo&) { done[i].set_value(); };
      ids.push_back(e->submit(std::move(q)).value());
    }
    while (started < fair_streams) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::vector<size_t> from(static_cast<size_t>(fair_streams));
    {
      std::lock_guard<std::mutex> lk(mu);
      for (int i = 0; i < fair_streams; ++i) from[i] = times[i].size();
    }
    Result<Engine::Completion> big = e->generate(greedy(random_tokens(fair_prompt, rng, vocab), 1));
    if (!big.ok()) return fail("bench", big.message());
    std::vector<size_t> to(static_cast<size_t>(fair_streams));
    {
      std::lock_guard<std::mutex> lk(mu);
      for (int i = 0; i < fair_streams; ++i) to[i] = times[i].size();
    }
    for (RequestId id : ids) e->cancel(id);
    for (auto& d : done) d.get_future().wait();
    std::vector<double> itl;
    for (int i = 0; i < fair_streams; ++i) {
      for (size_t k = std::max<size_t>(from[i], 1); k < to[i]; ++k) itl.push_back(times[i][k] - times[i][k - 1]);
    }
    itl_p50 = percentile(itl, 0.5);
    itl_p99 = percentile(itl, 0.99);
    out["fairness"] = {{"streams", fair_streams}, {"prompt", fair_prompt}, {"prefill_s", big->finish.first_token_seconds},
                       {"itl_p50_s", itl_p50}, {"itl_p99_s", itl_p99}, {"p99_over_p50", itl_p50 > 0 ? itl_p99 / itl_p50 : 0},
                       {"intervals", itl.size()}};
  }
  e.reset();
  std::error_code ec;
  if (ef.session_dir.empty()) std::filesystem::remove_all(session_dir, ec);

  if (json) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("model %s, %d threads, batch %lld tokens, on %s\n\n", type.c_str(), eo.threads,
              static_cast<long long>(eo.batch_tokens), where.c_str());
  if (!agg.empty()) {
    std::printf("| sequences | generated t/s | x one | t/s while all decode | x one | median inter-token ms |\n"
                "|---|---|---|---|---|---|\n");
    for (const AggregateRow& r : agg) {
      std::printf("| %d | %.1f | %.2f | %.1f | %.2f | %.1f |\n", r.n, r.tps, r.tps / agg[0].tps, r.decode_tps,
                  r.decode_tps / agg[0].decode_tps, r.itl_median * 1e3);
    }
    std::printf("\n(generated t/s: from the first submit to the last token, the %d-token prompts included; "
                "while all decode: from the last stream's first token on, steps of decode rows only)\n\n", prompt_len);
  }
  if (cold > 0) {
    std::printf("time to first token, %d-token prompt: cold %.3f s, prefix cached %.3f s (%.0fx); one decode step %.3f s "
                "(cached TTFT = %.2f steps)\n", ttft_prompt, cold, warm, cold / warm, decode_step,
                decode_step > 0 ? warm / decode_step : 0.0);
  }
  if (with_session > 0) {
    std::printf("session's second turn after %d tokens: %.3f s with the session, %.3f s without (%.0fx), %.3f s after a "
                "restart (%.0fx)\n", history, with_session, without, without / with_session, restarted, without / restarted);
  }
  if (itl_p50 > 0) {
    std::printf("fairness: %d streams during a %d-token prefill: inter-token P50 %.1f ms, P99 %.1f ms (P99/P50 %.2f)\n",
                fair_streams, fair_prompt, itl_p50 * 1e3, itl_p99 * 1e3, itl_p99 / itl_p50);
  }
  return 0;
}

}  // namespace ll3::cli
