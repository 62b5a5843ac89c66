// ll3 logits: the parity interface. Runs a prompt and prints or saves the logits, the top-K per
// position and greedy continuations, in formats other tools compare against.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "engine/sampler.h"
#include "eval/sequence_evaluator.h"
#include "io/npy.h"

namespace ll3::cli {

namespace {

struct TopK {
  std::vector<int32_t> ids;
  std::vector<float> logits;
  double logsumexp = 0;
};

TopK top_k(const float* row, int64_t n, int k) {
  TopK out;
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  k = static_cast<int>(std::min<int64_t>(k, n));
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  double max = row[idx[0]];
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(row[i]) - max);
  out.logsumexp = max + std::log(sum);
  for (int i = 0; i < k; ++i) {
    out.ids.push_back(idx[i]);
    out.logits.push_back(row[idx[i]]);
  }
  return out;
}

struct LogitsFlags {
  std::string model_path, tokens_arg, prompt, prompt_file, out_path, dump_dir, kv_type = "f16", lora;
  bool all = false, json = false, parse_special = false, no_bos = false, float_act = false, amx_bf16 = false;
  LoadFlags load_flags;
  int top = 32, greedy = 0, threads = 0;
  long long ctx = 0;
  DType kv = DType::F16;  // kv_type, parsed
};

void add_logits_flags(ArgParser& ap, LogitsFlags& f) {
  ap.add_string({"-m", "--model"}, "MODEL", "GGUF file or Hugging Face directory", &f.model_path);
  ap.add_string({"--tokens"}, "IDS", "comma-separated prompt token ids", &f.tokens_arg);
  ap.add_string({"-p", "--prompt"}, "TEXT", "prompt text (tokenized with the model's tokenizer)", &f.prompt);
  ap.add_string({"-f", "--file"}, "FILE", "read the prompt text from FILE (bytes as they are)", &f.prompt_file);
  ap.add_flag({"--parse-special"}, "recognise special tokens like <|eot_id|> in --prompt", &f.parse_special);
  ap.add_flag({"--no-bos"}, "do not add <|begin_of_text|> before --prompt", &f.no_bos);
  ap.add_flag({"--all"}, "report every prompt position, not only the last", &f.all);
  ap.add_int({"--top"}, "K", "number of best logits per position in --json (default 32)", &f.top);
  ap.add_int({"--greedy"}, "N", "also decode N tokens greedily after the prompt", &f.greedy);
  ap.add_string({"--kv-type"}, "TYPE", "KV cache type: f32, f16, q8_0 or q4_0 (default f16)", &f.kv_type);
  ap.add_string({"--out"}, "FILE.npy", "write float32 logits [1|n, vocab] as .npy", &f.out_path);
  ap.add_flag({"--float-act"}, "keep activations in float for quantized weights (default: 8-bit, as llama.cpp)",
              &f.float_act);
  add_amx_flag(ap, &f.amx_bf16);
  add_load_flags(ap, &f.load_flags);
  ap.add_string({"--dump-activations"}, "DIR",
                "write every op's output of the prompt's forward pass to DIR/<op>-<layer>.f32 (float32 rows, "
                "named as llama.cpp's graph nodes; for finding where two engines part)",
                &f.dump_dir);
  ap.add_flag({"--json"}, "print a JSON object with tokens, top-K per position and greedy tokens", &f.json);
  ap.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", &f.threads);
  ap.add_string({"--lora"}, "PATH[:SCALE]", "with this LoRA adapter (llama.cpp GGUF or PEFT directory) at SCALE (default 1)", &f.lora);
  ap.add_int({"-c", "--ctx"}, "N", "context size (default: prompt + greedy)", &f.ctx);
}

// Checks the parsed flags and reads --file into f.prompt. Returns -1 to go on, else the exit code.
int check_logits_flags(const ArgParser& ap, LogitsFlags& f) {
  if (f.model_path.empty()) return ap.usage_error("-m MODEL is required");
  if (!f.prompt_file.empty()) {
    if (!f.prompt.empty()) return ap.usage_error("give --prompt or --file, not both");
    Result<std::string> text = read_text_file(f.prompt_file);
    if (!text.ok()) return ap.usage_error(text.message());
    f.prompt = std::move(text.value());
  }
  if (f.tokens_arg.empty() == f.prompt.empty()) return ap.usage_error("give exactly one of --tokens or --prompt");
  if (f.top <= 0 || f.greedy < 0) return ap.usage_error("--top must be positive and --greedy not negative");
  Result<DType> kvt = parse_kv_type(f.kv_type);
  if (!kvt.ok()) return ap.usage_error(kvt.message());
  f.kv = kvt.value();
  return -1;
}

// The prompt: --tokens as given, or --prompt tokenized. Returns -1 to go on, else the exit code.
int prompt_tokens(const ArgParser& ap, const LogitsFlags& f, const LoadedModel& lm, std::vector<int32_t>* tokens) {
  if (!f.tokens_arg.empty()) {
    Result<std::vector<int32_t>> t = parse_token_list(f.tokens_arg);
    if (!t.ok()) return ap.usage_error(t.message());
    *tokens = std::move(t.value());
  } else {
    *tokens = lm.tokenizer->encode(f.prompt, !f.no_bos, f.parse_special);
    if (tokens->empty()) return ap.usage_error("the prompt tokenizes to nothing");
  }
  return -1;
}

// --dump-activations: every op's output, appended to DIR/<op>-<layer>.f32 (a file is created
// by the first write of this run).
struct ActivationDump {
  explicit ActivationDump(std::string d) : dir(std::move(d)) {}
  std::string dir;
  std::set<std::string> dumped;  // files written by this run: later steps append
  bool failed = false;
  void write(const char* name, int64_t layer, const float* data, int64_t rows, int64_t cols) {
    const std::string path = dir + "/" + name + (layer >= 0 ? "-" + std::to_string(layer) : "") + ".f32";
    FILE* f = std::fopen(path.c_str(), dumped.insert(path).second ? "wb" : "ab");
    const size_t n = static_cast<size_t>(rows * cols);
    if (f == nullptr || std::fwrite(data, sizeof(float), n, f) != n) failed = true;
    if (f != nullptr) std::fclose(f);
  }
};

EvaluatorOptions logits_evaluator_options(const LogitsFlags& f, size_t n_tokens, ActivationDump* dump) {
  EvaluatorOptions so;
  so.kv_type = f.kv;
  so.int8_activations = !f.float_act;
  so.amx_prompts = f.amx_bf16;
  so.threads = f.threads;
  so.context = f.ctx > 0 ? f.ctx : static_cast<int64_t>(n_tokens) + f.greedy;
  if (!f.dump_dir.empty()) {
    so.tap = [dump](const char* name, int64_t layer, const float* data, int64_t rows, int64_t cols) {
      dump->write(name, layer, data, rows, cols);
    };
  }
  return so;
}

// n tokens decoded greedily, the first from the prompt's last logits `first_row`.
Status decode_greedy(SequenceEvaluator& s, const float* first_row, int n, std::vector<int32_t>* generated) {
  const int64_t V = s.n_vocab();
  for (int i = 0; i < n; ++i) {
    const float* row = i == 0 ? first_row : s.last_logits();
    int32_t next = argmax(row, static_cast<int32_t>(V));
    generated->push_back(next);
    if (i + 1 < n) LL3_RETURN_IF_ERROR(s.eval(std::span<const int32_t>(&next, 1)));
  }
  return ok_status();
}

// logits: (n_rows, V), the prompt's last n_rows positions.
void print_logits_json(const std::vector<int32_t>& tokens, const std::vector<float>& logits, int64_t n_rows,
                       int64_t V, int top, const std::vector<int32_t>& generated) {
  nlohmann::json j;
  j["tokens"] = tokens;
  nlohmann::json positions = nlohmann::json::array();
  for (int64_t r = 0; r < n_rows; ++r) {
    TopK tk = top_k(logits.data() + r * V, V, top);
    positions.push_back({{"top_ids", tk.ids}, {"top_logits", tk.logits}, {"logsumexp", tk.logsumexp}});
  }
  j["positions"] = positions;
  j["greedy"] = generated;
  std::printf("%s\n", j.dump().c_str());
}

// Human-readable summary of the last position (`last_row`: its logits).
void print_logits_summary(size_t n_tokens, const float* last_row, int64_t V, int top,
                          const std::vector<int32_t>& generated) {
  TopK tk = top_k(last_row, V, std::min(top, 10));
  std::printf("%zu prompt tokens; last position's best logits:\n", n_tokens);
  for (size_t i = 0; i < tk.ids.size(); ++i) std::printf("  %8d  %.5f\n", tk.ids[i], tk.logits[i]);
  if (!generated.empty()) {
    std::printf("greedy:");
    for (int32_t g : generated) std::printf(" %d", g);
    std::printf("\n");
  }
}

int cmd_logits(int argc, char** argv) {
  LogitsFlags f;
  ArgParser ap("logits",
               "ll3 logits -m MODEL (--tokens 1,2,3 | --prompt TEXT) [--all] [--top K] [--greedy N] "
               "[--kv-type f32|f16|q8_0|q4_0] [--out FILE.npy] [--json]",
               "Evaluate a prompt and report logits: the parity interface.");
  add_logits_flags(ap, f);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  if (int rc = check_logits_flags(ap, f); rc >= 0) return rc;

  Result<LoadedModel> lm = load_model_cli(f.model_path, !f.prompt.empty(), f.load_flags);
  if (!lm.ok()) return fail("logits", lm.message());
  std::vector<int32_t> tokens;
  if (int rc = prompt_tokens(ap, f, *lm, &tokens); rc >= 0) return rc;
  ActivationDump dump(f.dump_dir);
  EvaluatorOptions eo = logits_evaluator_options(f, tokens.size(), &dump);
  std::unique_ptr<LoraAdapter> adapter;
  LoraSet lora;
  if (!f.lora.empty()) {
    Result<LoraSpec> spec = parse_lora_flag(f.lora);
    if (!spec.ok()) return ap.usage_error(spec.message());
    Result<std::unique_ptr<LoraAdapter>> ad = load_lora(spec->path, *lm->model);
    if (!ad.ok()) return fail("logits", ad.message());
    adapter = std::move(ad.value());
    lora.uses = {{adapter.get(), spec->scale}};
    eo.lora = &lora;
  }
  Result<std::unique_ptr<SequenceEvaluator>> evaluator = SequenceEvaluator::create(*lm->model, eo);
  if (!evaluator.ok()) return fail("logits", evaluator.message());
  SequenceEvaluator& s = **evaluator;
  const int64_t V = s.n_vocab();
  if (Status st = s.eval(tokens, f.all); !st.ok()) {
    return fail("logits", st.message());
  }
  if (dump.failed) return fail("logits", "cannot write the activations to " + f.dump_dir);
  const int64_t n_rows = f.all ? static_cast<int64_t>(tokens.size()) : 1;
  // Keep the prompt's logits: greedy decoding below overwrites the evaluator's buffer.
  std::vector<float> prompt_logits(s.logits().end() - n_rows * V, s.logits().end());
  const float* last_row = prompt_logits.data() + (n_rows - 1) * V;
  std::vector<int32_t> generated;
  if (Status st = decode_greedy(s, last_row, f.greedy, &generated); !st.ok()) return fail("logits", st.message());

  if (!f.out_path.empty()) {
    if (Status st = write_npy_f32(f.out_path, prompt_logits.data(), {n_rows, V}); !st.ok()) {
      return fail("logits", st.message());
    }
  }
  if (f.json) {
    print_logits_json(tokens, prompt_logits, n_rows, V, f.top, generated);
  } else if (f.out_path.empty()) {
    print_logits_summary(tokens.size(), last_row, V, f.top, generated);
  }
  return 0;
}

}  // namespace

LL3_COMMAND("logits", "evaluate a prompt and report logits (parity interface)", cmd_logits);

}  // namespace ll3::cli
