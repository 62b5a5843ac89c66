#include "cli_common.h"

#include "backend/backend.h"
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
  if (s == "q8_0") return DType::Q8_0;
  if (s == "q4_0") return DType::Q4_0;
  return Status::errorf("KV cache type must be f32, f16, q8_0 or q4_0, not '%s'", s.c_str());
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
  note_cpu_fallback_once();
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

}  // namespace ll3::cli

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

namespace ll3::cli {

namespace {

// Runs this binary (ll3 ARGS...) in a child process with its stdout sent to stderr, so that what
// the parent command writes to stdout (generated text, JSON) stays clean. True if it exited 0.
bool run_self(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>("ll3"));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    dup2(STDERR_FILENO, STDOUT_FILENO);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

// The default model is the llama3.2-1b preset (random weights, seed 1) in Q4_K_M, the type most
// downloaded models come in: made once by this binary's make-model (F16, into a temporary file
// beside the target) and quantize, after which the F16 file is deleted. The Q4_K_M file is
// written under a temporary name and renamed, so an interrupted run leaves no half file that a
// later run would take for the model.
Result<std::string> resolve_model_path(const std::string& path) {
  if (!path.empty()) return path;
  namespace fs = std::filesystem;
  const char* home = std::getenv("HOME");
  const fs::path cache = fs::path(home != nullptr ? home : "/tmp") / ".cache" / "ll3" / "models";
  std::string target;
  if (const char* env = std::getenv("LL3_DEFAULT_MODEL"); env != nullptr && *env != '\0') {
    target = env;
  } else {
    target = (cache / "llama3.2-1b-q4_k_m-seed1.gguf").string();
  }
  std::error_code ec;
  if (fs::exists(target, ec)) return target;
  fs::create_directories(fs::path(target).parent_path(), ec);
  // The F16 default model of earlier versions of ll3, if it is there, is the same preset: it is
  // quantized as it is, and left in place (it is the user's file, not made here).
  const std::string old_f16 = (cache / "llama3.2-1b-f16-seed1.gguf").string();
  std::string f16;
  bool f16_is_temporary = false;
  if (fs::exists(old_f16, ec)) {
    f16 = old_f16;
    std::fprintf(stderr, "ll3: no -m given; making the default model %s from %s (the earlier default, no "
                 "longer used: delete it to free its space)\n", target.c_str(), old_f16.c_str());
  } else {
    f16 = target + ".f16.tmp";
    f16_is_temporary = true;
    std::fprintf(stderr,
                 "ll3: no -m given; making the default model %s (llama3.2-1b preset, seed 1, f16, then "
                 "quantized to q4_k_m)\n", target.c_str());
    if (!run_self({"make-model", "--preset", "llama3.2-1b", "--type", "f16", "--seed", "1", "--out", f16})) {
      fs::remove(f16, ec);
      return Status::errorf("making the default model %s failed (make-model)", target.c_str());
    }
  }
  const std::string partial = target + ".partial";
  const bool quantized = run_self({"quantize", f16, partial, "q4_k_m"});
  if (f16_is_temporary) fs::remove(f16, ec);
  if (!quantized || !fs::exists(partial, ec)) {
    fs::remove(partial, ec);
    return Status::errorf("making the default model %s failed (quantize)", target.c_str());
  }
  fs::rename(partial, target, ec);
  if (ec) {
    fs::remove(partial, ec);
    return Status::errorf("making the default model %s failed: cannot rename %s", target.c_str(), partial.c_str());
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
