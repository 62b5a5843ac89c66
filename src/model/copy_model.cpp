#include "model/copy_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "core/half.h"
#include "io/gguf_writer.h"
#include "io/hf_config.h"
#include "tokenizer/vocab.h"

namespace ll3 {
namespace {

// The induction heads match the last kGram tokens. 4 was too few for real text: repeated
// 4-grams ("const char *" in a C signature) tied, and the copy's own occurrences outvoted
// the source, which looped; 6 copied the test passages without a slip.
constexpr int kGram = 6;
// RoPE pairs (of 32) carrying each element's code: the slowest for the last token.
constexpr int kPairs[kGram] = {5, 2, 2, 2, 2, 2};
// Softmax margins in nats (attention scores after the 1/sqrt(head_dim) factor). A margin of m
// leaves e^-m of the weight to a runner-up, so 20+ makes a head effectively hard.
constexpr double kShiftNats = 24.0;  // previous-token heads: the wanted offset over any other
// Induction: what a match of the last token, the one before, ... adds. The first carries a
// match on its own; the others rank longer matches first. Codes are short (10 dims for the
// last token, 4 for the others: cosines of 0.32 and 0.5 std between different tokens), and
// each KV head has its own, so a head misled by a chance cosine is outvoted by the others.
constexpr double kMatch[kGram] = {40.0, 20.0, 15.0, 12.0, 10.0, 8.0};
// The copied token's weight in A over the current token's: 8 so that a copy still wins when
// the heads split their weight over several followers of a repeated n-gram.
constexpr float kCopyGain = 8.0f;
constexpr float kTokenNorm = 8.0f;   // |A| of every token
constexpr float kCopyLogit = 20.0f;  // the copied token's logit when every head agrees
constexpr int kShiftPairs = 8;       // the fastest RoPE pairs position the previous-token heads

// One previous-token head's job: copy n dims at src from position i - offset to dst at i.
struct ShiftJob {
  int offset = 0;
  int64_t src = 0, dst = 0, n = 0, chunks = 0;  // chunks: unit codes copied (|copy|^2)
};

// Where each subspace lives in the residual, which RoPE pairs each head kind uses and which
// heads of the first layers shift which codes.
struct Layout {
  int64_t dim = 0, hd = 0, n_kv = 0, group = 0;
  std::vector<double> theta;            // (hd / 2) radians per position of each RoPE pair
  std::vector<int> shift_pairs;         // the fastest pairs
  std::vector<int> match_pairs[kGram];  // element e's pairs: slowest for e = 0
  int64_t code[kGram] = {};             // element e's code dims (2 * its pairs)
  // Offsets in the residual. C: the token's codes, element-major (celem[e] + g * code[e]: KV
  // head g's code of element e). B[s], s = 1 .. kGram: C's codes of elements s - 1 and s (the
  // last B only s - 1) of position i - s.
  int64_t a = 0, c = 0, celem[kGram + 1] = {}, b[kGram + 1] = {}, one = 0;
  std::vector<ShiftJob> jobs;  // job k: layer k / n_kv, KV head k % n_kv
  int64_t shift_layers = 0;    // the induction layer's index
  double shift_margin = 0;     // previous-token score margin per unit of q·k

  int64_t a_dims() const { return n_kv * hd; }
  // KV head g's code of element e of token i - shift: in C (shift 0) or B[shift].
  int64_t code_at(int e, int shift, int64_t g) const {
    if (shift == 0) return celem[e] + g * code[e];
    return b[shift] + (celem[e] - celem[shift - 1]) + g * code[e];
  }
  // |x|^2 of the residual entering `layer`: the embedding row (A, kGram * n_kv unit codes, the
  // constant 1) and what the shift jobs of the layers before wrote.
  double norm2_at(int64_t layer) const {
    double n2 = double{kTokenNorm} * kTokenNorm + static_cast<double>(kGram * n_kv) + 1.0;
    for (int64_t k = 0; k < static_cast<int64_t>(jobs.size()) && k / n_kv < layer; ++k) {
      n2 += static_cast<double>(jobs[k].chunks);
    }
    return n2;
  }
};

// The smallest margin, over offsets o up to `context` and wanted offsets 1 .. kGram, between
// the previous-token score at the wanted offset (sum of cos 0 = the pair count) and at o.
double shift_margin(const std::vector<double>& theta, const std::vector<int>& pairs,
                    int64_t context) {
  double margin = 1e30;
  for (int want = 1; want <= kGram; ++want) {
    for (int64_t o = 0; o <= context; ++o) {
      if (o == want) continue;
      double s = 0;
      for (int f : pairs) s += std::cos(static_cast<double>(o - want) * theta[f]);
      margin = std::min(margin, static_cast<double>(pairs.size()) - s);
    }
  }
  return margin;
}

// RoPE pairs: the fastest position the previous-token heads; the 15 slowest of 32 carry codes
// (kPairs). At theta 500000 those turn under 1 radian over 1000 positions (the last token's
// under 0.02), so a match scores nearly the same near and far.
Status choose_pairs(const LlamaConfig& cfg, const std::vector<float>& rope_factors, Layout& L) {
  const int P = static_cast<int>(L.hd / 2);
  for (int f = 0; f < P; ++f) {
    L.theta.push_back(std::pow(static_cast<double>(cfg.rope_theta), -2.0 * f / L.hd) /
                      rope_factors[f]);
  }
  std::vector<int> by_speed(P);  // fastest first
  std::iota(by_speed.begin(), by_speed.end(), 0);
  std::stable_sort(by_speed.begin(), by_speed.end(),
                   [&](int x, int y) { return L.theta[x] > L.theta[y]; });
  L.shift_pairs.assign(by_speed.begin(), by_speed.begin() + kShiftPairs);
  auto end = by_speed.end();
  for (int e = 0; e < kGram; ++e) {
    const int n = kPairs[e] * P / 32;
    L.match_pairs[e].assign(end - n, end);
    L.code[e] = 2 * n;
    end -= n;
  }
  L.shift_margin =
      shift_margin(L.theta, L.shift_pairs, std::min<int64_t>(cfg.context_length, 1 << 17));
  if (L.shift_margin < 0.05) {
    return Status::errorf("RoPE cannot single out the previous position (margin %.3f)",
                          L.shift_margin);
  }
  return ok_status();
}

// Regions start on 256-dim boundaries where they fit (the quantized products scale their 8-bit
// activations per 256 dims, so the constant then shares no block with the codes), else on 32.
Status place_regions(Layout& L) {
  int64_t c_dims = 0;
  for (int e = 0; e < kGram; ++e) c_dims += L.n_kv * L.code[e];
  std::vector<std::pair<int64_t*, int64_t>> regions = {{&L.a, L.a_dims()}, {&L.c, c_dims}};
  for (int s = 1; s <= kGram; ++s) {
    const int64_t last = std::min(s, kGram - 1);
    regions.push_back({&L.b[s], L.n_kv * (L.code[s - 1] + (last == s ? L.code[s] : 0))});
  }
  regions.push_back({&L.one, 1});
  for (int64_t align : {256, 32}) {
    int64_t end = 0;
    for (auto& [offset, size] : regions) {
      *offset = end;
      end = (end + size + align - 1) / align * align;
    }
    if (end <= L.dim) break;
    if (align == 32) {
      return Status::errorf("needs dim %lld or more, not %lld", static_cast<long long>(end),
                            static_cast<long long>(L.dim));
    }
  }
  L.celem[0] = L.c;
  for (int e = 0; e < kGram; ++e) L.celem[e + 1] = L.celem[e] + L.n_kv * L.code[e];
  return ok_status();
}

// B[s] is copied by heads of offset s, whole codes each (so that every copy's norm is known).
void plan_shifts(Layout& L) {
  for (int s = 1; s <= kGram; ++s) {
    ShiftJob j;
    j.offset = s;
    j.src = L.celem[s - 1];
    j.dst = L.b[s];
    for (int e = s - 1; e <= std::min(s, kGram - 1); ++e) {
      for (int64_t g = 0; g < L.n_kv; ++g) {
        if (j.n + L.code[e] > L.hd) {  // this head is full: the next one goes on
          L.jobs.push_back(j);
          j.src += j.n;
          j.dst += j.n;
          j.n = j.chunks = 0;
        }
        j.n += L.code[e];
        ++j.chunks;
      }
    }
    L.jobs.push_back(j);
  }
  L.shift_layers = (static_cast<int64_t>(L.jobs.size()) + L.n_kv - 1) / L.n_kv;
}

Result<Layout> make_layout(const LlamaConfig& cfg, const std::vector<float>& rope_factors) {
  Layout L;
  L.dim = cfg.dim;
  L.hd = cfg.head_dim;
  L.n_kv = cfg.n_kv_heads;
  L.group = cfg.n_heads / cfg.n_kv_heads;
  if (L.hd < 64) {
    return Status::errorf("needs head size 64 or more, not %lld", static_cast<long long>(L.hd));
  }
  LL3_RETURN_IF_ERROR(choose_pairs(cfg, rope_factors, L));
  LL3_RETURN_IF_ERROR(place_regions(L));
  plan_shifts(L);
  if (cfg.n_layers < L.shift_layers + 1) {
    return Status::errorf("needs %lld layers (%lld KV heads), has %lld",
                          static_cast<long long>(L.shift_layers + 1),
                          static_cast<long long>(L.n_kv), static_cast<long long>(cfg.n_layers));
  }
  return L;
}

// A matrix with few nonzeros: at most `group` per row, all equal, so that a quantized row holds
// them exactly (a block's scale comes from its largest value). Rows are outputs.
struct Sparse {
  int64_t rows = 0, cols = 0;
  std::vector<std::pair<int64_t, float>> entries;  // (row * cols + col, value)
  Sparse(int64_t r, int64_t c) : rows(r), cols(c) {}
  void set(int64_t r, int64_t col, float v) { entries.push_back({r * cols + col, v}); }
};

struct AttentionWeights {
  Sparse q, k, v, o;
  float norm = 1.0f;  // the attention norm's weight, on every dim
  explicit AttentionWeights(const LlamaConfig& c)
      : q(c.n_heads * c.head_dim, c.dim),
        k(c.n_kv_heads * c.head_dim, c.dim),
        v(c.n_kv_heads * c.head_dim, c.dim),
        o(c.dim, c.n_heads * c.head_dim) {}
};

// KV head `kv` and its query heads do `job`. Queries are constant (from the constant dim) in
// the fast pairs; the key's constant is turned by job.offset positions, so that after RoPE the
// score is scale * sum_f cos((i - j - offset) theta_f), largest at j = i - offset alone.
void shift_head(const Layout& L, AttentionWeights& w, int64_t kv, const ShiftJob& job) {
  const double scale = kShiftNats / L.shift_margin;
  const float s = static_cast<float>(std::sqrt(scale * std::sqrt(static_cast<double>(L.hd))));
  for (int f : L.shift_pairs) {
    const double turn = job.offset * L.theta[f];
    w.k.set(kv * L.hd + 2 * f, L.one, s * static_cast<float>(std::cos(turn)));
    w.k.set(kv * L.hd + 2 * f + 1, L.one, s * static_cast<float>(std::sin(turn)));
    for (int64_t h = kv * L.group; h < (kv + 1) * L.group; ++h) w.q.set(h * L.hd + 2 * f, L.one, s);
  }
  for (int64_t d = 0; d < job.n; ++d) {
    w.v.set(kv * L.hd + d, job.src + d, 1.0f);
    // The group's query heads see the same scores: each adds its share.
    for (int64_t h = kv * L.group; h < (kv + 1) * L.group; ++h) {
      w.o.set(job.dst + d, h * L.hd + d, 1.0f / static_cast<float>(L.group));
    }
  }
}

// KV head g scores kMatch[e] when token i - e equals token j - 1 - e (cosines of unit codes,
// about 0 otherwise), in the slow pairs, and adds A's slice g of position j into A's slice g.
void induction_head(const Layout& L, AttentionWeights& w, int64_t g) {
  const double rt = std::sqrt(static_cast<double>(L.hd));
  for (int e = 0; e < kGram; ++e) {
    const float s = static_cast<float>(std::sqrt(kMatch[e] * rt));
    const int64_t key = L.code_at(e, e + 1, g), query = L.code_at(e, e, g);
    const std::vector<int>& pairs = L.match_pairs[e];
    for (size_t m = 0; m < pairs.size(); ++m) {
      for (int x = 0; x < 2; ++x) {
        const int64_t d = 2 * pairs[m] + x, i = 2 * static_cast<int64_t>(m) + x;
        w.k.set(g * L.hd + d, key + i, s);
        for (int64_t h = g * L.group; h < (g + 1) * L.group; ++h)
          w.q.set(h * L.hd + d, query + i, s);
      }
    }
  }
  for (int64_t d = 0; d < L.hd; ++d) {
    w.v.set(g * L.hd + d, L.a + g * L.hd + d, 1.0f);
    for (int64_t h = g * L.group; h < (g + 1) * L.group; ++h) {
      w.o.set(L.a + g * L.hd + d, h * L.hd + d, kCopyGain / static_cast<float>(L.group));
    }
  }
}

// The attention weights of `layer`: shift heads, induction heads or nothing. The norm weight
// undoes RMSNorm's scaling (the residual's norm is known), so the heads see the residual as is.
AttentionWeights attention_layer(const LlamaConfig& c, const Layout& L, int64_t layer) {
  AttentionWeights w(c);
  w.norm = static_cast<float>(std::sqrt(L.norm2_at(layer) / static_cast<double>(L.dim)));
  if (layer < L.shift_layers) {
    for (int64_t kv = 0; kv < L.n_kv; ++kv) {
      const size_t k = static_cast<size_t>(layer * L.n_kv + kv);
      if (k < L.jobs.size()) shift_head(L, w, kv, L.jobs[k]);
    }
  } else if (layer == L.shift_layers) {
    for (int64_t g = 0; g < L.n_kv; ++g) induction_head(L, w, g);
  }
  return w;
}

void store(DType t, uint8_t* dst, int64_t i, float v) {
  if (t == DType::F32) {
    std::memcpy(dst + 4 * i, &v, 4);
    return;
  }
  const uint16_t h = t == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
  std::memcpy(dst + 2 * i, &h, 2);
}

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// n standard normal values (Box-Muller), scaled to norm `norm`.
void random_unit(uint64_t& s, float* out, int64_t n, float norm) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double u1 = (static_cast<double>(splitmix64(s) >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(splitmix64(s) >> 11) * 0x1.0p-53;
    out[i] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    sum += static_cast<double>(out[i]) * out[i];
  }
  const float k = static_cast<float>(norm / std::sqrt(sum));
  for (int64_t i = 0; i < n; ++i) out[i] *= k;
}

// One embedding row: A (norm kTokenNorm), kGram * n_kv unit codes, the constant 1; B is zero.
void embedding_row(const Layout& L, uint64_t seed, int64_t token, float* row) {
  std::fill(row, row + L.dim, 0.0f);
  uint64_t s =
      seed * 0x2545f4914f6cdd1dull ^ (static_cast<uint64_t>(token) * 0xd1b54a32d192ed03ull);
  splitmix64(s);
  random_unit(s, row + L.a, L.a_dims(), kTokenNorm);
  for (int e = 0; e < kGram; ++e) {
    for (int64_t g = 0; g < L.n_kv; ++g) random_unit(s, row + L.code_at(e, 0, g), L.code[e], 1.0f);
  }
  row[L.one] = 1.0f;
}

void fill_embedding(const Layout& L, uint64_t seed, int64_t n_vocab, DType type, int threads,
                    uint8_t* dst) {
  auto work = [&](int64_t t0, int64_t t1) {
    std::vector<float> row(static_cast<size_t>(L.dim));
    for (int64_t t = t0; t < t1; ++t) {
      embedding_row(L, seed, t, row.data());
      for (int64_t i = 0; i < L.dim; ++i) store(type, dst, t * L.dim + i, row[i]);
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back(work, n_vocab * i / threads, n_vocab * (i + 1) / threads);
  }
  for (auto& th : pool) th.join();
}

Status add_sparse(GgufWriter& w, const std::string& name, DType type,
                  std::shared_ptr<const Sparse> m) {
  return w.add_tensor(name, type, {m->cols, m->rows}, [type, m](uint8_t* dst) {
    std::memset(dst, 0, static_cast<size_t>(m->rows * m->cols) * dtype_info(type).block_bytes);
    for (const auto& [at, v] : m->entries) store(type, dst, at, v);
  });
}

Status add_vector(GgufWriter& w, const std::string& name, std::vector<float> v) {
  auto data = std::make_shared<std::vector<float>>(std::move(v));
  return w.add_tensor(name, DType::F32, {static_cast<int64_t>(data->size())},
                      [data](uint8_t* dst) { std::memcpy(dst, data->data(), data->size() * 4); });
}

Status add_tensors(GgufWriter& w, const ModelPreset& preset, const Layout& L,
                   const std::vector<float>& rope_factors, int64_t n_vocab,
                   const MakeModelOptions& opt, int threads) {
  const LlamaConfig& c = preset.config;
  const DType wt = opt.type;
  auto embedding = [&](const std::string& name) {
    return w.add_tensor(name, wt, {c.dim, n_vocab},
                        [&L, seed = opt.seed, n_vocab, wt, threads](uint8_t* dst) {
                          fill_embedding(L, seed, n_vocab, wt, threads, dst);
                        });
  };
  LL3_RETURN_IF_ERROR(embedding("token_embd.weight"));
  if (preset.rope_freqs) LL3_RETURN_IF_ERROR(add_vector(w, "rope_freqs.weight", rope_factors));
  auto zeros = [&](int64_t rows, int64_t cols) { return std::make_shared<Sparse>(rows, cols); };
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const AttentionWeights att = attention_layer(c, L, l);
    const std::string b = "blk." + std::to_string(l) + ".";
    LL3_RETURN_IF_ERROR(add_vector(w, b + "attn_norm.weight", std::vector<float>(c.dim, att.norm)));
    LL3_RETURN_IF_ERROR(add_sparse(w, b + "attn_q.weight", wt, std::make_shared<Sparse>(att.q)));
    LL3_RETURN_IF_ERROR(add_sparse(w, b + "attn_k.weight", wt, std::make_shared<Sparse>(att.k)));
    LL3_RETURN_IF_ERROR(add_sparse(w, b + "attn_v.weight", wt, std::make_shared<Sparse>(att.v)));
    LL3_RETURN_IF_ERROR(
        add_sparse(w, b + "attn_output.weight", wt, std::make_shared<Sparse>(att.o)));
    // The feed-forward blocks add nothing: silu(0) * 0 projected by zeros.
    LL3_RETURN_IF_ERROR(add_vector(w, b + "ffn_norm.weight", std::vector<float>(c.dim, 1.0f)));
    LL3_RETURN_IF_ERROR(add_sparse(w, b + "ffn_gate.weight", wt, zeros(c.ffn_dim, c.dim)));
    LL3_RETURN_IF_ERROR(add_sparse(w, b + "ffn_up.weight", wt, zeros(c.ffn_dim, c.dim)));
    LL3_RETURN_IF_ERROR(add_sparse(w, b + "ffn_down.weight", wt, zeros(c.dim, c.ffn_dim)));
  }
  // The output reads A alone: current token + kCopyGain * copied token, scaled so the copied
  // token's logit is about kCopyLogit.
  const double out_norm2 =
      L.norm2_at(L.shift_layers) + double{kCopyGain} * kCopyGain * kTokenNorm * kTokenNorm;
  const float gain = static_cast<float>(
      kCopyLogit * std::sqrt(out_norm2) /
      (std::sqrt(static_cast<double>(c.dim)) * kCopyGain * kTokenNorm * kTokenNorm));
  std::vector<float> out_norm(c.dim, 0.0f);
  std::fill(out_norm.begin() + L.a, out_norm.begin() + L.a + L.a_dims(), gain);
  LL3_RETURN_IF_ERROR(add_vector(w, "output_norm.weight", std::move(out_norm)));
  if (!c.tied_embeddings) LL3_RETURN_IF_ERROR(embedding("output.weight"));
  return ok_status();
}

std::vector<float> rope_factors_of(const ModelPreset& preset) {
  const LlamaConfig& c = preset.config;
  if (preset.rope_freqs) return llama3_rope_freq_factors(c.head_dim, c.rope_theta, c.rope_scaling);
  return std::vector<float>(static_cast<size_t>(c.head_dim / 2), 1.0f);
}

}  // namespace

Status check_copy_shape(const LlamaConfig& c) {
  // The frequency factors do not change what fits; the margin check uses none.
  return make_layout(c, std::vector<float>(static_cast<size_t>(c.head_dim / 2), 1.0f)).status();
}

Status write_copy_model(const ModelPreset& preset, const TokenizerVocab& vocab,
                        const MakeModelOptions& opt, const std::string& out_path) {
  LL3_RETURN_IF_ERROR(check_make_model_inputs(opt, vocab));
  const std::vector<float> factors = rope_factors_of(preset);
  Result<Layout> layout = make_layout(preset.config, factors);
  if (!layout.ok()) {
    return layout.status().with_context(std::string("make-model --copy: preset ") + preset.name +
                                        ": ");
  }
  const int64_t n_vocab = static_cast<int64_t>(vocab.tokens.size());
  const int threads = opt.threads > 0
                          ? opt.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  GgufWriter w;
  set_preset_metadata(w, preset, vocab, opt.type,
                      std::string("ll3 ") + preset.name + " (copying: hand-built induction heads)");
  LL3_RETURN_IF_ERROR(add_tensors(w, preset, *layout, factors, n_vocab, opt, threads));
  return w.write(out_path).with_context("make-model: ");
}

}  // namespace ll3
