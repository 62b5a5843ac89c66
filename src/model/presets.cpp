#include "model/presets.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "core/half.h"
#include "io/gguf_writer.h"
#include "tokenizer/vocab.h"

namespace ll3 {
namespace {

LlamaConfig shape(int64_t dim, int64_t layers, int64_t heads, int64_t kv_heads, int64_t ffn,
                  bool tied, int64_t context) {
  LlamaConfig c;
  c.dim = dim;
  c.n_layers = layers;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.head_dim = dim / heads;
  c.ffn_dim = ffn;
  c.tied_embeddings = tied;
  c.context_length = context;
  c.norm_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  return c;
}

std::vector<ModelPreset> make_presets() {
  std::vector<ModelPreset> p;
  p.push_back({"tiny", "dim 64, 2 layers, 4 heads, 2 KV heads, FFN 192, tied (tests)",
               shape(64, 2, 4, 2, 192, true, 8192), false});
  p.push_back({"small", "dim 256, 4 layers, 8 heads, 2 KV heads, FFN 768, untied, Llama 3.1 rope",
               shape(256, 4, 8, 2, 768, false, 131072), true});
  p.push_back({"llama3.2-1b",
               "Llama 3.2 1B: dim 2048, 16 layers, 32 heads, 8 KV heads, FFN 8192, tied",
               shape(2048, 16, 32, 8, 8192, true, 131072), false});
  p.push_back({"llama3.2-3b",
               "Llama 3.2 3B: dim 3072, 28 layers, 24 heads, 8 KV heads, FFN 8192, tied",
               shape(3072, 28, 24, 8, 8192, true, 131072), false});
  p.push_back(
      {"llama3.1-8b",
       "Llama 3.1 8B: dim 4096, 32 layers, 32 heads, 8 KV heads, FFN 14336, untied, rope_freqs",
       shape(4096, 32, 32, 8, 14336, false, 131072), true});
  p.push_back({"llama3-8b",
               "Llama 3 8B: dim 4096, 32 layers, 32 heads, 8 KV heads, FFN 14336, untied",
               shape(4096, 32, 32, 8, 14336, false, 8192), false});
  for (auto& m : p) {
    m.config.name = m.name;
    if (m.rope_freqs) {
      m.config.rope_scaling.enabled = true;  // factor 8, low 1, high 4, original 8192
    }
  }
  return p;
}

// Deterministic random numbers: every chunk of a tensor has its own generator, seeded from the
// model seed, the tensor name and the chunk index, so the bytes do not depend on the threads.
constexpr int64_t kChunk = 1 << 16;

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t name_hash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return h;
}

// Values are center + scale * u with u uniform of std 1 (in [-sqrt 3, sqrt 3]).
struct Init {
  float center = 0.0f;
  float scale = 0.0f;
};

void store(DType t, uint8_t* dst, int64_t i, float v) {
  switch (t) {
    case DType::F32:
      std::memcpy(dst + 4 * i, &v, 4);
      break;
    case DType::F16: {
      uint16_t h = f32_to_f16(v);
      std::memcpy(dst + 2 * i, &h, 2);
      break;
    }
    default: {  // BF16
      uint16_t h = f32_to_bf16(v);
      std::memcpy(dst + 2 * i, &h, 2);
      break;
    }
  }
}

void fill_random(uint8_t* dst, DType type, int64_t n, Init init, uint64_t seed,
                 std::string_view name, int threads) {
  const uint64_t base = seed * 0x2545f4914f6cdd1dull ^ name_hash(name);
  const int64_t n_chunks = (n + kChunk - 1) / kChunk;
  const float k = init.scale * 1.7320508f / 2147483648.0f;  // int32 -> [-sqrt3, sqrt3) * scale
  auto work = [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      // Chunk streams start at hashed, hence unrelated, points of the splitmix sequence (a
      // start of base + c * step would make chunk c + 1 repeat chunk c shifted by one value).
      uint64_t s = base ^ (static_cast<uint64_t>(c) * 0xd1b54a32d192ed03ull);
      s = splitmix64(s);
      const int64_t end = std::min(n, (c + 1) * kChunk);
      for (int64_t i = c * kChunk; i < end; i += 2) {
        uint64_t r = splitmix64(s);
        store(type, dst, i, init.center + k * static_cast<float>(static_cast<int32_t>(r)));
        if (i + 1 < end) {
          store(type, dst, i + 1,
                init.center + k * static_cast<float>(static_cast<int32_t>(r >> 32)));
        }
      }
    }
  };
  int nt = static_cast<int>(std::min<int64_t>(threads, n_chunks));
  if (nt <= 1) {
    work(0, n_chunks);
    return;
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < nt; ++t) {
    pool.emplace_back(work, n_chunks * t / nt, n_chunks * (t + 1) / nt);
  }
  for (auto& th : pool) th.join();
}

bool has_tokenizer(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(dir / "tokenizer.json", ec);
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = make_presets();
  return presets;
}

const ModelPreset* find_preset(std::string_view name) {
  for (const auto& p : model_presets()) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

Result<std::string> find_llama3_tokenizer_dir(const std::string& flag) {
  namespace fs = std::filesystem;
  if (!flag.empty()) {
    if (has_tokenizer(flag)) return flag;
    return Status::error("tokenizer: " + flag + " has no tokenizer.json");
  }
  std::vector<fs::path> tried;
  auto try_dir = [&](const fs::path& d) {
    tried.push_back(d);
    return has_tokenizer(d);
  };
  if (const char* shared = std::getenv("LL3_SHARED"); shared != nullptr && *shared != '\0') {
    fs::path d = fs::path(shared) / "tokenizers" / "llama3";
    if (try_dir(d)) return d.string();
  }
  std::error_code ec;
  std::vector<fs::path> starts;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) starts.push_back(exe.parent_path());
  fs::path cwd = fs::current_path(ec);
  if (!ec) starts.push_back(cwd);
  for (const fs::path& start : starts) {
    // shared/ beside the repository: checked at every level up from the start.
    fs::path p = start;
    for (int depth = 0; depth < 6 && !p.empty(); ++depth) {
      fs::path d = p / "shared" / "tokenizers" / "llama3";
      if (has_tokenizer(d)) return d.string();
      if (p == p.parent_path()) break;
      p = p.parent_path();
    }
    tried.push_back(start / "(parents)" / "shared" / "tokenizers" / "llama3");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    fs::path d = fs::path(home) / ".cache" / "ll3" / "tokenizer" / "llama3";
    if (try_dir(d)) return d.string();
  }
  std::string msg = "tokenizer: no Llama-3 tokenizer.json found (looked in";
  for (size_t i = 0; i < tried.size(); ++i) msg += (i ? ", " : " ") + tried[i].string();
  msg += "); run scripts/fetch-tokenizer.sh or pass --tokenizer DIR";
  return Status::error(msg);
}

namespace {

// The llama.* keys and their order as llama.cpp's converter writes them.
void set_llama_keys(GgufWriter& w, const ModelPreset& preset, int64_t n_vocab, DType type,
                    const std::string& general_name) {
  const LlamaConfig& c = preset.config;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", general_name);
  w.set_u32("llama.context_length", static_cast<uint32_t>(c.context_length));
  w.set_u32("llama.embedding_length", static_cast<uint32_t>(c.dim));
  w.set_u32("llama.block_count", static_cast<uint32_t>(c.n_layers));
  w.set_u32("llama.feed_forward_length", static_cast<uint32_t>(c.ffn_dim));
  w.set_u32("llama.attention.head_count", static_cast<uint32_t>(c.n_heads));
  w.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  w.set_f32("llama.rope.freq_base", c.rope_theta);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", c.norm_eps);
  if (c.head_dim != c.dim / c.n_heads) {
    w.set_u32("llama.attention.key_length", static_cast<uint32_t>(c.head_dim));
    w.set_u32("llama.attention.value_length", static_cast<uint32_t>(c.head_dim));
  }
  w.set_u32("llama.vocab_size", static_cast<uint32_t>(n_vocab));
  w.set_u32("llama.rope.dimension_count", static_cast<uint32_t>(c.head_dim));
  // llama_ftype: ALL_F32 = 0, MOSTLY_F16 = 1, MOSTLY_BF16 = 32.
  w.set_u32("general.file_type", type == DType::F32 ? 0u : type == DType::F16 ? 1u : 32u);
}

// The tokenizer.* keys, after the llama.* ones, in the converter's order.
void set_tokenizer_keys(GgufWriter& w, const TokenizerVocab& vocab) {
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", vocab.pre.empty() ? "llama-bpe" : vocab.pre);
  w.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
  w.set_i32_array("tokenizer.ggml.token_type", vocab.token_types);
  w.set_string_array("tokenizer.ggml.merges", vocab.merges);
  if (vocab.bos_id >= 0)
    w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(vocab.bos_id));
  if (vocab.eos_id >= 0)
    w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(vocab.eos_id));
  if (vocab.eot_id >= 0 && vocab.eot_id != vocab.eos_id) {
    w.set_u32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(vocab.eot_id));
  }
  w.set_bool("tokenizer.ggml.add_bos_token", vocab.add_bos);
  if (!vocab.chat_template.empty()) w.set_string("tokenizer.chat_template", vocab.chat_template);
}

// Every tensor of the preset, in GGUF order, filled with seeded random values when written:
// norms near 1, matrices with std 1/sqrt(fan_in), the embedding small.
Status add_random_tensors(GgufWriter& w, const ModelPreset& preset, int64_t n_vocab,
                          const MakeModelOptions& opt, int threads) {
  const LlamaConfig& c = preset.config;
  const uint64_t seed = opt.seed;
  const DType wt = opt.type;
  auto add = [&](const std::string& name, DType type, std::vector<int64_t> ne, Init init) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    return w.add_tensor(name, type, ne, [=](uint8_t* dst) {
      fill_random(dst, type, n, init, seed, name, threads);
    });
  };
  const Init norm{1.0f, 0.1f};
  const int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  auto matrix = [](int64_t fan_in) {
    return Init{0.0f, 1.0f / std::sqrt(static_cast<float>(fan_in))};
  };
  const Init embd{0.0f, 0.02f};
  // Final norm gain: hidden state has rms ~1 after the norm, so a logit has std about
  // gain * out_std * sqrt(dim); aim for ~5 so the distribution is peaked but not degenerate.
  const float out_std = c.tied_embeddings ? embd.scale : matrix(c.dim).scale;
  const float gain = 5.0f / (out_std * std::sqrt(static_cast<float>(c.dim)));

  LL3_RETURN_IF_ERROR(add("token_embd.weight", wt, {c.dim, n_vocab}, embd));
  if (preset.rope_freqs) {
    auto factors = std::make_shared<std::vector<float>>(
        llama3_rope_freq_factors(c.head_dim, c.rope_theta, c.rope_scaling));
    LL3_RETURN_IF_ERROR(w.add_tensor(
        "rope_freqs.weight", DType::F32, {static_cast<int64_t>(factors->size())},
        [factors](uint8_t* dst) { std::memcpy(dst, factors->data(), factors->size() * 4); }));
  }
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    LL3_RETURN_IF_ERROR(add(b + "attn_norm.weight", DType::F32, {c.dim}, norm));
    LL3_RETURN_IF_ERROR(add(b + "attn_q.weight", wt, {c.dim, q_dim}, matrix(c.dim)));
    LL3_RETURN_IF_ERROR(add(b + "attn_k.weight", wt, {c.dim, kv_dim}, matrix(c.dim)));
    LL3_RETURN_IF_ERROR(add(b + "attn_v.weight", wt, {c.dim, kv_dim}, matrix(c.dim)));
    LL3_RETURN_IF_ERROR(add(b + "attn_output.weight", wt, {q_dim, c.dim}, matrix(q_dim)));
    LL3_RETURN_IF_ERROR(add(b + "ffn_norm.weight", DType::F32, {c.dim}, norm));
    LL3_RETURN_IF_ERROR(add(b + "ffn_gate.weight", wt, {c.dim, c.ffn_dim}, matrix(c.dim)));
    LL3_RETURN_IF_ERROR(add(b + "ffn_up.weight", wt, {c.dim, c.ffn_dim}, matrix(c.dim)));
    LL3_RETURN_IF_ERROR(add(b + "ffn_down.weight", wt, {c.ffn_dim, c.dim}, matrix(c.ffn_dim)));
  }
  LL3_RETURN_IF_ERROR(add("output_norm.weight", DType::F32, {c.dim}, {gain, gain * 0.1f}));
  if (!c.tied_embeddings) {
    LL3_RETURN_IF_ERROR(add("output.weight", wt, {c.dim, n_vocab}, matrix(c.dim)));
  }
  return ok_status();
}

}  // namespace

Status check_make_model_inputs(const MakeModelOptions& opt, const TokenizerVocab& vocab) {
  if (opt.type != DType::F32 && opt.type != DType::F16 && opt.type != DType::BF16) {
    return Status::errorf("make-model: type %s is not supported (f32, f16, bf16)",
                          std::string(dtype_name(opt.type)).c_str());
  }
  if (vocab.tokens.empty() || vocab.token_types.size() != vocab.tokens.size()) {
    return Status::error("make-model: the tokenizer vocabulary is empty or inconsistent");
  }
  return ok_status();
}

void set_preset_metadata(GgufWriter& w, const ModelPreset& preset, const TokenizerVocab& vocab,
                         DType type, const std::string& general_name) {
  set_llama_keys(w, preset, static_cast<int64_t>(vocab.tokens.size()), type, general_name);
  set_tokenizer_keys(w, vocab);
}

Status write_preset_model(const ModelPreset& preset, const TokenizerVocab& vocab,
                          const MakeModelOptions& opt, const std::string& out_path) {
  LL3_RETURN_IF_ERROR(check_make_model_inputs(opt, vocab));
  const int64_t n_vocab = static_cast<int64_t>(vocab.tokens.size());
  const int threads =
      opt.threads > 0 ? opt.threads : std::max(1u, std::thread::hardware_concurrency());

  GgufWriter w;
  set_preset_metadata(w, preset, vocab, opt.type,
                      std::string("ll3 ") + preset.name + " (random weights)");
  LL3_RETURN_IF_ERROR(add_random_tensors(w, preset, n_vocab, opt, threads));
  return w.write(out_path).with_context("make-model: ");
}

}  // namespace ll3
