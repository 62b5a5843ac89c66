#include "cli_common.h"

#include "model/model_tokenizer.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ll3::cli {

Result<DType> parse_kv_type(const std::string& s) {
  if (s == "f32") return DType::F32;
  if (s == "f16") return DType::F16;
  return Status::errorf("KV cache type must be f32 or f16, not '%s'", s.c_str());
}

Result<std::vector<int32_t>> parse_token_list(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    std::string item = s.substr(i, j - i);
    errno = 0;
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || v < 0 || v > 0x7fffffff) {
      return Status::errorf("bad token id '%s' in list", item.c_str());
    }
    ids.push_back(static_cast<int32_t>(v));
    i = j + 1;
  }
  if (ids.empty()) return Status::error("empty token list");
  return ids;
}

Result<std::string> read_text_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::errorf("cannot read %s: %s", path.c_str(), std::strerror(errno));
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

int fail(const char* cmd, const std::string& message) {
  std::fprintf(stderr, "ll3 %s: %s\n", cmd, message.c_str());
  return 1;
}

Result<std::unique_ptr<LlamaModel>> load_model_verbose(const std::string& path, const LoadOptions& options) {
  double t0 = now_seconds();
  Result<std::unique_ptr<LlamaModel>> m = LlamaModel::load(path, options);
  if (!m.ok()) return m;
  const LlamaConfig& c = (*m)->config;
  const std::string panels =
      (*m)->panel_matrices() > 0 ? ", " + std::to_string((*m)->panel_matrices()) + " matrices in decode panels" : "";
  std::fprintf(stderr,
               "ll3: loaded %s: %lld layers, dim %lld, %lld heads (%lld KV), vocab %lld, %s, %.1f MiB %s%s, %.2f s\n",
               path.c_str(), static_cast<long long>(c.n_layers), static_cast<long long>(c.dim),
               static_cast<long long>(c.n_heads), static_cast<long long>(c.n_kv_heads),
               static_cast<long long>(c.n_vocab), (*m)->type_summary().c_str(),
               (*m)->weight_bytes() / 1048576.0, (*m)->weights_copied() ? "in huge pages" : "mmapped",
               panels.c_str(), now_seconds() - t0);
  return m;
}

}  // namespace ll3::cli

namespace ll3::cli {

void add_generation_flags(ArgParser& ap, GenerationFlags* f) {
  SamplingParams& s = f->gen.sampling;
  ap.add_int({"-n", "--max-tokens"}, "N", "tokens to generate (default 256; -1: until the context is full)",
             &f->max_tokens);
  ap.add_float({"--temp", "--temperature"}, "T", "sampling temperature; 0 = greedy (default 0.8)", &s.temperature);
  ap.add_int({"--top-k"}, "K", "keep the K most likely tokens; 0 = off (default 40)", &s.top_k);
  ap.add_float({"--top-p"}, "P", "nucleus sampling; 1 = off (default 0.95)", &s.top_p);
  ap.add_float({"--min-p"}, "P", "drop tokens below P x the best one's probability; 0 = off (default 0.05)", &s.min_p);
  ap.add_float({"--repeat-penalty"}, "X", "penalise repeated tokens; 1 = off (default 1.0)", &s.repeat_penalty);
  ap.add_int({"--repeat-last-n"}, "N", "tokens the repeat penalty looks back over (default 64)", &s.repeat_last_n);
  ap.add_float({"--presence-penalty"}, "X", "OpenAI-style presence penalty (default 0)", &s.presence_penalty);
  ap.add_float({"--frequency-penalty"}, "X", "OpenAI-style frequency penalty (default 0)", &s.frequency_penalty);
  ap.add_int({"-s", "--seed"}, "S", "random seed; same seed, same output (default: random)", &f->seed);
  ap.add({"--stop"}, "TEXT", "stop when TEXT is generated (repeatable)", [f](const std::string& v) {
    f->stop.push_back(v);
    return std::string();
  });
  ap.add_flag({"--ignore-eos"}, "keep generating after end-of-generation tokens", &f->gen.ignore_eos);
  ap.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", &f->threads);
  ap.add_int({"-c", "--ctx"}, "N", "context size in tokens (default: min(model, 4096))", &f->ctx);
  ap.add_int({"-b", "--batch"}, "N", "prompt tokens per forward step (default 256)", &f->batch);
  ap.add_string({"--kv-type"}, "TYPE", "KV cache type: f32 or f16 (default f16)", &f->kv_type);
  ap.add_flag({"--float-act"}, "keep activations in float for quantized weights (default: 8-bit)", &f->float_act);
  add_amx_flag(ap, &f->amx_bf16);
  add_load_flags(ap, &f->load);
}

void add_amx_flag(ArgParser& ap, bool* amx_bf16) {
  ap.add_flag({"--amx-bf16"},
              "prompts of 16+ tokens on AMX bf16 tiles where the CPU has them (faster; rounds differently from "
              "the 8-bit path, so other logits than decode and other CPUs give)",
              amx_bf16);
}

void add_load_flags(ArgParser& ap, LoadFlags* f) {
  ap.add_flag({"--mmap"}, "use the weights in place from the page cache (default when the model is over half of free memory)",
              &f->mmap);
  ap.add_flag({"--no-mmap"}, "read the weights into huge pages: faster generation (default when they fit easily)",
              &f->no_mmap);
  ap.add_flag({"--row-layout"}, "keep the checkpoint's row layout (no repacking into decode panels at load: slower generation)",
              &f->row_layout);
}

std::string finish_generation_flags(GenerationFlags* f, SessionOptions* so) {
  Result<DType> kvt = parse_kv_type(f->kv_type);
  if (!kvt.ok()) return kvt.message();
  if (f->batch <= 0) return "--batch must be positive";
  if (f->ctx < 0) return "--ctx must not be negative";
  if (f->seed < -1) return "--seed must be a non-negative integer";
  if (f->gen.sampling.top_p <= 0 || f->gen.sampling.temperature < 0) return "--top-p must be > 0 and --temp >= 0";
  f->gen.sampling.seed = f->seed < 0 ? kRandomSeed : static_cast<uint64_t>(f->seed);
  f->gen.stop = f->stop;
  f->gen.max_tokens = f->max_tokens;
  so->kv_type = kvt.value();
  so->int8_activations = !f->float_act;
  so->amx_prompts = f->amx_bf16;
  so->threads = f->threads;
  so->context = f->ctx;
  so->batch = f->batch;
  return "";
}

}  // namespace ll3::cli

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

namespace ll3::cli {

Result<std::string> resolve_model_path(const std::string& path) {
  if (!path.empty()) return path;
  namespace fs = std::filesystem;
  std::string target;
  if (const char* env = std::getenv("LL3_DEFAULT_MODEL"); env != nullptr && *env != '\0') {
    target = env;
  } else {
    const char* home = std::getenv("HOME");
    target = std::string(home != nullptr ? home : "/tmp") + "/.cache/ll3/models/llama3.2-1b-f16-seed1.gguf";
  }
  std::error_code ec;
  if (fs::exists(target, ec)) return target;
  fs::create_directories(fs::path(target).parent_path(), ec);
  std::fprintf(stderr, "ll3: no -m given; making the default model %s (llama3.2-1b preset, f16, seed 1)\n",
               target.c_str());
  // The same binary's make-model, in a child process.
  pid_t pid = fork();
  if (pid < 0) return Status::error("cannot start make-model: fork failed");
  if (pid == 0) {
    execl("/proc/self/exe", "ll3", "make-model", "--preset", "llama3.2-1b", "--type", "f16", "--seed", "1",
          "--out", target.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !fs::exists(target, ec)) {
    return Status::errorf("making the default model %s failed", target.c_str());
  }
  return target;
}

}  // namespace ll3::cli

namespace ll3::cli {

Result<LoadedModel> load_model_cli(const std::string& path, bool with_tokenizer, const LoadFlags& flags) {
  if (flags.mmap && flags.no_mmap) return Status::error("--mmap and --no-mmap exclude each other");
  LoadOptions options;
  if (flags.mmap) options.weights = WeightMemory::kMap;
  if (flags.no_mmap) options.weights = WeightMemory::kHugePages;
  options.decode_panels = !flags.row_layout;
  Result<std::string> resolved = resolve_model_path(path);
  if (!resolved.ok()) return resolved.status();
  Result<std::unique_ptr<LlamaModel>> model = load_model_verbose(resolved.value(), options);
  if (!model.ok()) return model.status();
  LoadedModel out;
  out.model = std::move(model.value());
  if (with_tokenizer) {
    Result<std::unique_ptr<Tokenizer>> tok = load_model_tokenizer(*out.model);
    if (!tok.ok()) return tok.status();
    out.tokenizer = std::move(tok.value());
  }
  return out;
}

}  // namespace ll3::cli
