// ll3 make-lora: a seeded random LoRA adapter for a model, as a llama.cpp GGUF adapter and/or a
// PEFT directory with the same values (tests, benchmarks). ll3 export-lora: adapters folded
// into a copy of their GGUF base (model/lora_write.h).
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "model/llama_model.h"
#include "model/lora_write.h"

namespace ll3::cli {

namespace {

Result<std::unique_ptr<LlamaModel>> load_base(const std::string& path) {
  LoadOptions lo;
  lo.weights = WeightMemory::kMap;
  lo.decode_panels = false;  // the file's own row layout: merged rows are written in it
  return LlamaModel::load(path, lo);
}

int make_lora_main(int argc, char** argv) {
  ArgParser ap("make-lora", "ll3 make-lora -m MODEL [-o ADAPTER.gguf] [--peft DIR] [options]",
               "Write a seeded random LoRA adapter for MODEL: a llama.cpp GGUF adapter (-o) and/or a PEFT directory\n"
               "(--peft: adapter_config.json + adapter_model.safetensors) holding the same values, each in its own\n"
               "RoPE row order. A's entries are N(0, 1/in); B's spread makes each correction about --strength times\n"
               "its product.");
  std::string model, out, peft, type = "f32", targets = "q,k,v,o,gate,up,down";
  long long rank = 16, seed = 1;
  double alpha = 32, strength = 0.3;
  bool output = false, rslora = false;
  ap.add_string({"-m", "--model"}, "MODEL", "the base model (GGUF or Hugging Face directory)", &model);
  ap.add_string({"-o", "--out"}, "FILE", "the GGUF adapter to write", &out);
  ap.add_string({"--peft"}, "DIR", "the PEFT directory to write", &peft);
  ap.add_int({"-r", "--rank"}, "R", "rank (default 16)", &rank);
  ap.add_float({"--alpha"}, "A", "lora_alpha (default 32)", &alpha);
  ap.add_int({"--seed"}, "S", "random seed (default 1)", &seed);
  ap.add_string({"--type"}, "TYPE", "f32, f16 or bf16 (default f32)", &type);
  ap.add_string({"--targets"}, "LIST", "products to correct, of q,k,v,o,gate,up,down (default all)", &targets);
  ap.add_flag({"--output"}, "correct the LM head too", &output);
  ap.add_flag({"--rslora"}, "rsLoRA scaling (alpha / sqrt(rank))", &rslora);
  ap.add_float({"--strength"}, "X", "a correction's size against its product's (default 0.3)", &strength);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  if (model.empty()) return ap.usage_error("-m is required");
  if (out.empty() && peft.empty()) return ap.usage_error("give -o FILE.gguf, --peft DIR or both");
  RandomLoraOptions o;
  o.rank = rank;
  o.alpha = static_cast<float>(alpha);
  o.strength = static_cast<float>(strength);
  if (seed < 0 || seed > 0xffffffffll) return ap.usage_error("--seed must be in 0..2^32-1");
  o.seed = static_cast<uint32_t>(seed);
  o.output = output;
  o.rslora = rslora;
  if (type == "f32") o.type = DType::F32;
  else if (type == "f16") o.type = DType::F16;
  else if (type == "bf16") o.type = DType::BF16;
  else return ap.usage_error("--type must be f32, f16 or bf16");
  o.targets.clear();
  std::stringstream ts(targets);
  for (std::string t; std::getline(ts, t, ',');) {
    static const std::pair<const char*, LoraTarget> kNames[] = {{"q", LoraTarget::kQ},       {"k", LoraTarget::kK},
                                                                {"v", LoraTarget::kV},       {"o", LoraTarget::kO},
                                                                {"gate", LoraTarget::kGate}, {"up", LoraTarget::kUp},
                                                                {"down", LoraTarget::kDown}};
    bool found = false;
    for (const auto& [name, target] : kNames) {
      if (t == name) {
        o.targets.push_back(target);
        found = true;
      }
    }
    if (!found) return ap.usage_error("--targets: '" + t + "' is none of q,k,v,o,gate,up,down");
  }
  Result<std::unique_ptr<LlamaModel>> base = LlamaModel::load(model);
  if (!base.ok()) return fail("make-lora", base.message());
  Status st = write_random_lora(**base, o, out, peft);
  if (!st.ok()) return fail("make-lora", st.message());
  std::fprintf(stderr, "ll3 make-lora: rank %lld, alpha %g, seed %lld, %s%s%s%s\n", rank, alpha, seed, type.c_str(),
               out.empty() ? "" : (", " + out).c_str(), peft.empty() ? "" : (", " + peft).c_str(), output ? ", with the LM head" : "");
  return 0;
}

int export_lora_main(int argc, char** argv) {
  ArgParser ap("export-lora", "ll3 export-lora -m BASE.gguf --lora PATH[:SCALE] [--lora ...] -o OUT.gguf",
               "Fold LoRA adapters into a copy of their base: each corrected weight W becomes W + s B A (in double),\n"
               "written as --outtype (default: the base tensor's float type, else f16, as llama.cpp's export-lora);\n"
               "every other tensor is copied as it is.");
  std::string model, out, outtype;
  std::vector<std::string> loras;
  ap.add_string({"-m", "--model"}, "BASE", "the base model (GGUF)", &model);
  ap.add({"--lora"}, "[NAME=]PATH[:SCALE]", "an adapter and its scale (default 1); repeatable", [&](const std::string& v) {
    loras.push_back(v);
    return std::string();
  });
  ap.add_string({"-o", "--out"}, "FILE", "the merged GGUF to write", &out);
  ap.add_string({"--outtype"}, "TYPE", "f32, f16 or bf16 for the merged weights", &outtype);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  if (model.empty() || out.empty() || loras.empty()) return ap.usage_error("-m, --lora and -o are required");
  DType type = DType::Q8_K;  // the default rule
  if (outtype == "f32") type = DType::F32;
  else if (outtype == "f16") type = DType::F16;
  else if (outtype == "bf16") type = DType::BF16;
  else if (!outtype.empty()) return ap.usage_error("--outtype must be f32, f16 or bf16");
  Result<std::unique_ptr<LlamaModel>> base = load_base(model);
  if (!base.ok()) return fail("export-lora", base.message());
  std::vector<std::unique_ptr<LoraAdapter>> held;
  std::vector<std::pair<const LoraAdapter*, float>> use;
  for (const std::string& v : loras) {
    Result<LoraSpec> spec = parse_lora_flag(v);
    if (!spec.ok()) return ap.usage_error(spec.message());
    Result<std::unique_ptr<LoraAdapter>> ad = load_lora(spec->path, **base);
    if (!ad.ok()) return fail("export-lora", ad.message());
    use.emplace_back(ad->get(), spec->scale);
    held.push_back(std::move(ad.value()));
  }
  const auto t0 = std::chrono::steady_clock::now();
  Status st = merge_lora(**base, use, out, type);
  if (!st.ok()) return fail("export-lora", st.message());
  std::fprintf(stderr, "ll3 export-lora: wrote %s (%zu adapter%s) in %.1f s\n", out.c_str(), use.size(), use.size() == 1 ? "" : "s",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

}  // namespace

LL3_COMMAND("make-lora", "write a seeded random LoRA adapter (GGUF and/or PEFT) for a model", make_lora_main);
LL3_COMMAND("export-lora", "fold LoRA adapters into a copy of their GGUF base", export_lora_main);

}  // namespace ll3::cli
