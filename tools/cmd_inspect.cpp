// ll3 inspect: what a checkpoint holds — architecture, hyper-parameters, tokenizer, tensors.
#include <cstdio>
#include <filesystem>
#include <map>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "model/llama_model.h"
#include "model/model_tokenizer.h"

namespace ll3::cli {

namespace {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return strprintf(u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
}

std::string value_summary(const GgufValue& v) {
  switch (v.type) {
    case GgufType::STRING: {
      std::string s(v.str.substr(0, 60));
      for (char& c : s) {
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
      }
      return "\"" + s + (v.str.size() > 60 ? "...\" (" + std::to_string(v.str.size()) + " bytes)" : "\"");
    }
    case GgufType::ARRAY:
      return strprintf("[%s x %llu]", gguf_type_name(v.elem_type), static_cast<unsigned long long>(v.count));
    case GgufType::BOOL: return v.i ? "true" : "false";
    case GgufType::F32:
    case GgufType::F64: return strprintf("%g", v.f);
    default: {
      auto n = v.as_number();
      return n ? strprintf("%.0f", *n) : "?";
    }
  }
}

void print_config(const LlamaModel& m) {
  const LlamaConfig& c = m.config;
  std::printf("\nmodel: %s\n", c.name.empty() ? "(unnamed)" : c.name.c_str());
  std::printf("  architecture      llama\n");
  std::printf("  vocabulary        %lld\n", static_cast<long long>(c.n_vocab));
  std::printf("  dim               %lld\n", static_cast<long long>(c.dim));
  std::printf("  layers            %lld\n", static_cast<long long>(c.n_layers));
  std::printf("  heads / kv heads  %lld / %lld (head size %lld)\n", static_cast<long long>(c.n_heads),
              static_cast<long long>(c.n_kv_heads), static_cast<long long>(c.head_dim));
  std::printf("  ffn               %lld\n", static_cast<long long>(c.ffn_dim));
  std::printf("  context           %lld\n", static_cast<long long>(c.context_length));
  std::printf("  rms norm eps      %g\n", c.norm_eps);
  std::printf("  rope theta        %g%s\n", c.rope_theta, c.rope_half_pairs ? " (rotate-half layout)" : "");
  bool scaled = false;
  for (float f : m.rope_factors) scaled |= f != 1.0f;
  std::printf("  rope scaling      %s\n", scaled ? "llama3 (per-dimension factors)" : "none");
  std::printf("  embeddings        %s\n", c.tied_embeddings ? "tied (output = token embedding)" : "separate output");
  std::printf("  weights           %s, %s\n", m.type_summary().c_str(), human_bytes(m.weight_bytes()).c_str());
}

void print_tokenizer(const LlamaModel& m) {
  Result<std::unique_ptr<Tokenizer>> tok = load_model_tokenizer(m);
  if (!tok.ok()) {
    std::printf("\ntokenizer: %s\n", tok.message().c_str());
    return;
  }
  const TokenizerVocab& v = (*tok)->vocab();
  std::printf("\ntokenizer: byte-level BPE (%s), %zu tokens, %zu merges\n", v.pre.c_str(), v.tokens.size(),
              v.merges.size());
  auto name = [&](int32_t id) {
    return id >= 0 && id < static_cast<int32_t>(v.tokens.size()) ? v.tokens[id] : std::string("-");
  };
  std::printf("  bos %d %s, eos %d %s, eot %d %s, add_bos %s\n", v.bos_id, name(v.bos_id).c_str(), v.eos_id,
              name(v.eos_id).c_str(), v.eot_id, name(v.eot_id).c_str(), v.add_bos ? "yes" : "no");
  std::printf("  end-of-generation ids:");
  for (int32_t id : v.eog_ids) std::printf(" %d", id);
  std::printf("\n  chat template: %s\n",
              v.chat_template.empty() ? "none" : strprintf("%zu bytes", v.chat_template.size()).c_str());
}

int cmd_inspect(int argc, char** argv) {
  std::vector<std::string> pos;
  bool no_tensors = false, metadata = false;
  ArgParser ap("inspect", "ll3 inspect FILE_OR_DIR [--no-tensors] [--metadata]",
               "Show a checkpoint's architecture, hyper-parameters, tokenizer and tensors.");
  ap.positionals("FILE_OR_DIR  a GGUF file or a Hugging Face model directory", &pos, 1, 1);
  ap.add_flag({"--no-tensors"}, "omit the tensor table", &no_tensors);
  ap.add_flag({"--metadata"}, "list every GGUF metadata key", &metadata);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  const std::string path = pos[0];

  uint64_t total = 0;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    Result<std::unique_ptr<SafetensorsModel>> st = SafetensorsModel::open_dir(path);
    if (!st.ok()) return fail("inspect", st.message());
    std::printf("%s: Hugging Face directory, %zu shard(s), %zu tensors\n", path.c_str(), (*st)->shards().size(),
                (*st)->n_tensors());
    if (!no_tensors) std::printf("\n%-48s %-6s %-20s %12s\n", "tensor", "type", "shape", "bytes");
    for (const auto& [name, t] : (*st)->tensors()) {
      total += t->nbytes;
      if (!no_tensors) {
        std::printf("%-48s %-6s %-20s %12llu\n", name.c_str(), std::string(dtype_name(t->type)).c_str(),
                    t->shape_string().c_str(), static_cast<unsigned long long>(t->nbytes));
      }
    }
  } else {
    Result<std::unique_ptr<GgufFile>> g = GgufFile::open(path);
    if (!g.ok()) return fail("inspect", g.message());
    const GgufFile& f = **g;
    std::printf("%s: GGUF v%u, %zu metadata keys, %zu tensors, alignment %zu, file %s\n", path.c_str(), f.version(),
                f.metadata().size(), f.tensors().size(), f.alignment(), human_bytes(f.file_size()).c_str());
    if (metadata) {
      std::printf("\n");
      for (const auto& [key, v] : f.metadata()) std::printf("  %-44s %s\n", key.c_str(), value_summary(v).c_str());
    }
    std::map<std::string, std::pair<int, uint64_t>> by_type;
    if (!no_tensors) std::printf("\n%-36s %-6s %-22s %12s\n", "tensor", "type", "shape", "bytes");
    for (const GgufTensorInfo& t : f.tensors()) {
      total += t.nbytes;
      auto& bt = by_type[std::string(dtype_name(t.type))];
      ++bt.first;
      bt.second += t.nbytes;
      if (!no_tensors) {
        std::printf("%-36s %-6s %-22s %12llu\n", t.name.c_str(), std::string(dtype_name(t.type)).c_str(),
                    t.shape_string().c_str(), static_cast<unsigned long long>(t.nbytes));
      }
    }
    std::printf("\ntensor types:");
    for (const auto& [name, v] : by_type) {
      std::printf(" %s x%d (%s)", name.c_str(), v.first, human_bytes(static_cast<double>(v.second)).c_str());
    }
    std::printf("\n");
  }
  std::printf("total tensor bytes: %llu (%s)\n", static_cast<unsigned long long>(total),
              human_bytes(static_cast<double>(total)).c_str());

  LoadOptions mapped;  // inspecting reads a few bytes of each tensor at most: never copy
  mapped.weights = WeightMemory::kMap;
  Result<std::unique_ptr<LlamaModel>> m = LlamaModel::load(path, mapped);
  if (!m.ok()) {
    std::printf("\nmodel: cannot run: %s\n", m.message().c_str());
    return 1;
  }
  print_config(**m);
  print_tokenizer(**m);
  return 0;
}

}  // namespace

LL3_COMMAND("inspect", "show a checkpoint's hyper-parameters, tokenizer and tensors", cmd_inspect);

}  // namespace ll3::cli
