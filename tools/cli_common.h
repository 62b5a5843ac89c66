// Pieces several subcommands share: model loading with the default model, value parsing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "model/llama_model.h"

namespace ll3::cli {

// "f32" / "f16" / "q8_0" / "q4_0" -> DType for the KV cache.
Result<DType> parse_kv_type(const std::string& s);
// "1,2,3" -> ids.
Result<std::vector<int32_t>> parse_token_list(const std::string& s);

// Loads `path` and prints a one-line summary to stderr.
Result<std::unique_ptr<LlamaModel>> load_model_verbose(const std::string& path, const LoadOptions& options = {});

// Prints "ll3 CMD: message" to stderr and returns 1, the exit code of a failed command.
int fail(const char* cmd, const std::string& message);

// The whole file as bytes.
Result<std::string> read_text_file(const std::string& path);

// Wall-clock seconds since an arbitrary start.
double now_seconds();

}  // namespace ll3::cli

#include "cli_args.h"
#include "ll3/engine.h"
#include "tokenizer/tokenizer.h"

namespace ll3::cli {

// --mmap / --no-mmap: how the weights get into memory (default: LoadOptions' own choice);
// --row-layout: no repacking into decode panels.
struct LoadFlags {
  bool mmap = false;
  bool no_mmap = false;
  bool row_layout = false;
};
// --amx-bf16 (EvaluatorOptions::amx_prompts).
void add_amx_flag(ArgParser& ap, bool* amx_bf16);
void add_load_flags(ArgParser& ap, LoadFlags* f);

// Engine flags (ll3/engine.h EngineOptions): run, chat, serve and bench --parallel. `serving`
// adds those that only matter with many requests (queue, sessions, batching wait).
struct EngineFlags {
  int threads = 0;
  long long ctx = 0;
  long long kv_memory = 0;
  long long batch = 256;
  long long max_seqs = 64;
  long long max_queue = 1024;
  double batch_wait_ms = 2;
  double itl_target_ms = 0;
  std::string kv_type = "f16";
  std::string session_dir;
  long long session_memory = 0;
  bool no_prefix_cache = false;
  bool float_act = false;
  bool amx_bf16 = false;
  int gpu_layers = -1;
  long long gpu_memory = 0;
  std::string host_weights = "cpu";
  std::string spec;   // --spec: off, ngram or draft
  std::string draft;  // --draft MODEL
  long long spec_max = 8;
  long long spec_min = 0;
  std::vector<std::string> loras;  // --lora, as given
  std::string lora_dir;            // --lora-dir
  bool runtime_lora = false;       // serve: --allow-runtime-lora
  long long max_loras = 0;
  LoadFlags load;
};
// --lora NAME=PATH[:SCALE] (or PATH alone, named by its file name, as llama.cpp takes it).
Result<LoraSpec> parse_lora_flag(const std::string& value);
void add_engine_flags(ArgParser& ap, EngineFlags* f, bool serving);
// The engine options the flags say; "" or a usage error.
std::string finish_engine_flags(const EngineFlags& f, EngineOptions* o);

// Flags of one generation (run, chat): sampling, stop strings, max tokens, plus the engine's.
struct GenerationFlags {
  Request req;
  long long max_tokens = 256;
  long long seed = -1;
  std::string grammar_file, json_schema;  // --grammar FILE (GBNF), --json-schema FILE
  EngineFlags engine;
};
void add_generation_flags(ArgParser& ap, GenerationFlags* f);
// Validates the flags into f->req (sampling, stop, max tokens) and *o; "" or a usage error.
std::string finish_generation_flags(GenerationFlags* f, EngineOptions* o);

// The model to use: `path` if given, else the default model (made once: make-model's
// llama3.2-1b preset quantized to Q4_K_M, ~/.cache/ll3/models/llama3.2-1b-q4_k_m-seed1.gguf;
// LL3_DEFAULT_MODEL overrides the path).
Result<std::string> resolve_model_path(const std::string& path);

struct LoadedModel {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tokenizer;  // null unless asked for
};
// resolve_model_path + load_model_verbose + (with_tokenizer) the model's tokenizer.
Result<LoadedModel> load_model_cli(const std::string& path, bool with_tokenizer, const LoadFlags& flags = {});

// An engine over a model loaded by load_model_cli with its tokenizer (which it takes over).
Result<std::unique_ptr<Engine>> make_engine(LoadedModel&& lm, const EngineOptions& o);

}  // namespace ll3::cli
