// The engine's command-line flags, shared by run, chat, serve and bench --parallel.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "cli_common.h"
#include "engine/model_impl.h"
#include "engine/sampler.h"
#include "ll3/grammar.h"

namespace ll3::cli {

void add_engine_flags(ArgParser& ap, EngineFlags* f, bool serving) {
  ap.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", &f->threads);
  ap.add_int({"-c", "--ctx"}, "N", "KV cache size in tokens, shared by all sequences (default: min(model, 4096) "
             "for run and chat, min(model, 16384) otherwise)", &f->ctx);
  ap.add_int({"--kv-memory"}, "BYTES", "KV cache size in bytes (instead of --ctx)", &f->kv_memory);
  ap.add_int({"-b", "--batch", "--batch-tokens"}, "N", "tokens per forward step: decode rows plus prompt chunks (default 256)",
             &f->batch);
  ap.add_float({"--itl-target-ms"}, "MS", "inter-token latency target of running streams while prompts are prefilled "
               "beside them: prompt chunks are cut to fit it (default: 2.2x the step of the decode rows alone; "
               "negative: none, whole --batch-tokens steps)", &f->itl_target_ms);
  ap.add_string({"--kv-type"}, "TYPE", "KV cache type: f32, f16, q8_0 or q4_0 (default f16)", &f->kv_type);
  ap.add_flag({"--no-prefix-cache"}, "do not reuse the KV of earlier requests' prompts", &f->no_prefix_cache);
  ap.add_flag({"--float-act"}, "keep activations in float for quantized weights (default: 8-bit)", &f->float_act);
  add_amx_flag(ap, &f->amx_bf16);
  ap.add_int({"-ngl", "--gpu-layers"}, "N", "layers on the CUDA GPU: -1 all when one is usable and they fit (default), "
             "0 none, N the last N (the first ones on the CPU; the output layer on the GPU when it fits)", &f->gpu_layers);
  ap.add_int({"--gpu-memory"}, "BYTES", "device memory the GPU part may take (default: what the device has free)",
             &f->gpu_memory);
  ap.add_string({"--host-weights"}, "MODE", "the layers whose weights the GPU does not hold: cpu (default; the CPU runs "
                "them) or pinned (the GPU runs them, reading their weights from pinned host memory over PCIe)",
                &f->host_weights);
  ap.add_string({"--spec"}, "MODE", "speculative decoding, the same output sooner: ngram (guesses copied from earlier "
                "in the text: pays on editing, summaries, code), draft (a draft model's guesses, --draft) or off (default)",
                &f->spec);
  ap.add_string({"--draft"}, "MODEL", "draft model for --spec draft (implies it): a smaller model with the same "
                "tokenizer, or the same model at a lower quantization", &f->draft);
  ap.add_int({"--spec-max"}, "N", "the most tokens a sequence guesses per step (default 8; fewer as acceptance or "
             "load make it pay less)", &f->spec_max);
  ap.add_int({"--spec-min"}, "N", "the fewest tokens a decoding sequence guesses per step, whatever they cost "
             "(default 0)", &f->spec_min);
  ap.add({"--lora"}, "NAME=PATH[:SCALE]", "a LoRA adapter (llama.cpp GGUF or PEFT directory) beside the model, at SCALE "
         "(default 1); repeatable. run and chat use every one; serve lists each as a model", [f](const std::string& v) {
           f->loras.push_back(v);
           return std::string();
         });
  ap.add_string({"--lora-dir"}, "DIR", "load every adapter in DIR: each NAME.gguf file and each NAME directory that holds "
                "an adapter_config.json, named NAME", &f->lora_dir);
  add_load_flags(ap, &f->load);
  if (!serving) return;
  ap.add_flag({"--allow-runtime-lora"}, "POST /v1/load_lora_adapter and /v1/unload_lora_adapter may load and unload "
              "adapters while serving", &f->runtime_lora);
  ap.add_int({"--max-loras"}, "N", "the most adapters held at once (default: no bound); loading another unloads the "
             "least recently used one no request runs with", &f->max_loras);
  ap.add_int({"--max-seqs"}, "N", "sequences generating at once (default 64)", &f->max_seqs);
  ap.add_int({"--max-queue"}, "N", "requests waiting beyond those are rejected (default 1024)", &f->max_queue);
  ap.add_float({"--batch-wait-ms"}, "MS", "an idle engine waits this long to start arrivals together (default 2)",
                 &f->batch_wait_ms);
  ap.add_string({"--session-dir"}, "DIR", "save each session here when its turn ends and restore it on demand (replicas may share DIR)",
                &f->session_dir);
  ap.add_int({"--session-memory"}, "BYTES", "KV kept pinned for sessions (default: a quarter of the KV cache)",
             &f->session_memory);
}

namespace {

// --spec, --draft and --spec-max (the draft model is loaded here).
std::string finish_spec_flags(const EngineFlags& f, EngineOptions* o) {
  const std::string mode = f.spec.empty() ? (f.draft.empty() ? "off" : "draft") : f.spec;
  if (f.spec_max < 1 || f.spec_max > 32) return "--spec-max must be in 1..32";
  o->spec_max_guesses = static_cast<int>(f.spec_max);
  if (f.spec_min < 0 || f.spec_min > f.spec_max) return "--spec-min must be in 0..--spec-max";
  o->spec_min_guesses = static_cast<int>(f.spec_min);
  if (mode == "off") {
    o->spec = SpecMode::kOff;
  } else if (mode == "ngram") {
    o->spec = SpecMode::kNgram;
  } else if (mode == "draft") {
    if (f.draft.empty()) return "--spec draft needs --draft MODEL";
    Result<std::string> path = resolve_model_path(f.draft);
    if (!path.ok()) return "--draft: " + path.message();
    Result<std::shared_ptr<const Model>> d = Model::load(path.value());
    if (!d.ok()) return "--draft: " + d.message();
    o->spec = SpecMode::kDraft;
    o->draft_model = std::move(d.value());
  } else {
    return "--spec must be off, ngram or draft, got '" + f.spec + "'";
  }
  if (!f.draft.empty() && o->spec != SpecMode::kDraft) return "--draft goes with --spec draft";
  return "";
}

}  // namespace

std::string finish_engine_flags(const EngineFlags& f, EngineOptions* o) {
  Result<DType> kvt = parse_kv_type(f.kv_type);
  if (!kvt.ok()) return kvt.message();
  if (f.batch <= 0) return "--batch must be positive";
  if (f.ctx < 0) return "--ctx must not be negative";
  if (f.kv_memory < 0) return "--kv-memory must not be negative";
  if (f.max_seqs <= 0) return "--max-seqs must be positive";
  if (f.max_queue < 0) return "--max-queue must not be negative";
  if (!(f.batch_wait_ms >= 0) || f.batch_wait_ms > 10000) return "--batch-wait-ms must be in 0..10000";
  if (f.session_memory < 0) return "--session-memory must not be negative";
  if (!std::isfinite(f.itl_target_ms) || f.itl_target_ms > 1e6) return "--itl-target-ms must be a number of milliseconds";
  if (f.load.mmap && f.load.no_mmap) return "--mmap and --no-mmap exclude each other";
  if (std::string err = finish_spec_flags(f, o); !err.empty()) return err;
  if (f.gpu_layers < -1) return "--gpu-layers must be -1 (all), 0 (none) or a layer count";
  if (f.gpu_memory < 0) return "--gpu-memory must not be negative";
  if (f.host_weights != "cpu" && f.host_weights != "pinned") return "--host-weights must be cpu or pinned";
  o->threads = f.threads;
  o->ctx = f.ctx;
  o->kv_memory = f.kv_memory;
  o->batch_tokens = f.batch;
  o->itl_target_ms = f.itl_target_ms;
  switch (kvt.value()) {
    case DType::F32: o->kv_type = KvType::kF32; break;
    case DType::Q8_0: o->kv_type = KvType::kQ8_0; break;
    case DType::Q4_0: o->kv_type = KvType::kQ4_0; break;
    default: o->kv_type = KvType::kF16; break;
  }
  o->prefix_cache = !f.no_prefix_cache;
  o->int8_activations = !f.float_act;
  o->amx_prompts = f.amx_bf16;
  o->gpu_layers = f.gpu_layers;
  o->gpu_memory = f.gpu_memory;
  o->host_weights_pinned = f.host_weights == "pinned";
  o->max_seqs = f.max_seqs;
  o->max_queue = f.max_queue;
  o->batch_wait_ms = f.batch_wait_ms;
  o->session_dir = f.session_dir;
  o->session_memory = f.session_memory;
  if (f.max_loras < 0 || f.max_loras > 100000) return "--max-loras must be in 0..100000";
  o->max_loras = static_cast<int>(f.max_loras);
  o->lora_runtime = f.runtime_lora;
  o->loras.clear();
  std::vector<std::string> given = f.loras;
  if (!f.lora_dir.empty()) {
    std::error_code ec;
    std::vector<std::string> found;
    for (const auto& e : std::filesystem::directory_iterator(f.lora_dir, ec)) {
      const std::filesystem::path& p = e.path();
      if ((e.is_regular_file() && p.extension() == ".gguf") || (e.is_directory() && std::filesystem::exists(p / "adapter_config.json"))) {
        found.push_back(p.stem().string() + "=" + p.string());
      }
    }
    if (ec) return "--lora-dir " + f.lora_dir + ": " + ec.message();
    std::sort(found.begin(), found.end());
    given.insert(given.end(), found.begin(), found.end());
  }
  for (const std::string& v : given) {
    Result<LoraSpec> spec = parse_lora_flag(v);
    if (!spec.ok()) return spec.message();
    for (const LoraSpec& other : o->loras) {
      if (other.name == spec->name) return "--lora: two adapters are named '" + spec->name + "'";
    }
    o->loras.push_back(*spec);
  }
  return "";
}

Result<LoraSpec> parse_lora_flag(const std::string& value) {
  LoraSpec s;
  std::string rest = value;
  const size_t eq = rest.find('=');
  if (eq != std::string::npos && rest.find('/') > eq) {  // NAME=..., a name has no '/'
    s.name = rest.substr(0, eq);
    rest = rest.substr(eq + 1);
  }
  const size_t colon = rest.rfind(':');
  if (colon != std::string::npos) {
    char* end = nullptr;
    const std::string num = rest.substr(colon + 1);
    const double v = std::strtod(num.c_str(), &end);
    if (!num.empty() && end == num.c_str() + num.size()) {
      if (!std::isfinite(v)) return Status::error("--lora " + value + ": the scale is not a number");
      s.scale = static_cast<float>(v);
      rest = rest.substr(0, colon);
    }
  }
  if (rest.empty()) return Status::error("--lora " + value + ": no path (NAME=PATH[:SCALE])");
  s.path = rest;
  if (s.name.empty()) {  // the file or directory name, without .gguf
    std::string base = rest;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    base = base.substr(base.find_last_of('/') == std::string::npos ? 0 : base.find_last_of('/') + 1);
    if (base.size() > 5 && base.compare(base.size() - 5, 5, ".gguf") == 0) base.resize(base.size() - 5);
    s.name = base;
  }
  return s;
}

void add_generation_flags(ArgParser& ap, GenerationFlags* f) {
  SamplingParams& s = f->req.sampling;
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
    f->req.stop.push_back(v);
    return std::string();
  });
  ap.add_flag({"--ignore-eos"}, "keep generating after end-of-generation tokens", &f->req.ignore_eos);
  ap.add_string({"--grammar"}, "FILE", "the output matches this GBNF grammar (llama.cpp's format; root rule `root`)",
                &f->grammar_file);
  ap.add_string({"--json-schema"}, "FILE", "the output is JSON valid under this JSON Schema", &f->json_schema);
  add_engine_flags(ap, &f->engine, false);
}

std::string finish_generation_flags(GenerationFlags* f, EngineOptions* o) {
  if (f->seed < -1) return "--seed must be a non-negative integer";
  if (f->max_tokens < -1) return "-n must be >= 0, or -1 for until the context is full";
  SamplingFieldNames names;
  names.temperature = "--temp";
  names.top_p = "--top-p";
  names.min_p = "--min-p";
  names.repeat_penalty = "--repeat-penalty";
  names.repeat_last_n = "--repeat-last-n";
  names.presence_penalty = "--presence-penalty";
  names.frequency_penalty = "--frequency-penalty";
  if (Status st = validate(f->req.sampling, names); !st.ok()) return st.message();
  f->req.sampling.seed = f->seed < 0 ? kRandomSeed : static_cast<uint64_t>(f->seed);
  f->req.max_tokens = f->max_tokens;
  if (!f->grammar_file.empty() && !f->json_schema.empty()) return "give --grammar or --json-schema, not both";
  for (const std::string* path : {&f->grammar_file, &f->json_schema}) {
    if (path->empty()) continue;
    Result<std::string> text = read_text_file(*path);
    if (!text.ok()) return text.message();
    Result<std::shared_ptr<const Grammar>> g =
        path == &f->grammar_file ? Grammar::from_gbnf(*text) : Grammar::from_json_schema(*text);
    if (!g.ok()) return *path + ": " + g.message();
    f->req.grammar = *g;
  }
  std::string err = finish_engine_flags(f->engine, o);
  f->req.loras.clear();
  for (const LoraSpec& spec : o->loras) f->req.loras.push_back({spec.name, spec.scale});
  return err;
}

Result<std::unique_ptr<Engine>> make_engine(LoadedModel&& lm, const EngineOptions& o) {
  return Engine::create(make_model(std::move(lm.model), std::move(lm.tokenizer)), o);
}

}  // namespace ll3::cli
