// ll3 bench: prompt processing (pp) and generation (tg) speed, llama-bench style, with the
// decode figure set against the machine's measured memory bandwidth (the decode roofline: a
// token reads the weights and, at depth, the K and V of every cached position).
// Several -m models are measured in one run, their repetitions taken in turns, with each one's
// speed against the first's.
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "bench_parallel.h"
#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "engine/sampler.h"
#include "eval/sequence_evaluator.h"
#include "kernels/stream_read.h"

namespace ll3::cli {

namespace {

struct Stats {
  double mean = 0, stddev = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Stats stats(const std::vector<double>& v) {
  Stats s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.stddev += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(s.stddev / static_cast<double>(v.size() - 1)) : 0.0;
  return s;
}

std::string roofline_cache_path(int threads) {
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "/tmp") + "/.cache/ll3/roofline-v2-t" + std::to_string(threads) + ".txt";
}

// Reads of the memory bandwidth (GB/s) and the roofline taken from them: the best, so that it is
// an upper bound of what a decode can stream (a read taken at a bad moment, the median of a few
// included, had put one 8B decode at 102% of it), with the spread reported beside it.
struct BandwidthReads {
  double best = 0, median = 0, worst = 0;
  int reads = 0;
  std::vector<double> all;  // every read, for the median of a run's reads
  void add(const BandwidthReads& o) {
    best = std::max(best, o.best);
    worst = reads == 0 ? o.worst : std::min(worst, o.worst);
    reads += o.reads;
    all.insert(all.end(), o.all.begin(), o.all.end());
    median = cli::median(all);  // the member hides the function
  }
};

// Read bandwidth of a 1 GiB buffer (far larger than any cache) in two patterns, each without
// software prefetch and with it at each distance of kernels::kStreamReadAheads: every thread
// streams its own contiguous slice, or the threads take 1 MiB stripes in turn.
class BandwidthProbe {
 public:
  explicit BandwidthProbe(int threads) : pool_(threads) {
    mem_ = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem_ == MAP_FAILED) {
      mem_ = nullptr;
      return;
    }
    madvise(mem_, kBytes, MADV_HUGEPAGE);
    uint8_t* buf = static_cast<uint8_t*>(mem_);
    for (size_t i = 0; i < kBytes; i += 4096) buf[i] = static_cast<uint8_t>(i >> 12);
  }
  ~BandwidthProbe() {
    if (mem_ != nullptr) munmap(mem_, kBytes);
  }
  BandwidthProbe(const BandwidthProbe&) = delete;
  BandwidthProbe& operator=(const BandwidthProbe&) = delete;

  // `passes` reads of each pattern and prefetch distance.
  BandwidthReads measure(int passes) {
    BandwidthReads r;
    if (mem_ == nullptr) return r;
    const uint8_t* buf = static_cast<const uint8_t*>(mem_);
    std::vector<double> gbps;
    volatile uint64_t sink = 0;
    const int64_t nt = pool_.size();
    constexpr size_t kStripe = size_t{1} << 20;
    for (int pass = 0; pass < passes; ++pass) {
      for (int pattern = 0; pattern < 2 * kAheads; ++pattern) {
        const size_t ahead = kernels::kStreamReadAheads[pattern % kAheads];
        const double t0 = now_seconds();
        if (pattern < kAheads) {
          pool_.parallel_for(static_cast<int64_t>(kBytes / 256), [&](int64_t b, int64_t e, int) {
            sink = sink + kernels::stream_read(buf + b * 256, static_cast<size_t>(e - b) * 256, ahead);
          });
        } else {
          pool_.parallel_for(nt, [&](int64_t b, int64_t e, int) {
            for (int64_t t = b; t < e; ++t) {
              for (size_t off = static_cast<size_t>(t) * kStripe; off < kBytes; off += static_cast<size_t>(nt) * kStripe) {
                sink = sink + kernels::stream_read(buf + off, kStripe, ahead);
              }
            }
          });
        }
        gbps.push_back(static_cast<double>(kBytes) / (now_seconds() - t0) / 1e9);
      }
    }
    r.best = *std::max_element(gbps.begin(), gbps.end());
    r.worst = *std::min_element(gbps.begin(), gbps.end());
    r.median = median(gbps);
    r.reads = static_cast<int>(gbps.size());
    r.all = gbps;
    return r;
  }

 private:
  static constexpr size_t kBytes = size_t{1} << 30;
  static constexpr int kAheads = static_cast<int>(std::size(kernels::kStreamReadAheads));
  ThreadPool pool_;
  void* mem_ = nullptr;
};

void save_bandwidth(int threads, double gbps) {
  const std::string path = roofline_cache_path(threads);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream(path) << gbps << "\n";
}

// The cached roofline for this thread count (reads = 0), measured when absent (or when
// `remeasure`): the best of 4 reads of each pattern.
BandwidthReads bandwidth(int threads, bool remeasure) {
  BandwidthReads r;
  if (!remeasure) {
    std::ifstream f(roofline_cache_path(threads));
    double v = 0;
    if (f >> v && v > 0) {
      r.best = r.median = r.worst = v;
      return r;
    }
  }
  r = BandwidthProbe(threads).measure(4);
  save_bandwidth(threads, r.best);
  return r;
}

// The flags of ll3 bench, parsed and checked.
struct BenchFlags {
  std::vector<std::string> model_paths;  // -m, repeatable; empty: the default model
  std::vector<std::string> loras;        // --lora: each a row of its own beside the first model
  std::vector<int32_t> prompts, gens, depths;  // -p, -n, -d
  DType kv_type = DType::F16;
  int threads = 0, reps = 5;
  bool json = false, roofline = false, amx_bf16 = false;
  LoadFlags load;
};

// Returns -1 to go on, else the exit code (after --help or a usage error).
int parse_bench_flags(int argc, char** argv, BenchFlags& f) {
  std::string kv_type = "f16";
  std::string prompts = "128", gens = "32", depths = "0";
  ArgParser ap("bench", "ll3 bench -m MODEL [-m MODEL2 ...] [-p 128] [-n 32] [-d DEPTH] [-t THREADS] [-r REPS] [--json] | ll3 bench --roofline",
               "Measure prompt processing (pp) and generation (tg) speed, like llama-bench. -p, -n and -d take "
               "comma-separated lists (-p 128,512 -n 32,128 -d 0,4096): a pp test per prompt size and a tg test per "
               "generation length, at every depth.");
  ap.add({"-m", "--model"}, "MODEL",
         "GGUF file or Hugging Face directory (default: the default model); repeat it to compare models in one run",
         [&f](const std::string& v) {
           f.model_paths.push_back(v);
           return std::string();
         });
  ap.add({"--lora"}, "[NAME=]PATH[:SCALE]",
         "also measure the first model with this LoRA adapter (repeatable): each adapter a row against the base", [&f](const std::string& v) {
           f.loras.push_back(v);
           return std::string();
         });
  ap.add_string({"-p", "--n-prompt"}, "N[,N...]", "prompt tokens of the pp test; 0 skips it (default 128)", &prompts);
  ap.add_string({"-n", "--n-gen"}, "N[,N...]", "tokens generated one by one in the tg test; 0 skips it (default 32)",
                &gens);
  ap.add_string({"-d", "--n-depth"}, "N[,N...]", "tokens already in the cache when each test starts (untimed; default 0)",
                &depths);
  ap.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", &f.threads);
  ap.add_int({"-r", "--repetitions"}, "N", "repetitions of each test after a warm-up (default 5)", &f.reps);
  ap.add_string({"--kv-type"}, "TYPE", "KV cache type: f32, f16, q8_0 or q4_0 (default f16)", &kv_type);
  ap.add_flag({"--json"}, "print a JSON array, one object per test (llama-bench's keys)", &f.json);
  add_amx_flag(ap, &f.amx_bf16);
  add_load_flags(ap, &f.load);
  ap.add_flag({"--roofline"},
              "measure the memory read bandwidth again (cached in ~/.cache/ll3); with -m, before every tg "
              "repetition, and the percentage is the median of the paired ratios",
              &f.roofline);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  Result<std::vector<int32_t>> pl = parse_token_list(prompts), gl = parse_token_list(gens), dl = parse_token_list(depths);
  // Token counts: at most 2^24 each, so that depth + prompt stays an int (the model's context
  // refuses far less).
  auto counts_ok = [](const Result<std::vector<int32_t>>& l) {
    return l.ok() && !l->empty() && std::all_of(l->begin(), l->end(), [](int32_t v) { return v >= 0 && v <= (1 << 24); });
  };
  if (!counts_ok(pl) || !counts_ok(gl) || !counts_ok(dl) || f.reps < 1) {
    return ap.usage_error("-p, -n and -d take token counts of 0 to 16777216 (or comma-separated lists of them) and -r a number >= 1");
  }
  Result<DType> kvt = parse_kv_type(kv_type);
  if (!kvt.ok()) return ap.usage_error(kvt.message());
  f.prompts = *pl;
  f.gens = *gl;
  f.depths = *dl;
  f.kv_type = kvt.value();
  if (f.threads <= 0) f.threads = default_thread_count();
  return -1;
}

// ll3 bench --roofline without a model: the bandwidth alone.
void print_roofline(const BandwidthReads& bw, int threads, bool json) {
  if (json) {
    std::printf("[{\"test\": \"roofline\", \"threads\": %d, \"read_gbps\": %.2f, \"read_gbps_median\": %.2f, "
                "\"read_gbps_min\": %.2f, \"reads\": %d}]\n",
                threads, bw.best, bw.median, bw.worst, bw.reads);
  } else {
    std::printf("memory read bandwidth, %d threads: %.2f GB/s (best of %d reads in 6 patterns; median %.2f, min %.2f)\n",
                threads, bw.best, bw.reads, bw.median, bw.worst);
  }
}

// Runs pp and tg tests on one evaluator. The prompt of each pp test and the cache contents at each
// depth are prefixes of one random text.
class BenchRunner {
 public:
  BenchRunner(SequenceEvaluator& s, int64_t n_vocab, int32_t max_prompt, int32_t max_depth)
      : s_(s), n_vocab_(n_vocab), prompt_text_(static_cast<size_t>(max_prompt)),
        depth_text_(static_cast<size_t>(max_depth)) {
    for (int32_t& t : prompt_text_) t = random_token();
    for (int32_t& t : depth_text_) t = random_token();
  }

  // Prompt tokens per second of one prompt of n_prompt tokens after `depth` cached ones.
  double run_pp(int n_prompt, int depth) {
    reset(depth);
    const double t0 = now_seconds();
    eval(std::span<const int32_t>(prompt_text_.data(), static_cast<size_t>(n_prompt)));
    return n_prompt / (now_seconds() - t0);
  }

  // Tokens per second of n_gen tokens decoded one by one after `depth` cached ones.
  double run_tg(int n_gen, int depth) {
    reset(depth);
    int32_t tok = random_token();
    const double t0 = now_seconds();
    for (int i = 0; i < n_gen; ++i) {
      eval(std::span<const int32_t>(&tok, 1));
      tok = argmax(s_.last_logits(), static_cast<int32_t>(n_vocab_));  // greedy, as the engine samples it
    }
    return n_gen / (now_seconds() - t0);
  }

 private:
  int32_t random_token() { return static_cast<int32_t>(rng_() % static_cast<uint32_t>(n_vocab_)); }

  // A failed step ends the benchmark (its figures would mean nothing).
  void eval(std::span<const int32_t> tokens) {
    if (Status st = s_.eval(tokens); !st.ok()) {
      std::fprintf(stderr, "ll3 bench: %s\n", st.message().c_str());
      std::exit(1);
    }
  }

  // Leaves the cache holding the first `depth` tokens of one random text (not timed): what it
  // already holds of them is kept (truncated back to), the rest evaluated. A depth of 32k is
  // then filled once for all the tests and repetitions at it, and 32k after 8k adds 24k.
  void reset(int depth) {
    const int kept = std::min(filled_, depth);
    s_.truncate(kept);
    if (depth > kept) eval(std::span<const int32_t>(depth_text_.data() + kept, static_cast<size_t>(depth - kept)));
    filled_ = depth;
  }

  SequenceEvaluator& s_;
  const int64_t n_vocab_;
  std::mt19937 rng_{1};
  std::vector<int32_t> prompt_text_, depth_text_;
  int filled_ = 0;  // the cache's first filled_ positions hold depth_text_'s first tokens
};

struct Row {
  std::string test;
  int n_prompt, n_gen, n_depth;
  Stats ts;
  double gbps = 0, bw_pct = 0, paired_pct = 0;
  size_t model = 0;    // index into the -m models
  double ratio = 1.0;  // against the first model: the median of the rounds' ratios
};

// The rows of one test, a row per model, from v[model][repetition] (tokens/s): repetition r of
// every model ran in the same round, so each round's ratio to the first model pairs figures
// taken minutes apart at most, and the median of those ratios is what the host's swings touch least.
std::vector<Row> rows_of(const Row& proto, const std::vector<std::vector<double>>& v) {
  std::vector<Row> rows;
  for (size_t m = 0; m < v.size(); ++m) {
    Row row = proto;
    row.model = m;
    row.ts = stats(v[m]);
    std::vector<double> ratios;
    for (size_t r = 0; r < v[m].size(); ++r) ratios.push_back(v[m][r] / v[0][r]);
    row.ratio = median(ratios);
    rows.push_back(row);
  }
  return rows;
}

// The decode roofline: the cached figure, or with --roofline the best of reads taken right
// before and after each tg repetition (the machine's bandwidth moves with its neighbours'
// load; reads taken beside the decode bound it better than one from another time).
struct Roofline {
  BandwidthReads bw;
  std::unique_ptr<BandwidthProbe> probe;  // with --roofline
  int threads = 0;
};

// Between two models' repetitions: the last one's pool workers spin a few milliseconds after
// their last job; let them go to sleep so that they do not share the cores with the next.
void settle(size_t n_models) {
  if (n_models > 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

// The bytes a decode step of one model reads.
struct TokenBytes {
  double weights;          // and an adapter's
  double kv_per_position;  // K and V of every layer
};

// A pp test: a warm-up of every model, then the timed repetitions in rounds (each model once).
std::vector<Row> measure_pp(const std::vector<BenchRunner*>& bs, int32_t p, int32_t d, int reps,
                            const std::string& at_depth) {
  for (BenchRunner* b : bs) b->run_pp(p, d);  // warm-up
  std::vector<std::vector<double>> v(bs.size());
  for (int r = 0; r < reps; ++r) {
    for (size_t m = 0; m < bs.size(); ++m) {
      settle(bs.size());
      v[m].push_back(bs[m]->run_pp(p, d));
    }
  }
  return rows_of({"pp" + std::to_string(p) + at_depth, p, 0, d, {}}, v);
}

// The tg row's shares of the read bandwidth, from v[r] (tokens/s of repetition r) and, with a
// probe, around[r] (the best reads right before and right after it).
// The median repetition against the best read of the run: an upper bound that a lucky
// read cannot beat, and the decode's own noise stays out of it.
// Paired: each repetition against the better of the reads on either side of it, the
// median of those shares. A host whose bandwidth moves with its neighbours' load (one Zen 4
// VM read 30 GB/s in one minute and 54 in the next) puts a decode taken in a slow minute
// against the read of a fast one in bw_pct; here it meets the reads of its own minute.
// Both from the same figure per repetition, so that the paired share is never below the
// other, not even by a rounding (a median of two ratios and the ratio of a median had
// differed in the last bit where the best read was beside both repetitions).
void set_bandwidth_shares(Row& row, const std::vector<double>& v, const std::vector<std::pair<double, double>>& around,
                          double bytes, const Roofline& rl) {
  std::vector<double> share, paired;
  for (size_t r = 0; r < v.size(); ++r) {
    const double gbps100 = 100.0 * v[r] * bytes / 1e9;  // the repetition's GB/s, x 100
    if (rl.bw.best > 0) share.push_back(gbps100 / rl.bw.best);
    if (rl.probe) paired.push_back(gbps100 / std::max(around[r].first, around[r].second));
  }
  row.bw_pct = median(share);
  if (rl.probe) row.paired_pct = median(paired);
}

// A tg test: a warm-up of every model, then the timed repetitions in rounds, with a probe's
// reads between any two. A token of model m reads its weights (bytes[m].weights) and the KV of
// every cached position (bytes[m].kv_per_position each): on average d + (g + 1) / 2 of them.
std::vector<Row> measure_tg(const std::vector<BenchRunner*>& bs, int32_t g, int32_t d, int reps,
                            const std::string& at_depth, const std::vector<TokenBytes>& token_bytes, Roofline& rl) {
  std::vector<double> bytes;
  for (const TokenBytes& b : token_bytes) bytes.push_back(b.weights + b.kv_per_position * (d + (g + 1) / 2.0));
  for (BenchRunner* b : bs) b->run_tg(g, d);
  const size_t nm = bs.size();
  std::vector<std::vector<double>> v(nm);
  std::vector<std::vector<std::pair<double, double>>> around(nm);
  double last_read = 0;
  auto probe_read = [&] {
    // Each pool's workers spin a few milliseconds after their last job: let them go to
    // sleep so that the probe and the decode do not share the cores.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const BandwidthReads r = rl.probe->measure(1);
    rl.bw.add(r);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return r.best;
  };
  if (rl.probe) last_read = probe_read();
  for (int r = 0; r < reps; ++r) {
    for (size_t m = 0; m < nm; ++m) {
      if (!rl.probe) settle(nm);  // the probe's reads sleep around themselves
      v[m].push_back(bs[m]->run_tg(g, d));
      if (!rl.probe) continue;
      const double before = last_read;
      last_read = probe_read();
      around[m].emplace_back(before, last_read);
    }
  }
  std::vector<Row> rows = rows_of({"tg" + std::to_string(g) + at_depth, 0, g, d, {}}, v);
  for (Row& row : rows) {
    row.gbps = row.ts.mean * bytes[row.model] / 1e9;
    set_bandwidth_shares(row, v[row.model], around[row.model], bytes[row.model], rl);
  }
  if (rl.probe) save_bandwidth(rl.threads, rl.bw.best);
  return rows;
}

// Every pp and tg test at every depth, in llama-bench's order, each on every model.
std::vector<Row> run_tests(const std::vector<BenchRunner*>& bs, const BenchFlags& f,
                           const std::vector<TokenBytes>& bytes, Roofline& rl) {
  std::vector<Row> rows;
  auto add = [&rows](std::vector<Row> more) { rows.insert(rows.end(), more.begin(), more.end()); };
  for (int32_t d : f.depths) {
    const std::string at_depth = d > 0 ? " @ d" + std::to_string(d) : "";  // llama-bench's naming
    for (int32_t p : f.prompts) {
      if (p != 0) add(measure_pp(bs, p, d, f.reps, at_depth));
    }
    for (int32_t g : f.gens) {
      if (g != 0) add(measure_tg(bs, g, d, f.reps, at_depth, bytes, rl));
    }
  }
  return rows;
}

void print_json(const std::vector<Row>& rows, const std::vector<const LlamaModel*>& models, const std::vector<std::string>& labels,
                int threads, const BandwidthReads& bw, bool roofline) {
  nlohmann::json out = nlohmann::json::array();
  for (const Row& r : rows) {
    const LlamaModel& m = *models[r.model];
    nlohmann::json o = {{"test", r.test},         {"n_prompt", r.n_prompt},   {"n_gen", r.n_gen}, {"n_depth", r.n_depth},
                        {"threads", threads},      {"avg_ts", r.ts.mean},      {"stddev_ts", r.ts.stddev},
                        {"model_type", m.file_type_name()}, {"model_bytes", m.weight_bytes()}, {"model_filename", m.path},
                        {"model", labels[r.model]}};
    if (models.size() > 1) o["ratio_to_first"] = r.ratio;
    if (r.n_gen > 0) {
      o["token_gbps"] = r.gbps;  // the weights and the KV a token reads, per second
      o["read_bandwidth_gbps"] = bw.best;
      o["read_bandwidth_min_gbps"] = bw.worst;
      if (roofline) o["read_bandwidth_median_gbps"] = bw.median;
      o["bandwidth_reads"] = bw.reads;
      o["bandwidth_paired"] = roofline;  // measured around each repetition, not the cached figure
      o["bandwidth_pct"] = r.bw_pct;
      if (roofline) o["bandwidth_paired_pct"] = r.paired_pct;
    }
    out.push_back(o);
  }
  std::printf("%s\n", out.dump(2).c_str());
}

void print_table(const std::vector<Row>& rows, const std::vector<const LlamaModel*>& models, const std::vector<std::string>& labels,
                 int threads, const BandwidthReads& bw, bool roofline) {
  const bool several = models.size() > 1;
  std::printf("| model | size | threads | test | t/s |%s GB/s (weights + KV) | %% of read bandwidth |\n",
              several ? " against the first |" : "");
  std::printf("|---|---|---|---|---|%s---|---|\n", several ? "---|" : "");
  for (const Row& r : rows) {
    const LlamaModel& m = *models[r.model];
    const std::string ratio = !several ? "" : r.model == 0 ? " |" : strprintf(" %.2fx |", r.ratio);
    std::printf("| %s | %.2f GiB | %d | %s | %.2f ± %.2f |%s %s | %s |\n", labels[r.model].c_str(),
                m.weight_bytes() / 1073741824.0, threads, r.test.c_str(), r.ts.mean, r.ts.stddev, ratio.c_str(),
                r.n_gen ? strprintf("%.1f", r.gbps).c_str() : "",
                !r.n_gen ? ""
                : roofline
                    ? strprintf("%.0f%% paired, %.0f%% of the best %.1f (reads %.1f-%.1f, median %.1f)", r.paired_pct,
                                r.bw_pct, bw.best, bw.worst, bw.best, bw.median).c_str()
                    : strprintf("%.0f%% of %.1f (cached)", r.bw_pct, bw.best).c_str());
  }
}

// One -m model and what runs it.
struct BenchModel {
  LoadedModel loaded;
  std::string label;                        // the table's model column
  const LlamaModel* model = nullptr;        // loaded's, or the first model's (an adapter row)
  std::unique_ptr<LoraAdapter> adapter;     // --lora rows
  LoraSet lora;
  std::unique_ptr<SequenceEvaluator> evaluator;
  std::unique_ptr<BenchRunner> runner;
};

int cmd_bench(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--parallel") return bench_parallel(argc, argv);
    if (std::string(argv[i]) == "--speculation") return bench_spec(argc, argv);
  }
  BenchFlags f;
  if (int rc = parse_bench_flags(argc, argv, f); rc >= 0) return rc;
  if (f.roofline && f.model_paths.empty()) {
    print_roofline(bandwidth(f.threads, true), f.threads, f.json);
    return 0;
  }
  if (f.model_paths.empty()) f.model_paths.push_back("");  // the default model

  const int32_t max_prompt = *std::max_element(f.prompts.begin(), f.prompts.end());
  const int32_t max_gen = *std::max_element(f.gens.begin(), f.gens.end());
  const int32_t max_depth = *std::max_element(f.depths.begin(), f.depths.end());
  EvaluatorOptions so;
  so.threads = f.threads;
  so.amx_prompts = f.amx_bf16;
  so.kv_type = f.kv_type;
  so.context = max_depth + std::max(max_prompt, max_gen) + 16;
  so.batch = std::max({1, max_prompt, std::min(max_depth, 512)});
  std::vector<BenchModel> models(f.model_paths.size() + f.loras.size());
  std::vector<BenchRunner*> runners;
  std::vector<const LlamaModel*> loaded;
  std::vector<std::string> labels;
  std::vector<TokenBytes> bytes;
  for (size_t i = 0; i < models.size(); ++i) {
    BenchModel& b = models[i];
    EvaluatorOptions o = so;
    if (i < f.model_paths.size()) {
      Result<LoadedModel> lm = load_model_cli(f.model_paths[i], false, f.load);
      if (!lm.ok()) return fail("bench", lm.message());
      b.loaded = std::move(lm.value());
      b.model = b.loaded.model.get();
      b.label = b.model->file_type_name();
    } else {  // the first model with an adapter
      Result<LoraSpec> spec = parse_lora_flag(f.loras[i - f.model_paths.size()]);
      if (!spec.ok()) return fail("bench", spec.message());
      b.model = models[0].model;
      Result<std::unique_ptr<LoraAdapter>> ad = load_lora(spec->path, *b.model);
      if (!ad.ok()) return fail("bench", ad.message());
      b.adapter = std::move(ad.value());
      b.lora.uses = {{b.adapter.get(), spec->scale}};
      o.lora = &b.lora;
      b.label = strprintf("%s + LoRA %s (rank %lld)", models[0].label.c_str(), spec->name.c_str(), static_cast<long long>(b.adapter->max_rank));
    }
    const LlamaModel& m = *b.model;
    Result<std::unique_ptr<SequenceEvaluator>> evaluator = SequenceEvaluator::create(m, o);
    if (!evaluator.ok()) return fail("bench", evaluator.message());
    b.evaluator = std::move(evaluator.value());
    // The same seed, so models of one vocabulary get the same prompt and cache tokens.
    b.runner = std::make_unique<BenchRunner>(*b.evaluator, m.config.n_vocab, max_prompt, max_depth);
    runners.push_back(b.runner.get());
    loaded.push_back(&m);
    labels.push_back(b.label);
    // An adapter's A and B are read by every decode step too.
    const size_t kv_row = dtype_row_bytes(f.kv_type, m.config.n_kv_heads * m.config.head_dim);
    bytes.push_back({static_cast<double>(m.bytes_per_token() + (b.adapter ? b.adapter->bytes() : 0)),
                     static_cast<double>(2 * m.config.n_layers * kv_row)});
  }

  Roofline rl;
  rl.threads = f.threads;
  if (max_gen > 0 && !f.roofline) rl.bw = bandwidth(f.threads, false);
  if (max_gen > 0 && f.roofline) rl.probe = std::make_unique<BandwidthProbe>(f.threads);
  const std::vector<Row> rows = run_tests(runners, f, bytes, rl);
  if (f.json)
    print_json(rows, loaded, labels, f.threads, rl.bw, f.roofline);
  else
    print_table(rows, loaded, labels, f.threads, rl.bw, f.roofline);
  return 0;
}

}  // namespace

LL3_COMMAND("bench", "measure prompt and generation speed (and the bandwidth roofline)", cmd_bench);

}  // namespace ll3::cli
