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
#include "engine/session.h"
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

int cmd_logits(int argc, char** argv) {
  std::string model_path, tokens_arg, prompt, prompt_file, out_path, dump_dir, kv_type = "f16";
  bool all = false, json = false, parse_special = false, no_bos = false, float_act = false, amx_bf16 = false;
  LoadFlags load_flags;
  int top = 32, greedy = 0, threads = 0;
  long long ctx = 0;
  ArgParser ap("logits",
               "ll3 logits -m MODEL (--tokens 1,2,3 | --prompt TEXT) [--all] [--top K] [--greedy N] "
               "[--kv-type f32|f16|q8_0] [--out FILE.npy] [--json]",
               "Evaluate a prompt and report logits: the parity interface.");
  ap.add_string({"-m", "--model"}, "MODEL", "GGUF file or Hugging Face directory", &model_path);
  ap.add_string({"--tokens"}, "IDS", "comma-separated prompt token ids", &tokens_arg);
  ap.add_string({"-p", "--prompt"}, "TEXT", "prompt text (tokenized with the model's tokenizer)", &prompt);
  ap.add_string({"-f", "--file"}, "FILE", "read the prompt text from FILE (bytes as they are)", &prompt_file);
  ap.add_flag({"--parse-special"}, "recognise special tokens like <|eot_id|> in --prompt", &parse_special);
  ap.add_flag({"--no-bos"}, "do not add <|begin_of_text|> before --prompt", &no_bos);
  ap.add_flag({"--all"}, "report every prompt position, not only the last", &all);
  ap.add_int({"--top"}, "K", "number of best logits per position in --json (default 32)", &top);
  ap.add_int({"--greedy"}, "N", "also decode N tokens greedily after the prompt", &greedy);
  ap.add_string({"--kv-type"}, "TYPE", "KV cache type: f32, f16 or q8_0 (default f16)", &kv_type);
  ap.add_string({"--out"}, "FILE.npy", "write float32 logits [1|n, vocab] as .npy", &out_path);
  ap.add_flag({"--float-act"}, "keep activations in float for quantized weights (default: 8-bit, as llama.cpp)",
              &float_act);
  add_amx_flag(ap, &amx_bf16);
  add_load_flags(ap, &load_flags);
  ap.add_string({"--dump-activations"}, "DIR",
                "write every op's output of the prompt's forward pass to DIR/<op>-<layer>.f32 (float32 rows, "
                "named as llama.cpp's graph nodes; for finding where two engines part)",
                &dump_dir);
  ap.add_flag({"--json"}, "print a JSON object with tokens, top-K per position and greedy tokens", &json);
  ap.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", &threads);
  ap.add_int({"-c", "--ctx"}, "N", "context size (default: prompt + greedy)", &ctx);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  if (model_path.empty()) return ap.usage_error("-m MODEL is required");
  if (!prompt_file.empty()) {
    if (!prompt.empty()) return ap.usage_error("give --prompt or --file, not both");
    Result<std::string> text = read_text_file(prompt_file);
    if (!text.ok()) return ap.usage_error(text.message());
    prompt = std::move(text.value());
  }
  if (tokens_arg.empty() == prompt.empty()) return ap.usage_error("give exactly one of --tokens or --prompt");
  if (top <= 0 || greedy < 0) return ap.usage_error("--top must be positive and --greedy not negative");
  Result<DType> kvt = parse_kv_type(kv_type);
  if (!kvt.ok()) return ap.usage_error(kvt.message());

  Result<LoadedModel> lm = load_model_cli(model_path, !prompt.empty(), load_flags);
  if (!lm.ok()) return fail("logits", lm.message());
  std::vector<int32_t> tokens;
  if (!tokens_arg.empty()) {
    Result<std::vector<int32_t>> t = parse_token_list(tokens_arg);
    if (!t.ok()) return ap.usage_error(t.message());
    tokens = std::move(t.value());
  } else {
    tokens = lm->tokenizer->encode(prompt, !no_bos, parse_special);
    if (tokens.empty()) return ap.usage_error("the prompt tokenizes to nothing");
  }

  SessionOptions so;
  so.kv_type = kvt.value();
  so.int8_activations = !float_act;
  so.amx_prompts = amx_bf16;
  so.threads = threads;
  so.context = ctx > 0 ? ctx : static_cast<int64_t>(tokens.size()) + greedy;
  std::set<std::string> dumped;  // files written by this run: later steps append
  bool dump_failed = false;
  if (!dump_dir.empty()) {
    so.tap = [&](const char* name, int64_t layer, const float* data, int64_t rows, int64_t cols) {
      const std::string path = dump_dir + "/" + name + (layer >= 0 ? "-" + std::to_string(layer) : "") + ".f32";
      FILE* f = std::fopen(path.c_str(), dumped.insert(path).second ? "wb" : "ab");
      const size_t n = static_cast<size_t>(rows * cols);
      if (f == nullptr || std::fwrite(data, sizeof(float), n, f) != n) dump_failed = true;
      if (f != nullptr) std::fclose(f);
    };
  }
  Result<std::unique_ptr<Session>> session = Session::create(*lm->model, so);
  if (!session.ok()) return fail("logits", session.message());
  Session& s = **session;
  const int64_t V = s.n_vocab();
  if (Status st = s.eval(tokens, all); !st.ok()) {
    return fail("logits", st.message());
  }
  if (dump_failed) return fail("logits", "cannot write the activations to " + dump_dir);
  const int64_t n_rows = all ? static_cast<int64_t>(tokens.size()) : 1;
  // Keep the prompt's logits: greedy decoding below overwrites the session's buffer.
  std::vector<float> prompt_logits(s.logits().end() - n_rows * V, s.logits().end());

  std::vector<int32_t> generated;
  for (int i = 0; i < greedy; ++i) {
    const float* row = i == 0 ? prompt_logits.data() + (n_rows - 1) * V : s.last_logits();
    int32_t next = argmax(row, static_cast<int32_t>(V));
    generated.push_back(next);
    if (i + 1 < greedy) {
      if (Status st = s.eval(std::span<const int32_t>(&next, 1)); !st.ok()) {
        return fail("logits", st.message());
      }
    }
  }

  if (!out_path.empty()) {
    if (Status st = write_npy_f32(out_path, prompt_logits.data(), {n_rows, V}); !st.ok()) {
      return fail("logits", st.message());
    }
  }
  if (json) {
    nlohmann::json j;
    j["tokens"] = tokens;
    nlohmann::json positions = nlohmann::json::array();
    for (int64_t r = 0; r < n_rows; ++r) {
      TopK tk = top_k(prompt_logits.data() + r * V, V, top);
      positions.push_back({{"top_ids", tk.ids}, {"top_logits", tk.logits}, {"logsumexp", tk.logsumexp}});
    }
    j["positions"] = positions;
    j["greedy"] = generated;
    std::printf("%s\n", j.dump().c_str());
  } else if (out_path.empty()) {
    // Human-readable summary of the last position.
    TopK tk = top_k(prompt_logits.data() + (n_rows - 1) * V, V, std::min(top, 10));
    std::printf("%zu prompt tokens; last position's best logits:\n", tokens.size());
    for (size_t i = 0; i < tk.ids.size(); ++i) std::printf("  %8d  %.5f\n", tk.ids[i], tk.logits[i]);
    if (!generated.empty()) {
      std::printf("greedy:");
      for (int32_t g : generated) std::printf(" %d", g);
      std::printf("\n");
    }
  }
  return 0;
}

}  // namespace

LL3_COMMAND("logits", "evaluate a prompt and report logits (parity interface)", cmd_logits);

}  // namespace ll3::cli
