// ll3 make-model: a LLaMA-3-architecture GGUF with seeded random weights and the real Llama-3
// tokenizer, for tests and benchmarks.
#include <chrono>
#include <cstdio>
#include <string>

#include "cli_args.h"
#include "commands.h"
#include "model/copy_model.h"
#include "model/presets.h"
#include "tokenizer/vocab.h"

namespace {

int make_model_main(int argc, char** argv) {
  std::string summary =
      "Write a LLaMA-3 GGUF with seeded random weights and the Llama-3 tokenizer.\n"
      "--copy writes hand-built weights instead, at the preset's exact shape and cost, whose\n"
      "greedy output copies from the context like a trained model's induction heads: the\n"
      "token that followed the longest earlier match of the last 1-6 tokens (a benchmark\n"
      "model for `ll3 run --spec ngram`; needs head size 64 and room for it, as llama3.2-1b\n"
      "and the larger presets have).\npresets:";
  for (const auto& p : ll3::model_presets())
    summary += std::string("\n  ") + p.name + ": " + p.summary;
  ll3::cli::ArgParser args("make-model", "ll3 make-model --preset NAME --out FILE.gguf [options]",
                           summary);
  std::string preset_name, type_name = "f16", out, tokenizer;
  long long seed = 0;
  int threads = 0;
  bool copy = false;
  args.add_string({"--preset"}, "NAME", "model shape (see the list above)", &preset_name);
  args.add_string({"--type"}, "TYPE", "weight type: f32, f16 or bf16 (default f16)", &type_name);
  args.add_string({"-o", "--out"}, "FILE", "output .gguf file", &out);
  args.add_int({"--seed"}, "S", "random seed (default 0); the same seed gives the same file",
               &seed);
  args.add_flag({"--copy"}, "copying weights (induction heads) instead of random ones; see above",
                &copy);
  args.add_string({"--tokenizer"}, "DIR",
                  "directory with tokenizer.json (default: shared/tokenizers/llama3, then "
                  "~/.cache/ll3/tokenizer/llama3)",
                  &tokenizer);
  args.add_int({"-t", "--threads"}, "N", "threads for filling weights (default: all cores)",
               &threads);
  if (int rc = args.parse(argc, argv); rc >= 0) return rc;

  if (preset_name.empty()) return args.usage_error("--preset is required");
  if (out.empty()) return args.usage_error("--out is required");
  const ll3::ModelPreset* preset = ll3::find_preset(preset_name);
  if (preset == nullptr) return args.usage_error("unknown preset '" + preset_name + "'");
  ll3::MakeModelOptions opt;
  if (type_name == "f32") {
    opt.type = ll3::DType::F32;
  } else if (type_name == "f16") {
    opt.type = ll3::DType::F16;
  } else if (type_name == "bf16") {
    opt.type = ll3::DType::BF16;
  } else {
    return args.usage_error("--type must be f32, f16 or bf16, not '" + type_name + "'");
  }
  if (seed < 0) return args.usage_error("--seed must be non-negative");
  opt.seed = static_cast<uint64_t>(seed);
  opt.threads = threads;

  auto dir = ll3::find_llama3_tokenizer_dir(tokenizer);
  if (!dir.ok()) {
    std::fprintf(stderr, "ll3 make-model: %s\n", dir.message().c_str());
    return 1;
  }
  auto vocab = ll3::load_vocab_from_hf(*dir);
  if (!vocab.ok()) {
    std::fprintf(stderr, "ll3 make-model: %s\n", vocab.message().c_str());
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  ll3::Status s = copy ? ll3::write_copy_model(*preset, *vocab, opt, out)
                       : ll3::write_preset_model(*preset, *vocab, opt, out);
  if (!s.ok()) {
    std::fprintf(stderr, "ll3 make-model: %s\n", s.message().c_str());
    return 1;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr,
               "ll3 make-model: wrote %s (preset %s%s, %s, seed %llu, tokenizer %s) in %.1f s\n",
               out.c_str(), preset->name, copy ? ", copying weights" : "", type_name.c_str(),
               static_cast<unsigned long long>(opt.seed), dir->c_str(), secs);
  return 0;
}

}  // namespace

LL3_COMMAND("make-model", "write a LLaMA-3 GGUF with seeded random weights", make_model_main);
