// ll3-cuda-runner-bench: the GPU forward pass (backend/cuda/cuda_runner.h) on a model of the
// llama3.1-8b shape (32 layers, dim 4096, 32 heads over 8 KV heads, FFN 14336, vocabulary
// 128256) with random weights, written here for each weight type and deleted after: pp512 (one
// step of 512 tokens), tg128 (128 steps of one token after it), the weight bytes a decode step
// streams per second against the card's copy and read bandwidths, and aggregate decode with 1, 8,
// 32 and 128 sequences; for the first type also tg128 and 32-sequence decode with CUDA graphs
// (GpuRunnerOptions::graphs) against op by op. Then, for the first type, llama-bench's -ngl sweep: pp512 and tg32 with the
// last N layers on the GPU and the others on the CPU (backend/split_runner.h).
// scripts/gpu-check.sh prints its tables.
//
//   ll3-cuda-runner-bench [DIR] [TYPES] [NGL]   DIR for the model files (default /tmp), TYPES a
//                                               comma-separated list (default f16,bf16,q8_0,q4_k;
//                                               a FILE.gguf of the 8B shape is run as it is, kept),
//                                               NGL the sweep's layer counts (default 24,16,8)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_runner.h"
#include "backend/split_runner.h"
#include "kernels/cuda/cuda_ops.h"
#include "core/thread_pool.h"
#include "io/gguf_writer.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"

namespace {

using namespace ll3;

constexpr int64_t kDim = 4096, kLayers = 32, kHeads = 32, kKvHeads = 8, kFfn = 14336, kVocab = 128256;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Random bytes below 64 in every weight: a valid value of each type (F16 / BF16 exponents and
// block scales stay small and finite), made on all cores.
void fill_random(uint8_t* p, size_t n, uint32_t seed) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t) {
    ts.emplace_back([=] {
      const size_t b = n * t / threads, e = n * (t + 1) / threads;
      uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1) + t;
      for (size_t i = b; i < e; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = static_cast<uint8_t>(x & 0x3F);
      }
    });
  }
  for (std::thread& t : ts) t.join();
}

Status write_model(const std::string& path, DType type) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "llama3.1-8b-shape-random");
  w.set_u32("llama.embedding_length", kDim);
  w.set_u32("llama.block_count", kLayers);
  w.set_u32("llama.attention.head_count", kHeads);
  w.set_u32("llama.attention.head_count_kv", kKvHeads);
  w.set_u32("llama.feed_forward_length", kFfn);
  w.set_u32("llama.context_length", 8192);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32("llama.rope.freq_base", 500000.0f);
  uint32_t seed = 0;
  auto matrix = [&](const std::string& name, int64_t cols, int64_t rows, DType t) {
    const size_t bytes = dtype_row_bytes(t, cols) * static_cast<size_t>(rows);
    return w.add_tensor(name, t, {cols, rows}, [bytes, s = seed++](uint8_t* dst) { fill_random(dst, bytes, s); });
  };
  auto norm = [&](const std::string& name) {
    return w.add_tensor(name, DType::F32, {kDim}, [](uint8_t* dst) {
      std::vector<float> one(kDim, 1.0f);
      std::copy(one.begin(), one.end(), reinterpret_cast<float*>(dst));
    });
  };
  LL3_RETURN_IF_ERROR(matrix("token_embd.weight", kDim, kVocab, type));
  LL3_RETURN_IF_ERROR(norm("output_norm.weight"));
  LL3_RETURN_IF_ERROR(matrix("output.weight", kDim, kVocab, type));
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    LL3_RETURN_IF_ERROR(norm(b + "attn_norm.weight"));
    LL3_RETURN_IF_ERROR(norm(b + "ffn_norm.weight"));
    LL3_RETURN_IF_ERROR(matrix(b + "attn_q.weight", kDim, kHeads * 128, type));
    LL3_RETURN_IF_ERROR(matrix(b + "attn_k.weight", kDim, kKvHeads * 128, type));
    LL3_RETURN_IF_ERROR(matrix(b + "attn_v.weight", kDim, kKvHeads * 128, type));
    LL3_RETURN_IF_ERROR(matrix(b + "attn_output.weight", kHeads * 128, kDim, type));
    LL3_RETURN_IF_ERROR(matrix(b + "ffn_gate.weight", kDim, kFfn, type));
    LL3_RETURN_IF_ERROR(matrix(b + "ffn_up.weight", kDim, kFfn, type));
    LL3_RETURN_IF_ERROR(matrix(b + "ffn_down.weight", kFfn, kDim, type));
  }
  return w.write(path);
}

// Steps of `seqs` sequences (ids first.. first + seqs - 1, kSeqBlocks blocks each), n_new
// tokens each at position n_past, logits of every sequence's last row; the seconds it took.
constexpr int kSeqBlocks = 48;  // 768 positions: pp512 + tg128
struct Stepper {
  ModelRunner& r;
  std::vector<float> logits;
  std::vector<int32_t> tables;  // sequence s owns blocks kSeqBlocks s .. kSeqBlocks (s + 1) - 1
  explicit Stepper(ModelRunner& runner) : r(runner), logits(static_cast<size_t>(128) * kVocab), tables(128 * kSeqBlocks) {
    for (size_t i = 0; i < tables.size(); ++i) tables[i] = static_cast<int32_t>(i);
  }
  double step(int first, int seqs, int n_new, int n_past) {
    std::vector<int32_t> tokens;
    std::vector<SeqBatch> sb(static_cast<size_t>(seqs));
    std::vector<int32_t> rows;
    for (int s = 0; s < seqs; ++s) {
      sb[s].n_past = n_past;
      sb[s].token_begin = static_cast<int32_t>(tokens.size());
      sb[s].n_tokens = n_new;
      sb[s].block_table = std::span<const int32_t>(&tables[static_cast<size_t>(first + s) * kSeqBlocks], kSeqBlocks);
      for (int i = 0; i < n_new; ++i) tokens.push_back((first + s) * 7919 % kVocab + i);
      rows.push_back(static_cast<int32_t>(tokens.size()) - 1);
    }
    BatchPlan p;
    p.tokens = tokens;
    p.seqs = sb;
    p.logit_rows = rows;
    const double t0 = now();
    Status st = r.forward(p, logits.data());
    if (!st.ok()) {
      std::fprintf(stderr, "ll3-cuda-runner-bench: %s\n", st.message().c_str());
      std::exit(1);
    }
    return now() - t0;
  }
};

// The fastest of five runs of `pass` after a warm-up, in seconds (0 when it fails).
template <class F>
double best_of_five(F pass) {
  double best = 1e30;
  for (int i = 0; i < 6; ++i) {
    cudaDeviceSynchronize();
    const double t0 = now();
    if (!pass()) return 0;
    cudaDeviceSynchronize();
    if (i > 0) best = std::min(best, now() - t0);
  }
  return best;
}

constexpr size_t kProbeBytes = size_t{2} << 30;

// Bytes read and written per second by a device-to-device copy of 2 GiB.
double copy_bandwidth() {
  void *a = nullptr, *b = nullptr;
  double s = 0;
  if (cudaMalloc(&a, kProbeBytes) == cudaSuccess && cudaMalloc(&b, kProbeBytes) == cudaSuccess) {
    cudaMemset(a, 1, kProbeBytes);
    s = best_of_five([&] { return cudaMemcpy(b, a, kProbeBytes, cudaMemcpyDeviceToDevice) == cudaSuccess; });
  }
  cudaFree(a);
  cudaFree(b);
  return s > 0 ? 2.0 * kProbeBytes / s / 1e9 : 0;
}

// Bytes read per second by cuda::read_probe over 2 GiB, 16 blocks per multiprocessor.
double read_bandwidth() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int blocks = 16 * std::max(1, sms);
  void *a = nullptr, *out = nullptr;
  double s = 0;
  if (cudaMalloc(&a, kProbeBytes) == cudaSuccess && cudaMalloc(&out, blocks * sizeof(uint32_t)) == cudaSuccess) {
    cudaMemset(a, 1, kProbeBytes);
    cudaMemset(out, 0, blocks * sizeof(uint32_t));
    s = best_of_five([&] { return cuda::read_probe(a, kProbeBytes, static_cast<uint32_t*>(out), blocks, nullptr).ok(); });
  }
  cudaFree(a);
  cudaFree(out);
  return s > 0 ? kProbeBytes / s / 1e9 : 0;
}

// pp512 and tg32 of the model split at each -ngl of `list`, one row each.
void ngl_sweep(const LlamaModel& m, KvCache& kv, const std::string& name, const std::string& list) {
  ThreadPool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  std::printf("\n-ngl sweep, %s: the first layers on the CPU (%d threads)\n\n| weights | -ngl | pp512 t/s | tg32 t/s | where |\n"
              "|---|---|---|---|---|\n", name.c_str(), pool.size());
  std::fflush(stdout);
  std::stringstream counts(list);
  for (std::string n; std::getline(counts, n, ',');) {
    GpuRunnerOptions go;
    go.max_batch_tokens = 512;
    go.gpu_layers = std::atoi(n.c_str());
    Result<GpuPart> part = make_cuda_runner(m, kv, go);
    if (!part.ok()) {
      std::printf("| %s | %s | - | - | %s |\n", name.c_str(), n.c_str(), part.message().c_str());
      continue;
    }
    RunnerOptions ro;
    ro.max_batch_tokens = 512;
    std::unique_ptr<ModelRunner> r = with_cpu_parts(std::move(part.value()), m, kv, pool, ro);
    Stepper s(*r);
    s.step(0, 1, 512, 0);  // warm-up
    const double pp = s.step(0, 1, 512, 0);
    double tg = 0;
    for (int i = 0; i < 32; ++i) tg += s.step(0, 1, 1, 512 + i);
    std::printf("| %s | %s | %.0f | %.1f | %s |\n", name.c_str(), n.c_str(), 512 / pp, 32 / tg, r->where().c_str());
    std::fflush(stdout);
  }
}

// tg128 and 32-sequence decode of `m` with CUDA graphs, one line beside the op-by-op figures.
void with_graphs(const LlamaModel& m, KvCache& kv, const std::string& name, double tg_plain, double agg32_plain) {
  GpuRunnerOptions go;
  go.max_batch_tokens = 512;
  go.graphs = true;
  Result<GpuPart> part = make_cuda_runner(m, kv, go);
  if (!part.ok()) {
    std::printf("\nCUDA graphs, %s: %s\n", name.c_str(), part.message().c_str());
    return;
  }
  Stepper s(*part.value().runner);
  s.step(0, 1, 512, 0);
  double tg = 0;
  for (int i = 0; i < 128; ++i) tg += s.step(0, 1, 1, 512 + i);
  s.step(0, 32, 16, 0);  // 16-token prompts of sequences 0..31
  double t32 = 0;
  for (int i = 0; i < 16; ++i) t32 += s.step(0, 32, 1, 16 + i);
  std::printf("\nCUDA graphs (LL3_CUDA_GRAPHS=1), %s: tg128 %.1f t/s (op by op %.1f), 32 sequences %.0f t/s (op by op %.0f)\n",
              name.c_str(), 128 / tg, tg_plain, 32 * 16 / t32, agg32_plain);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "/tmp";
  std::string list = argc > 2 ? argv[2] : "f16,bf16,q8_0,q4_k";
  const std::string sweep = argc > 3 ? argv[3] : "24,16,8";
  std::string why;
  const auto devs = cuda_devices(&why);
  if (devs.empty()) {
    std::printf("ll3-cuda-runner-bench: no CUDA device (%s)\n", why.c_str());
    return 1;
  }
  const double copy = copy_bandwidth(), read = read_bandwidth();
  // Each row as soon as it is measured, so that a run cut short still reports what it did.
  std::printf("\nllama3.1-8b shape, random weights, %s; copy bandwidth %.0f GB/s (read + write), read %.0f GB/s\n\n",
              devs[0].name.c_str(), copy, read);
  std::printf("| weights | pp512 t/s | tg128 t/s | decode GB/s | %% of copy | %% of read | 1 seq t/s | 8 | 32 | 128 | 128 / 1 | "
              "write / upload |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  std::stringstream types(list);
  bool first = true;  // the graphs line and the -ngl sweep: for the first model only
  for (std::string name; std::getline(types, name, ','); first = false) {
    const bool given = name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0;  // a file, as it is
    DType type = DType::F16;
    if (name == "bf16") type = DType::BF16;
    else if (name == "q8_0") type = DType::Q8_0;
    else if (name == "q4_k") type = DType::Q4_K;
    else if (name != "f16" && !given) {
      std::fprintf(stderr, "ll3-cuda-runner-bench: unknown type %s\n", name.c_str());
      return 2;
    }
    const std::string path = given ? name : dir + "/ll3-8b-" + name + ".gguf";
    if (given) name = std::filesystem::path(name).filename().string();
    double t0 = now();
    if (Status st = given ? Status() : write_model(path, type); !st.ok()) {
      std::fprintf(stderr, "ll3-cuda-runner-bench: %s\n", st.message().c_str());
      return 1;
    }
    const double t_write = now() - t0;
    LoadOptions lo;
    lo.weights = WeightMemory::kMap;
    lo.decode_panels = false;
    Result<std::unique_ptr<LlamaModel>> m = LlamaModel::load(path, lo);
    if (!m.ok()) {
      std::fprintf(stderr, "ll3-cuda-runner-bench: %s\n", m.message().c_str());
      return 1;
    }
    KvCacheConfig kc;
    kc.n_layers = kLayers;
    kc.n_kv_heads = kKvHeads;
    kc.head_dim = 128;
    kc.block_size = 16;
    kc.n_blocks = 128 * kSeqBlocks;  // 128 sequences
    kc.type = DType::F16;
    Result<std::unique_ptr<KvCache>> kv = KvCache::create(kc);
    if (!kv.ok()) {
      std::fprintf(stderr, "ll3-cuda-runner-bench: %s\n", kv.message().c_str());
      return 1;
    }
    GpuRunnerOptions go;
    go.max_batch_tokens = 512;
    t0 = now();
    Result<GpuPart> part = make_cuda_runner(**m, **kv, go);
    if (!part.ok()) {
      std::fprintf(stderr, "ll3-cuda-runner-bench: %s\n", part.message().c_str());
      return 1;
    }
    std::unique_ptr<ModelRunner> r = std::move(part.value().runner);
    const double t_upload = now() - t0;
    Stepper s(*r);
    s.step(0, 1, 512, 0);  // warm-up
    std::vector<double> pp;
    for (int i = 0; i < 3; ++i) pp.push_back(s.step(0, 1, 512, 0));
    std::sort(pp.begin(), pp.end());
    double tg = 0;
    for (int i = 0; i < 128; ++i) tg += s.step(0, 1, 1, 512 + i);
    const double gbs = static_cast<double>((*m)->bytes_per_token()) * 128 / tg / 1e9;
    char row[512];
    int len = std::snprintf(row, sizeof row, "| %s | %.0f | %.1f | %.0f | %.0f%% | %.0f%% |", name.c_str(), 512 / pp[1],
                            128 / tg, gbs, copy > 0 ? 100 * gbs / copy : 0.0, read > 0 ? 100 * gbs / read : 0.0);
    double agg[4] = {0, 0, 0, 0};
    const int counts[4] = {1, 8, 32, 128};
    for (int k = 0; k < 4; ++k) {
      const int n = counts[k];
      for (int first = 0; first < n; first += 32) s.step(first, std::min(32, n - first), 16, 0);  // 16-token prompts
      double t = 0;
      for (int i = 0; i < 16; ++i) t += s.step(0, n, 1, 16 + i);
      agg[k] = n * 16 / t;
      len += std::snprintf(row + len, sizeof row - len, " %.0f |", agg[k]);
    }
    std::snprintf(row + len, sizeof row - len, " %.1fx | %.0f s / %.0f s |", agg[3] / agg[0], t_write, t_upload);
    std::printf("%s\n", row);
    std::fflush(stdout);
    std::fprintf(stderr, "ll3-cuda-runner-bench: %s done (%s)\n", name.c_str(), r->where().c_str());
    r.reset();  // its device memory, before the next runner's
    if (first) {
      with_graphs(**m, **kv, name, 128 / tg, agg[2]);
      if (!sweep.empty()) ngl_sweep(**m, **kv, name, sweep);
    }
    if (!given) std::filesystem::remove(path);
  }
  return 0;
}
