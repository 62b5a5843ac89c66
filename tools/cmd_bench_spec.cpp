// ll3 bench --speculation: decode speed with and without speculative decoding, in one run on one
// prompt, so that the ratio holds on a noisy machine: every round runs each mode (no guessing,
// n-gram lookup, a draft model when one is given) in a rotating order, and the figures are
// medians. The tokens of every mode must be those without speculation (greedy).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>

#include "bench_parallel.h"
#include "cli_common.h"
#include "engine/model_impl.h"

namespace ll3::cli {

namespace {

struct SpecFlags {
  std::string model_path, prompt, prompt_file;
  long long gen = 256, reps = 3;
  std::string streams = "1";
  bool json = false;
  EngineFlags ef;
  EngineOptions eo;
};

struct Mode {
  const char* name;
  SpecMode spec;
};

// One run of `n` streams of the same prompt: the tokens of stream 0, and the decode rate (tokens
// after each stream's first, over the time from the first of those to the last token).
struct RunResult {
  std::vector<int32_t> tokens;
  double tps = 0;
};

RunResult run_streams(Engine& e, const std::vector<int32_t>& prompt, int n, int64_t gen) {
  using clock = std::chrono::steady_clock;
  std::vector<std::vector<double>> times(static_cast<size_t>(n));
  std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(n));
  std::vector<std::promise<void>> done(static_cast<size_t>(n));
  const auto t0 = clock::now();
  for (int i = 0; i < n; ++i) {
    Request r;
    r.tokens = prompt;
    r.max_tokens = gen;
    r.sampling.temperature = 0;
    r.ignore_eos = true;
    r.on_token = [&, i](const TokenEvent& ev) {
      times[i].push_back(std::chrono::duration<double>(clock::now() - t0).count());
      tokens[i].push_back(ev.token);
      return true;
    };
    r.on_finish = [&, i](const FinishInfo& f) {
      if (f.reason == FinishReason::kError) std::fprintf(stderr, "ll3 bench: %s\n", f.error.c_str());
      done[i].set_value();
    };
    if (Result<RequestId> id = e.submit(std::move(r)); !id.ok()) {
      std::fprintf(stderr, "ll3 bench: %s\n", id.message().c_str());
      std::exit(1);
    }
  }
  for (auto& d : done) d.get_future().wait();
  double first = 1e30, last = 0;
  int64_t count = 0;
  for (const std::vector<double>& t : times) {
    if (t.size() < 2) continue;
    first = std::min(first, t.front());
    last = std::max(last, t.back());
    count += static_cast<int64_t>(t.size()) - 1;
  }
  RunResult r;
  r.tokens = tokens[0];
  r.tps = last > first ? static_cast<double>(count) / (last - first) : 0;
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int bench_spec(int argc, char** argv) {
  SpecFlags f;
  bool flag = false;
  ArgParser ap("bench", "ll3 bench --speculation [-m MODEL] (-p TEXT | -f FILE) [--draft MODEL] [-n N] [-r R] [--streams 1,8]",
               "Decode speed with and without speculative decoding on one prompt: n-gram lookup, and a draft model "
               "when --draft is given; medians of rounds that alternate the modes; the text must be the same.");
  ap.add_flag({"--speculation"}, "this benchmark", &flag);
  ap.add_string({"-m", "--model"}, "MODEL", "GGUF file or Hugging Face directory (default: the default model)", &f.model_path);
  ap.add_string({"-p", "--prompt"}, "TEXT", "the prompt", &f.prompt);
  ap.add_string({"-f", "--file"}, "FILE", "read the prompt from FILE", &f.prompt_file);
  ap.add_int({"-n", "--n-gen"}, "N", "tokens to generate (default 256)", &f.gen);
  ap.add_int({"-r", "--repetitions"}, "N", "rounds (default 3)", &f.reps);
  ap.add_string({"--streams"}, "LIST", "concurrent streams of the prompt to measure (default 1)", &f.streams);
  ap.add_flag({"--json"}, "print the figures as JSON", &f.json);
  add_engine_flags(ap, &f.ef, true);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  if (!f.prompt_file.empty()) {
    Result<std::string> text = read_text_file(f.prompt_file);
    if (!text.ok()) return fail("bench", text.message());
    f.prompt = text.value();
  }
  if (f.prompt.empty()) return ap.usage_error("a prompt is required (-p TEXT or -f FILE)");
  Result<std::vector<int32_t>> counts = parse_token_list(f.streams);
  if (!counts.ok()) return ap.usage_error("--streams takes a list of stream counts like 1,8");
  if (f.gen < 2 || f.reps < 1) return ap.usage_error("-n must be >= 2 and -r >= 1");
  if (std::string err = finish_engine_flags(f.ef, &f.eo); !err.empty()) return ap.usage_error(err);

  Result<LoadedModel> lm = load_model_cli(f.model_path, true, f.ef.load);
  if (!lm.ok()) return fail("bench", lm.message());
  std::shared_ptr<const Model> model = make_model(std::move(lm->model), std::move(lm->tokenizer));
  const std::vector<int32_t> prompt = model->encode(f.prompt, true, true);
  std::vector<Mode> modes = {{"off", SpecMode::kOff}, {"ngram", SpecMode::kNgram}};
  if (f.eo.draft_model) modes.push_back({"draft", SpecMode::kDraft});
  std::vector<std::unique_ptr<Engine>> engines;
  for (const Mode& m : modes) {
    EngineOptions o = f.eo;
    o.spec = m.spec;
    o.max_seqs = std::max<int64_t>(o.max_seqs, *std::max_element(counts->begin(), counts->end()));
    o.batch_wait_ms = 0;
    Result<std::unique_ptr<Engine>> e = Engine::create(model, o);
    if (!e.ok()) return fail("bench", e.message());
    engines.push_back(std::move(e.value()));
  }

  nlohmann::json out = {{"model", model->name()}, {"prompt_tokens", prompt.size()}, {"gen", f.gen}, {"rows", nlohmann::json::array()}};
  bool same = true;
  for (int n : counts.value()) {
    std::vector<std::vector<double>> tps(modes.size()), ratio(modes.size());
    std::vector<int32_t> want;
    for (long long round = 0; round < f.reps; ++round) {
      std::vector<double> this_round(modes.size());
      for (size_t k = 0; k < modes.size(); ++k) {
        const size_t m = (k + static_cast<size_t>(round)) % modes.size();  // rotate the order
        RunResult r = run_streams(*engines[m], prompt, n, f.gen);
        if (m == 0 && want.empty()) want = r.tokens;
        this_round[m] = r.tps;
        tps[m].push_back(r.tps);
        if (m != 0 && !want.empty() && r.tokens != want) same = false;
      }
      for (size_t m = 0; m < modes.size(); ++m) ratio[m].push_back(this_round[m] / this_round[0]);
    }
    for (size_t m = 0; m < modes.size(); ++m) {
      const EngineStats st = engines[m]->stats();
      const double acc = st.spec_guessed > 0 ? static_cast<double>(st.spec_accepted) / static_cast<double>(st.spec_guessed) : 0;
      out["rows"].push_back({{"streams", n}, {"mode", modes[m].name}, {"tps", median(tps[m])}, {"ratio", median(ratio[m])},
                             {"acceptance", acc}, {"guessed", st.spec_guessed}});
    }
  }
  out["identical"] = same;
  if (f.json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%s: %zu-token prompt, %lld tokens, %lld rounds, medians; acceptance over all rounds so far\n",
                model->name().c_str(), prompt.size(), f.gen, f.reps);
    std::printf("| streams | speculation | decode t/s | x off | guesses kept |\n|---|---|---|---|---|\n");
    for (const nlohmann::json& r : out["rows"]) {
      std::printf("| %d | %s | %.1f | %.2fx | %s |\n", r["streams"].get<int>(), r["mode"].get<std::string>().c_str(),
                  r["tps"].get<double>(), r["ratio"].get<double>(),
                  r["guessed"].get<int64_t>() > 0 ? strprintf("%.0f%%", 100 * r["acceptance"].get<double>()).c_str() : "-");
    }
    std::printf("text %s\n", same ? "identical in every mode" : "DIFFERS between modes");
  }
  return same ? 0 : 1;
}

}  // namespace ll3::cli
