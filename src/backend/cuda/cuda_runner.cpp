// The forward pass on a CUDA device (backend/cuda/cuda_runner.h), the CPU runner's steps
// (backend/cpu/cpu_runner.cpp) op by op on one stream:
//
//   x = embedding(tokens)                                  on the host, one row per token
//   per layer:  xb = rmsnorm(x)        q, k, v = Wq xb, Wk xb, Wv xb     RoPE(q), RoPE(k)
//               cache[slot] = k, v     att = attention(q, cache)          x += Wo att
//               xb = rmsnorm(x)        x += W_down (silu(W_gate xb) * W_up xb)
//   logits = W_out rmsnorm(x[logit rows])
//
// Every product, of one row or of a whole prompt, runs one batch-invariant kernel on the tensor
// cores (cuda::matmul_mma: activations rounded to F16 / BF16, F32 sums, quantized weights
// scaled per chunk), so that a sequence's tokens never depend on what else shares its step.
// F32 weights, and widths that kernel does not take, run the F32 GEMV in passes of
// kMaxGemvBatch rows, which is as invariant (each row is computed alone). Weight types neither
// reads are dequantized to F16 at load.
//
// With fewer layers than the model's (-ngl N, backend/split_runner.h) the runner holds layers
// [first_, n_layers) and maybe the output layer: its step starts from the residual stream the
// CPU computed (forward_part's x_in) and, without the output layer, hands the stream back.
//
// With LL3_CUDA_GRAPHS=1 (GpuRunnerOptions::graphs) a step of up to 64 rows replays a CUDA graph
// of its layers, captured once per bucket of rows (backend/graph_buckets.h) on the bucket's
// second use; the bucket's extra rows write a scratch KV block past the engine's.
//
// The KV cache lives twice: the engine's host KvCache stays the one of record (prefix sharing,
// copy on write and session files read and write it), and the device holds a mirror. Before a
// step, blocks the host changed since the device last saw them (KvCache::version) are uploaded;
// after it, the step's new K / V rows come back into the host cache.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_runner.h"
#include "backend/graph_buckets.h"
#include "core/half.h"
#include "kernels/cuda/cuda_ops.h"

namespace ll3 {

namespace {

Status cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status();
  cudaGetLastError();  // clear it, so that the next call does not report it again
  return Status::errorf("cuda %s: %s", what, cudaGetErrorString(e));
}

// Every device and pinned host allocation of a runner, freed together.
class Allocations {
 public:
  Allocations() = default;
  Allocations(const Allocations&) = delete;
  Allocations& operator=(const Allocations&) = delete;
  ~Allocations() {
    for (void* p : device_) cudaFree(p);
    for (void* p : pinned_) cudaFreeHost(p);
  }
  template <class T>
  Status device(T** p, size_t n, const char* what) {
    void* v = nullptr;
    const size_t bytes = std::max<size_t>(1, n) * sizeof(T);
    if (cudaMalloc(&v, bytes) != cudaSuccess) {
      cudaGetLastError();
      return Status::errorf("cuda: out of device memory for %s (%.1f MiB)", what, bytes / 1048576.0);
    }
    device_.push_back(v);
    *p = static_cast<T*>(v);
    return Status();
  }
  template <class T>
  Status pinned(T** p, size_t n, const char* what) {
    void* v = nullptr;
    const size_t bytes = std::max<size_t>(1, n) * sizeof(T);
    if (cudaMallocHost(&v, bytes) != cudaSuccess) {
      cudaGetLastError();
      return Status::errorf("cuda: cannot pin %.1f MiB of host memory for %s", bytes / 1048576.0, what);
    }
    pinned_.push_back(v);
    *p = static_cast<T*>(v);
    return Status();
  }

 private:
  std::vector<void*> device_, pinned_;
};

// A weight matrix on the device, row-major in `type`'s own layout (Q8_0 for the tensor cores in
// that kernel's layout, cuda::q8_0_split).
struct DevMatrix {
  DType type = DType::F16;
  int64_t rows = 0, cols = 0;
  bool mma = false;  // cuda::matmul_mma, else the GEMV
  const void* w = nullptr;
};

// The kernels' type for W on the device: as stored where a kernel reads it, else F16. The Q5_K
// and Q6_K tensor-core loaders have not run on a GPU yet: in place only with q5_q6_in_place.
DType device_type(const WeightMatrix& W, bool q5_q6_in_place) {
  if ((W.type == DType::Q5_K || W.type == DType::Q6_K) && !q5_q6_in_place) return DType::F16;
  const bool as_stored = cuda::matmul_mma_supported(W.type, W.cols) ||
                         (cuda::gemv_supported(W.type) && W.cols % 32 == 0 && (W.type != DType::Q4_K || W.cols % 256 == 0));
  return as_stored ? W.type : DType::F16;
}

// An allocation's bytes as cudaMalloc takes them: large ones in 2 MiB pages.
int64_t allocated(int64_t bytes) {
  constexpr int64_t kPage = int64_t{2} << 20;
  return (bytes + kPage - 1) / kPage * kPage;
}

int64_t device_bytes(const WeightMatrix& W, bool q5_q6_in_place) {
  // Q8_0's split form is as large as its blocks.
  return allocated(static_cast<int64_t>(dtype_row_bytes(device_type(W, q5_q6_in_place), W.cols)) * W.rows);
}

struct DevLayer {
  float* attn_norm = nullptr;
  float* ffn_norm = nullptr;
  DevMatrix wq, wk, wv, wo, gate, up, down;
  uint16_t* k = nullptr;  // [n_blocks][block_size][n_kv_heads][head_dim] F16
  uint16_t* v = nullptr;
};

class CudaRunner final : public ModelRunner {
 public:
  CudaRunner(const LlamaModel& m, KvCache& kv) : m_(m), c_(m.config), kv_(kv) {}
  ~CudaRunner() override {
    for (Graph& g : graphs_by_bucket_) {
      if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);
    }
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Status init(const GpuRunnerOptions& o);
  int64_t max_batch_tokens() const override { return max_tokens_; }
  Status forward(const BatchPlan& plan, float* logits, float* hidden) override {
    return forward_part(plan, nullptr, nullptr, logits, hidden);
  }
  Status forward_part(const BatchPlan& plan, const float* x_in, float* x_out, float* logits, float* hidden) override;
  std::string where() const override { return where_; }
  const GpuPlacement& placement() const { return placement_; }
  int64_t host_weight_layers() const { return host_layers_; }

 private:
  Status upload_norm(const std::vector<float>& w, float** d);
  Status upload_matrix(const WeightMatrix& W, DevMatrix* d, bool pinned_host);
  Status sync_blocks(const BatchPlan& plan);
  Status matmul(const DevMatrix& M, const float* x, int64_t n, float* y);
  GpuNeeds needs(int64_t T, bool host_weights, bool split_attention) const;
  Status place(const GpuRunnerOptions& o);
  Status upload_weights(const Logger& log);
  Status allocate_scratch(bool split_attention);
  std::string describe(int device, const std::string& name) const;
  Status step(const BatchPlan& plan, const float* x_in, float* x_out, float* logits, float* hidden);
  Status layer(int64_t l, int64_t T, int64_t width);
  Status layers(int64_t T, int64_t width);
  Status layers_by_graph(int64_t bucket);
  // Split attention's chunks for the longest sequence the block tables hold.
  int64_t attention_chunks() const {
    return (table_cap_ * kv_.config().block_size + kAttentionChunk - 1) / kAttentionChunk;
  }
  static constexpr int kAttentionChunk = 512;
  Status download_kv(const BatchPlan& plan, int64_t T);

  const LlamaModel& m_;
  const LlamaConfig& c_;
  KvCache& kv_;
  Allocations mem_;
  cudaStream_t stream_ = nullptr;
  std::string where_;
  int64_t max_tokens_ = 0, q_dim_ = 0, kv_dim_ = 0, table_cap_ = 0;
  std::set<std::string> converted_;  // weight types dequantized to F16 at load
  GpuPlacement placement_;
  Logger log_;
  bool graphs_ = false;  // GpuRunnerOptions::graphs
  bool q5q6_ = false;     // GpuRunnerOptions::q5_q6_in_place
  cuda::AttentionSplit split_;  // GpuRunnerOptions::split_attention: chunks of kAttentionChunk positions
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    int uses = 0;
  };
  Graph graphs_by_bucket_[std::size(kGraphBuckets)];
  int64_t first_ = 0;      // the first layer on the device
  int64_t host_layers_ = 0;  // layers [0, this) on the device with their weights in pinned host memory
  int64_t n_local_ = 0;    // layers on the device: n_layers - first_

  std::vector<DevLayer> layers_;  // (n_layers), those from first_ on filled
  DevMatrix output_;
  float* output_norm_ = nullptr;
  float* rope_factors_ = nullptr;
  std::vector<uint64_t> synced_;  // per KV block: the host version the device copy holds

  // Device scratch, T = max_tokens_.
  float *x_ = nullptr, *xb_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *att_ = nullptr;
  float *proj_ = nullptr, *gate_ = nullptr, *up_ = nullptr, *logits_ = nullptr;
  uint16_t* kv_new_ = nullptr; // (2, n_local_, T, kv_dim) F16: this step's K and V rows
  int32_t* meta_ = nullptr;    // positions, slots, attended lengths, logit rows, block tables, hidden rows
  // Pinned host staging for the same.
  float* h_x_ = nullptr;       // (T, dim) the residual stream in (embeddings or the CPU's layers) or out
  float* h_logits_ = nullptr;
  float* h_hidden_ = nullptr;  // (T, dim) final normed rows (BatchPlan::hidden_rows)
  uint16_t* h_kv_new_ = nullptr;
  int32_t* h_meta_ = nullptr;
  std::vector<uint8_t> row_buf_;  // an embedding row unpacked from its panel
};

Status CudaRunner::init(const GpuRunnerOptions& o) {
  const KvCacheConfig& kc = kv_.config();
  if (kc.type != DType::F16) {
    return Status::errorf("the CUDA backend keeps an F16 KV cache, not %s (use --kv-type f16)",
                          std::string(dtype_name(kc.type)).c_str());
  }
  if (c_.head_dim % 32 != 0 || c_.head_dim > 256) {
    return Status::errorf("the CUDA attention kernel takes head sizes that are multiples of 32 up to 256, not %lld",
                          static_cast<long long>(c_.head_dim));
  }
  if (c_.dim % 32 != 0 || c_.ffn_dim % 32 != 0) return Status::error("the CUDA kernels need widths that are multiples of 32");
  std::string why;
  const std::vector<CudaDeviceInfo> devs = cuda_devices(&why);
  if (devs.empty()) return Status::error("no CUDA device: " + why);
  if (o.device < 0 || o.device >= static_cast<int>(devs.size())) return Status::errorf("no CUDA device %d", o.device);
  LL3_RETURN_IF_ERROR(cuda_check(cudaSetDevice(o.device), "set device"));
  LL3_RETURN_IF_ERROR(cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream"));

  max_tokens_ = std::max<int64_t>(1, o.max_batch_tokens);
  q_dim_ = c_.n_heads * c_.head_dim;
  kv_dim_ = c_.n_kv_heads * c_.head_dim;
  const int64_t positions = std::min<int64_t>(c_.context_length, kv_.capacity_tokens());
  table_cap_ = std::min<int64_t>(kc.n_blocks, (positions + kc.block_size - 1) / kc.block_size + 1);

  q5q6_ = o.q5_q6_in_place;
  LL3_RETURN_IF_ERROR(place(o));
  graphs_ = o.graphs;
  log_ = o.log;
  LL3_RETURN_IF_ERROR(upload_weights(o.log));

  // The KV mirror, every block of the device's layers, and block n_blocks for a graph's padding rows.
  const size_t kv_elems = static_cast<size_t>((kc.n_blocks + 1) * kc.block_size * kv_dim_);
  for (int64_t l = first_; l < c_.n_layers; ++l) {
    LL3_RETURN_IF_ERROR(mem_.device(&layers_[l].k, kv_elems, "the KV cache"));
    LL3_RETURN_IF_ERROR(mem_.device(&layers_[l].v, kv_elems, "the KV cache"));
  }
  synced_.assign(static_cast<size_t>(kc.n_blocks), ~uint64_t{0});  // nothing synced yet
  LL3_RETURN_IF_ERROR(allocate_scratch(o.split_attention));
  LL3_RETURN_IF_ERROR(cuda_check(cudaStreamSynchronize(stream_), "upload"));

  const CudaDeviceInfo& d = devs[static_cast<size_t>(o.device)];
  where_ = describe(o.device, d.name);
  return Status();
}

// Which layers: as many as asked for that fit in the memory free (less what the CUDA context and
// the allocator's rounding take) or in --gpu-memory.
Status CudaRunner::place(const GpuRunnerOptions& o) {
  size_t free_bytes = 0, total_bytes = 0;
  LL3_RETURN_IF_ERROR(cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "memory info"));
  constexpr int64_t kReserve = int64_t{512} << 20;
  int64_t budget = std::max<int64_t>(0, static_cast<int64_t>(free_bytes) - kReserve);
  if (o.memory_cap > 0) budget = std::min(budget, o.memory_cap);
  // With host weights, the layers placed off the device still run on it: only their weights stay
  // on the host, so every layer's KV mirror is in the fixed part.
  const GpuNeeds need = needs(max_tokens_, o.host_weights_pinned, o.split_attention);
  Result<GpuPlacement> placed = place_on_gpu(need, budget, o.gpu_layers);
  if (!placed.ok()) return placed.status();
  placement_ = placed.value();
  if (o.output_on_cpu && placement_.output) {
    placement_.output = false;
    placement_.bytes -= need.output_bytes;
  }
  if (o.host_weights_pinned) {
    host_layers_ = placement_.first_layer;
    placement_.first_layer = 0;
  } else if (o.gpu_layers < 0 && (placement_.first_layer > 0 || !placement_.output)) {
    // The default takes the GPU only whole, the path verified on a GPU; a split is asked for.
    const long long fit = c_.n_layers - placement_.first_layer;
    return Status::errorf("the model needs %s of device memory and %s is available: -ngl %lld fits (the last %lld "
                          "layers on the GPU, the others on the CPU)",
                          gib(place_on_gpu(need, std::numeric_limits<int64_t>::max(), -1).value().bytes).c_str(),
                          gib(budget).c_str(), fit, fit);
  }
  first_ = placement_.first_layer;
  n_local_ = c_.n_layers - first_;
  return Status();
}

// The device's layers' weights (and the output layer's when it is the device's), uploaded once.
Status CudaRunner::upload_weights(const Logger& log) {
  layers_.resize(static_cast<size_t>(c_.n_layers));
  for (int64_t l = first_; l < c_.n_layers; ++l) {
    const LlamaLayer& L = m_.layers[l];
    DevLayer& D = layers_[l];
    LL3_RETURN_IF_ERROR(upload_norm(L.attn_norm, &D.attn_norm));
    LL3_RETURN_IF_ERROR(upload_norm(L.ffn_norm, &D.ffn_norm));
    const std::pair<const WeightMatrix*, DevMatrix*> mats[] = {{&L.wq, &D.wq},     {&L.wk, &D.wk},     {&L.wv, &D.wv},
                                                               {&L.wo, &D.wo},     {&L.w_gate, &D.gate}, {&L.w_up, &D.up},
                                                               {&L.w_down, &D.down}};
    for (const auto& [W, d] : mats) LL3_RETURN_IF_ERROR(upload_matrix(*W, d, l < host_layers_));
  }
  if (placement_.output) {
    LL3_RETURN_IF_ERROR(upload_matrix(m_.output, &output_, false));
    LL3_RETURN_IF_ERROR(upload_norm(m_.output_norm, &output_norm_));
  }
  LL3_RETURN_IF_ERROR(upload_norm(m_.rope_factors, &rope_factors_));
  if (!converted_.empty()) {
    std::string types;
    for (const std::string& t : converted_) types += (types.empty() ? "" : ", ") + t;
    log.warn("the CUDA kernels do not read " + types + " weights yet: dequantized to F16 on the device");
  }
  return Status();
}

// The step's buffers, T = max_tokens_ rows, on the device and pinned on the host.
Status CudaRunner::allocate_scratch(bool split_attention) {
  const int64_t T = max_tokens_;
  LL3_RETURN_IF_ERROR(mem_.device(&x_, T * c_.dim, "activations"));
  LL3_RETURN_IF_ERROR(mem_.device(&xb_, T * c_.dim, "activations"));
  LL3_RETURN_IF_ERROR(mem_.device(&q_, T * q_dim_, "activations"));
  LL3_RETURN_IF_ERROR(mem_.device(&k_, T * kv_dim_, "activations"));
  LL3_RETURN_IF_ERROR(mem_.device(&v_, T * kv_dim_, "activations"));
  LL3_RETURN_IF_ERROR(mem_.device(&att_, T * q_dim_, "activations"));
  LL3_RETURN_IF_ERROR(mem_.device(&proj_, T * c_.dim, "activations"));
  LL3_RETURN_IF_ERROR(mem_.device(&gate_, T * c_.ffn_dim, "activations"));
  LL3_RETURN_IF_ERROR(mem_.device(&up_, T * c_.ffn_dim, "activations"));
  if (split_attention) {
    split_.chunk = kAttentionChunk;
    split_.max_chunks = static_cast<int>(attention_chunks());
    LL3_RETURN_IF_ERROR(mem_.device(&split_.partials, T * c_.n_heads * split_.max_chunks * (c_.head_dim + 2),
                                    "split attention's partials"));
  }
  if (placement_.output) LL3_RETURN_IF_ERROR(mem_.device(&logits_, T * c_.n_vocab, "logits"));
  const size_t kv_new = static_cast<size_t>(2 * n_local_ * T * kv_dim_);
  LL3_RETURN_IF_ERROR(mem_.device(&kv_new_, kv_new, "new KV rows"));
  const size_t meta = static_cast<size_t>(5 * T + T * table_cap_);
  LL3_RETURN_IF_ERROR(mem_.device(&meta_, meta, "step metadata"));
  LL3_RETURN_IF_ERROR(mem_.pinned(&h_x_, T * c_.dim, "the residual stream"));
  if (placement_.output) LL3_RETURN_IF_ERROR(mem_.pinned(&h_logits_, T * c_.n_vocab, "logits"));
  LL3_RETURN_IF_ERROR(mem_.pinned(&h_hidden_, T * c_.dim, "hidden rows"));
  LL3_RETURN_IF_ERROR(mem_.pinned(&h_kv_new_, kv_new, "new KV rows"));
  LL3_RETURN_IF_ERROR(mem_.pinned(&h_meta_, meta, "step metadata"));
  row_buf_.resize(m_.max_row_bytes());
  return Status();
}

// "cuda:0 NVIDIA H200, 24 of 32 layers (8-31; the CPU runs layers 0-7), 30.1 GiB of device memory"
std::string CudaRunner::describe(int device, const std::string& name) const {
  std::string w = "cuda:" + std::to_string(device) + " " + name + ", " + std::to_string(n_local_) + " of " +
                  std::to_string(c_.n_layers) + " layers";
  if (host_layers_ > 0) {
    w += strprintf(" (the weights of layers 0-%lld read from pinned host memory)", static_cast<long long>(host_layers_ - 1));
  }
  if (first_ > 0 || !placement_.output) {
    w += strprintf(" (%lld-%lld; the CPU runs %s%s), %s of device memory", static_cast<long long>(first_),
                   static_cast<long long>(c_.n_layers - 1),
                   first_ > 0 ? strprintf("layers 0-%lld", static_cast<long long>(first_ - 1)).c_str() : "",
                   placement_.output ? "" : (first_ > 0 ? " and the output layer" : "the output layer"),
                   gib(placement_.bytes).c_str());
  }
  return w;
}

// What each part takes on the device (GpuNeeds): the sizes init() allocates below. With host
// weights a layer's bytes are its weights, and its KV and norms count in the fixed part.
GpuNeeds CudaRunner::needs(int64_t T, bool host_weights, bool split_attention) const {
  const KvCacheConfig& kc = kv_.config();
  GpuNeeds n;
  const int64_t kv_layer = 2 * allocated((kc.n_blocks + 1) * kc.block_size * kv_dim_ * 2);  // K and V mirror, F16
  const int64_t kv_new_layer = 2 * T * kv_dim_ * 2;  // a share of one buffer
  n.fixed_bytes = T * (3 * c_.dim + 2 * q_dim_ + 2 * kv_dim_ + 2 * c_.ffn_dim) * 4 +
                  (5 * T + T * table_cap_) * 4 + static_cast<int64_t>(m_.rope_factors.size()) * 4;
  if (split_attention) n.fixed_bytes += allocated(T * c_.n_heads * attention_chunks() * (c_.head_dim + 2) * 4);
  for (const LlamaLayer& L : m_.layers) {
    const int64_t rest = 2 * allocated(c_.dim * 4) + kv_layer + kv_new_layer;
    int64_t weights = 0;
    for (const WeightMatrix* W : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) weights += device_bytes(*W, q5q6_);
    n.layer_bytes.push_back(host_weights ? weights : weights + rest);
    if (host_weights) n.fixed_bytes += rest;
  }
  n.output_bytes = device_bytes(m_.output, q5q6_) + allocated(c_.dim * 4) + allocated(T * c_.n_vocab * 4);
  return n;
}

Status CudaRunner::upload_norm(const std::vector<float>& w, float** d) {
  LL3_RETURN_IF_ERROR(mem_.device(d, w.size(), "a norm weight"));
  return cuda_check(cudaMemcpy(*d, w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice), "upload");
}

// W in the kernels' layout, on the device or (pinned_host) in pinned host memory, which the
// kernels read over PCIe through its device mapping.
Status CudaRunner::upload_matrix(const WeightMatrix& W, DevMatrix* d, bool pinned_host) {
  d->rows = W.rows;
  d->cols = W.cols;
  d->type = device_type(W, q5q6_);
  const bool as_stored = d->type == W.type;
  if (!as_stored) converted_.insert(std::string(dtype_name(W.type)));
  d->mma = cuda::matmul_mma_supported(d->type, W.cols);
  const bool split = d->mma && d->type == DType::Q8_0;  // levels, then all the rows' scales
  const size_t row_bytes = dtype_row_bytes(d->type, W.cols);
  uint8_t* dev = nullptr;  // where the bytes go: device memory or the pinned host buffer (cudaMemcpyDefault)
  if (pinned_host) {
    LL3_RETURN_IF_ERROR(mem_.pinned(&dev, row_bytes * static_cast<size_t>(W.rows), W.name.c_str()));
    void* mapped = nullptr;
    LL3_RETURN_IF_ERROR(cuda_check(cudaHostGetDevicePointer(&mapped, dev, 0), "host weights"));
    d->w = mapped;
  } else {
    LL3_RETURN_IF_ERROR(mem_.device(&dev, row_bytes * static_cast<size_t>(W.rows), W.name.c_str()));
    d->w = dev;
  }
  // In chunks of whole panels, through host memory: rows unpacked from the decode panels, then
  // dequantized to F16 or (Q8_0) split into levels and scales.
  constexpr int64_t kChunk = 256;
  std::vector<uint8_t> unpacked(W.row_bytes * kChunk), staged(as_stored && !split ? 0 : row_bytes * kChunk);
  std::vector<float> f(as_stored ? 0 : static_cast<size_t>(W.cols));
  for (int64_t r0 = 0; r0 < W.rows; r0 += kChunk) {
    const int64_t nr = std::min(kChunk, W.rows - r0);
    const uint8_t* src = W.rows_in(r0, nr, unpacked.data());
    if (!as_stored) {
      auto* h = reinterpret_cast<uint16_t*>(staged.data());
      for (int64_t r = 0; r < nr; ++r) {
        W.traits->to_float(src + r * W.row_bytes, f.data(), W.cols);
        for (int64_t c = 0; c < W.cols; ++c) h[r * W.cols + c] = f32_to_f16(f[static_cast<size_t>(c)]);
      }
      src = staged.data();
    }
    if (split) {
      auto* scales = reinterpret_cast<uint16_t*>(staged.data() + nr * W.cols);
      cuda::q8_0_split(src, nr, W.cols, staged.data(), scales);
      const size_t levels_at = static_cast<size_t>(r0 * W.cols), scales_at = static_cast<size_t>(W.rows * W.cols + r0 * (W.cols / 32) * 2);
      LL3_RETURN_IF_ERROR(cuda_check(cudaMemcpy(dev + levels_at, staged.data(), static_cast<size_t>(nr * W.cols), cudaMemcpyDefault), "upload"));
      LL3_RETURN_IF_ERROR(cuda_check(cudaMemcpy(dev + scales_at, scales, static_cast<size_t>(nr * (W.cols / 32) * 2), cudaMemcpyDefault), "upload"));
      continue;
    }
    LL3_RETURN_IF_ERROR(cuda_check(
        cudaMemcpy(dev + static_cast<size_t>(r0) * row_bytes, src, static_cast<size_t>(nr) * row_bytes, cudaMemcpyDefault),
        "upload"));
  }
  return Status();
}

// Blocks holding positions the step reads but did not write itself: the host copy is the one
// of record, so any block it changed since the last sync is uploaded, all layers.
Status CudaRunner::sync_blocks(const BatchPlan& plan) {
  const KvCache& kv = kv_;
  const int64_t bs = kv.config().block_size;
  const size_t block_bytes = static_cast<size_t>(bs) * kv.row_bytes();
  for (const SeqBatch& s : plan.seqs) {
    const int64_t used = (static_cast<int64_t>(s.n_past) + bs - 1) / bs;
    for (int64_t i = 0; i < used; ++i) {
      const int32_t b = s.block_table[static_cast<size_t>(i)];
      if (synced_[static_cast<size_t>(b)] == kv.version(b)) continue;
      for (int64_t l = first_; l < c_.n_layers; ++l) {
        const size_t off = static_cast<size_t>(b) * bs * kv_dim_;
        LL3_RETURN_IF_ERROR(cuda_check(cudaMemcpyAsync(layers_[l].k + off, kv.k_row(l, b, 0), block_bytes,
                                                       cudaMemcpyHostToDevice, stream_),
                                       "KV upload"));
        LL3_RETURN_IF_ERROR(cuda_check(cudaMemcpyAsync(layers_[l].v + off, kv.v_row(l, b, 0), block_bytes,
                                                       cudaMemcpyHostToDevice, stream_),
                                       "KV upload"));
      }
      synced_[static_cast<size_t>(b)] = kv.version(b);
    }
  }
  return Status();
}

// y (n, rows) = x (n, cols) . M^T, each row of y computed the same way whatever n is.
Status CudaRunner::matmul(const DevMatrix& M, const float* x, int64_t n, float* y) {
  if (M.mma) return cuda::matmul_mma(M.type, M.w, M.rows, M.cols, x, n, y, stream_);
  for (int64_t r = 0; r < n; r += cuda::kMaxGemvBatch) {
    const int b = static_cast<int>(std::min<int64_t>(cuda::kMaxGemvBatch, n - r));
    LL3_RETURN_IF_ERROR(cuda::gemv(M.type, M.w, M.rows, M.cols, x + r * M.cols, y + r * M.rows, b, stream_));
  }
  return Status();
}

// One layer over the step's T rows (meta_ as forward() laid it out, block tables `width` wide).
// On entry x_ holds the residual stream, and proj_ the previous layer's FFN output not yet added.
Status CudaRunner::layer(int64_t l, int64_t T, int64_t width) {
  const DevLayer& D = layers_[static_cast<size_t>(l)];
  const int64_t dim = c_.dim, hd = c_.head_dim;
  const float eps = c_.norm_eps;
  const int32_t* pos = meta_;
  const int32_t* slots = meta_ + T;
  const int32_t* lens = meta_ + 2 * T;
  const int32_t* tables = meta_ + 4 * T;

  // Attention block: x += Wo . attention(RoPE(Wq xb), RoPE(Wk xb), Wv xb), xb = rmsnorm(x).
  if (l == first_) {
    LL3_RETURN_IF_ERROR(cuda::rmsnorm(x_, D.attn_norm, xb_, T, dim, eps, stream_));
  } else {
    LL3_RETURN_IF_ERROR(cuda::add_rmsnorm(x_, proj_, D.attn_norm, xb_, T, dim, eps, stream_));
  }
  LL3_RETURN_IF_ERROR(matmul(D.wq, xb_, T, q_));
  LL3_RETURN_IF_ERROR(matmul(D.wk, xb_, T, k_));
  LL3_RETURN_IF_ERROR(matmul(D.wv, xb_, T, v_));
  const float theta_scale = std::pow(c_.rope_theta, -2.0f / static_cast<float>(hd));
  LL3_RETURN_IF_ERROR(cuda::rope(q_, pos, T, static_cast<int>(c_.n_heads), static_cast<int>(hd), theta_scale,
                                 rope_factors_, c_.rope_half_pairs, stream_));
  LL3_RETURN_IF_ERROR(cuda::rope(k_, pos, T, static_cast<int>(c_.n_kv_heads), static_cast<int>(hd), theta_scale,
                                 rope_factors_, c_.rope_half_pairs, stream_));
  LL3_RETURN_IF_ERROR(cuda::kv_store(k_, v_, slots, T, kv_dim_, D.k, D.v, stream_));
  // The same F16 rows, compact, for the host cache (the same rounding as kv_store's).
  uint16_t* k_new = kv_new_ + static_cast<size_t>((l - first_) * T * kv_dim_);
  uint16_t* v_new = kv_new_ + static_cast<size_t>((n_local_ + l - first_) * T * kv_dim_);
  LL3_RETURN_IF_ERROR(cuda::to_half(k_, k_new, T * kv_dim_, false, stream_));
  LL3_RETURN_IF_ERROR(cuda::to_half(v_, v_new, T * kv_dim_, false, stream_));
  cuda::PagedKv kv;
  kv.k = D.k;
  kv.v = D.v;
  kv.block_tables = tables;
  kv.seq_lens = lens;
  kv.max_blocks = static_cast<int>(width);
  kv.block_size = static_cast<int>(kv_.config().block_size);
  kv.n_kv_heads = static_cast<int>(c_.n_kv_heads);
  // Every batch row is a query of its own, attending to positions 0 .. its own (causal).
  LL3_RETURN_IF_ERROR(cuda::attention_decode(q_, kv, static_cast<int>(T), static_cast<int>(c_.n_heads),
                                             static_cast<int>(hd), 1.0f / std::sqrt(static_cast<float>(hd)), att_,
                                             stream_, split_));
  LL3_RETURN_IF_ERROR(matmul(D.wo, att_, T, proj_));

  // Feed-forward block: x += W_down . (silu(W_gate xb) * W_up xb), xb = rmsnorm(x).
  LL3_RETURN_IF_ERROR(cuda::add_rmsnorm(x_, proj_, D.ffn_norm, xb_, T, dim, eps, stream_));
  LL3_RETURN_IF_ERROR(matmul(D.gate, xb_, T, gate_));
  LL3_RETURN_IF_ERROR(matmul(D.up, xb_, T, up_));
  LL3_RETURN_IF_ERROR(cuda::swiglu(gate_, up_, T * c_.ffn_dim, stream_));
  return matmul(D.down, gate_, T, proj_);
}

// The device's layers over the step's T rows, and the last residual add.
Status CudaRunner::layers(int64_t T, int64_t width) {
  for (int64_t l = first_; l < c_.n_layers; ++l) LL3_RETURN_IF_ERROR(layer(l, T, width));
  return cuda::add(x_, proj_, T * c_.dim, stream_);
}

// The same as one graph launch. A bucket's first step runs op by op (the kernels' first launches
// set their attributes outside any capture); its second is captured, then replayed from then on.
// A capture that fails turns graphs off for the runner, saying why, and the step runs op by op.
Status CudaRunner::layers_by_graph(int64_t bucket) {
  Graph& g = graphs_by_bucket_[graph_bucket_index(bucket)];
  if (g.exec == nullptr && g.uses++ == 0) return layers(bucket, table_cap_);
  if (g.exec == nullptr) {
    LL3_RETURN_IF_ERROR(cuda_check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "graph capture"));
    const Status st = layers(bucket, table_cap_);
    cudaGraph_t graph = nullptr;
    const Status end = cuda_check(cudaStreamEndCapture(stream_, &graph), "graph capture");
    size_t nodes = 0;
    Status made = st.ok() ? end : st;
    if (made.ok()) made = cuda_check(cudaGraphGetNodes(graph, nullptr, &nodes), "graph nodes");
    if (made.ok()) made = cuda_check(cudaGraphInstantiate(&g.exec, graph, 0), "graph instantiate");
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (!made.ok()) {
      graphs_ = false;
      log_.warn("CUDA graphs off: " + made.message());
      return layers(bucket, table_cap_);
    }
    log_.info(strprintf("CUDA graph for steps of up to %lld rows: %zu kernels and copies in one launch",
                        static_cast<long long>(bucket), nodes));
  }
  return cuda_check(cudaGraphLaunch(g.exec, stream_), "graph launch");
}

Status CudaRunner::forward_part(const BatchPlan& plan, const float* x_in, float* x_out, float* logits, float* hidden) {
  if (!plan.hidden_rows.empty() && hidden == nullptr && x_out == nullptr) {
    return Status::error("forward: hidden rows asked for without a buffer");
  }
  if ((x_in == nullptr) != (first_ == 0)) {
    return Status::error("forward_part: the residual stream comes in exactly when the first layer is not layer 0");
  }
  if ((x_out == nullptr) != placement_.output) {
    return Status::error("forward_part: the residual stream goes out exactly when the output layer is not here");
  }
  Status st = step(plan, x_in, x_out, logits, hidden);
  // A step that failed part way may have copies in flight from the pinned buffers the next
  // step refills: wait for them.
  if (!st.ok()) cudaStreamSynchronize(stream_);
  return st;
}

Status CudaRunner::step(const BatchPlan& plan, const float* x_in, float* x_out, float* logits, float* hidden) {
  const KvCacheConfig& kc = kv_.config();
  LL3_RETURN_IF_ERROR(validate_plan(plan, max_tokens_, c_.n_vocab, kc.block_size, kc.n_blocks));
  const int64_t T = static_cast<int64_t>(plan.tokens.size());
  const int64_t n_out = static_cast<int64_t>(plan.logit_rows.size());
  const int64_t n_hid = static_cast<int64_t>(plan.hidden_rows.size());
  const int64_t dim = c_.dim, bs = kc.block_size;
  if (n_out > T) return Status::errorf("forward: %lld logit rows for %lld tokens", static_cast<long long>(n_out), static_cast<long long>(T));
  int64_t width = 1;
  for (const SeqBatch& s : plan.seqs) width = std::max<int64_t>(width, static_cast<int64_t>(s.block_table.size()));
  if (width > table_cap_) {
    return Status::errorf("forward: a block table of %lld blocks is longer than the %lld the CUDA runner holds",
                          static_cast<long long>(width), static_cast<long long>(table_cap_));
  }

  // A graph's step runs its bucket's rows with block tables of the runner's full width.
  const int64_t bucket = graphs_ ? graph_bucket(T, max_tokens_) : 0;
  const int64_t Ts = bucket > 0 ? bucket : T;
  if (bucket > 0) width = table_cap_;

  // The step's metadata, laid out as layer() reads it: positions, cache slots, attended
  // lengths (Ts each), logit rows (Ts), then one block table of `width` per batch row, then the
  // hidden rows (Ts). Padding rows attend to one position of the scratch block.
  int32_t* pos = h_meta_;
  int32_t* slots = h_meta_ + Ts;
  int32_t* lens = h_meta_ + 2 * Ts;
  int32_t* rows = h_meta_ + 3 * Ts;
  int32_t* tables = h_meta_ + 4 * Ts;
  int32_t* hidden_rows = tables + Ts * width;
  for (int64_t r = T; r < Ts; ++r) {
    pos[r] = 0;
    slots[r] = static_cast<int32_t>(kc.n_blocks * bs);
    lens[r] = 1;
    std::fill(tables + r * width, tables + (r + 1) * width, static_cast<int32_t>(kc.n_blocks));
  }
  for (const SeqBatch& s : plan.seqs) {
    for (int32_t i = 0; i < s.n_tokens; ++i) {
      const int64_t r = s.token_begin + i, p = static_cast<int64_t>(s.n_past) + i;
      pos[r] = static_cast<int32_t>(p);
      slots[r] = static_cast<int32_t>(s.block_table[static_cast<size_t>(p / bs)] * bs + p % bs);
      lens[r] = static_cast<int32_t>(p + 1);
      int32_t* t = tables + r * width;
      std::fill(std::copy(s.block_table.begin(), s.block_table.end(), t), t + width, 0);
    }
  }
  std::copy(plan.logit_rows.begin(), plan.logit_rows.end(), rows);
  std::copy(plan.hidden_rows.begin(), plan.hidden_rows.end(), hidden_rows);
  // x = embedding(tokens), on the host (a row of any type), or the CPU's layers' output; uploaded.
  if (x_in != nullptr) {
    std::memcpy(h_x_, x_in, static_cast<size_t>(T * dim) * sizeof(float));
  } else {
    for (int64_t t = 0; t < T; ++t) {
      const WeightMatrix& E = m_.tok_embd;
      E.traits->to_float(E.row_in(plan.tokens[static_cast<size_t>(t)], row_buf_.data()), h_x_ + t * dim, dim);
    }
  }
  std::fill(h_x_ + T * dim, h_x_ + Ts * dim, 0.0f);
  LL3_RETURN_IF_ERROR(sync_blocks(plan));
  LL3_RETURN_IF_ERROR(cuda_check(cudaMemcpyAsync(x_, h_x_, static_cast<size_t>(Ts * dim) * sizeof(float),
                                                 cudaMemcpyHostToDevice, stream_),
                                 "upload"));
  LL3_RETURN_IF_ERROR(cuda_check(cudaMemcpyAsync(meta_, h_meta_, static_cast<size_t>(5 * Ts + Ts * width) * sizeof(int32_t),
                                                 cudaMemcpyHostToDevice, stream_),
                                 "upload"));

  LL3_RETURN_IF_ERROR(bucket > 0 ? layers_by_graph(bucket) : layers(T, width));
  const size_t kv_new = static_cast<size_t>(2 * n_local_ * Ts * kv_dim_);
  if (x_out != nullptr) {  // the output layer is the CPU's: the stream goes back
    LL3_RETURN_IF_ERROR(cuda_check(cudaMemcpyAsync(h_x_, x_, static_cast<size_t>(T * dim) * sizeof(float),
                                                   cudaMemcpyDeviceToHost, stream_),
                                   "download"));
    LL3_RETURN_IF_ERROR(cuda_check(cudaMemcpyAsync(h_kv_new_, kv_new_, kv_new * sizeof(uint16_t), cudaMemcpyDeviceToHost, stream_),
                                   "download"));
    LL3_RETURN_IF_ERROR(cuda_check(cudaStreamSynchronize(stream_), "forward"));
    std::memcpy(x_out, h_x_, static_cast<size_t>(T * dim) * sizeof(float));
    return download_kv(plan, Ts);
  }

  // The final hidden state rmsnorm(x) of the rows embeddings pool, as the logits' rows below.
  if (n_hid > 0) {
    LL3_RETURN_IF_ERROR(cuda::gather_rows(x_, meta_ + 4 * Ts + Ts * width, n_hid, dim, xb_, stream_));
    LL3_RETURN_IF_ERROR(cuda::rmsnorm(xb_, output_norm_, att_, n_hid, dim, c_.norm_eps, stream_));
    LL3_RETURN_IF_ERROR(cuda_check(cudaMemcpyAsync(h_hidden_, att_, static_cast<size_t>(n_hid * dim) * sizeof(float),
                                                   cudaMemcpyDeviceToHost, stream_),
                                   "download"));
  }
  // logits = W_out . rmsnorm(x), for the rows asked for.
  if (n_out > 0) {
    LL3_RETURN_IF_ERROR(cuda::gather_rows(x_, meta_ + 3 * Ts, n_out, dim, xb_, stream_));
    LL3_RETURN_IF_ERROR(cuda::rmsnorm(xb_, output_norm_, att_, n_out, dim, c_.norm_eps, stream_));
    LL3_RETURN_IF_ERROR(matmul(output_, att_, n_out, logits_));
    LL3_RETURN_IF_ERROR(cuda_check(cudaMemcpyAsync(h_logits_, logits_, static_cast<size_t>(n_out * c_.n_vocab) * sizeof(float),
                                                   cudaMemcpyDeviceToHost, stream_),
                                   "download"));
  }
  LL3_RETURN_IF_ERROR(cuda_check(cudaMemcpyAsync(h_kv_new_, kv_new_, kv_new * sizeof(uint16_t), cudaMemcpyDeviceToHost, stream_),
                                 "download"));
  LL3_RETURN_IF_ERROR(cuda_check(cudaStreamSynchronize(stream_), "forward"));
  std::memcpy(logits, h_logits_, static_cast<size_t>(n_out * c_.n_vocab) * sizeof(float));
  if (n_hid > 0) std::memcpy(hidden, h_hidden_, static_cast<size_t>(n_hid * dim) * sizeof(float));
  return download_kv(plan, Ts);
}

// The step's K / V rows (in h_kv_new_, T rows a layer of which the plan's come first) into the host cache; the blocks they went to are then
// in sync (the device wrote the same rows itself).
Status CudaRunner::download_kv(const BatchPlan& plan, int64_t T) {
  const int64_t bs = kv_.config().block_size;
  const size_t rb = kv_.row_bytes();
  for (int64_t l = first_; l < c_.n_layers; ++l) {
    const uint16_t* k_new = h_kv_new_ + static_cast<size_t>((l - first_) * T * kv_dim_);
    const uint16_t* v_new = h_kv_new_ + static_cast<size_t>((n_local_ + l - first_) * T * kv_dim_);
    for (const SeqBatch& s : plan.seqs) {
      for (int32_t i = 0; i < s.n_tokens; ++i) {
        const int64_t r = s.token_begin + i, p = static_cast<int64_t>(s.n_past) + i;
        const int32_t b = s.block_table[static_cast<size_t>(p / bs)];
        std::memcpy(kv_.k_row(l, b, p % bs), k_new + r * kv_dim_, rb);
        std::memcpy(kv_.v_row(l, b, p % bs), v_new + r * kv_dim_, rb);
      }
    }
  }
  // Those blocks now hold the same rows on both sides: their older positions were uploaded by
  // sync_blocks (or are not written yet on either side).
  for (const SeqBatch& s : plan.seqs) {
    const int64_t first = s.n_past / bs, last = (static_cast<int64_t>(s.n_past) + s.n_tokens - 1) / bs;
    for (int64_t i = first; i <= last; ++i) {
      const int32_t b = s.block_table[static_cast<size_t>(i)];
      synced_[static_cast<size_t>(b)] = kv_.version(b);
    }
  }
  return Status();
}

}  // namespace

Result<GpuPart> make_cuda_runner(const LlamaModel& model, KvCache& kv, const GpuRunnerOptions& options) {
  auto r = std::make_unique<CudaRunner>(model, kv);
  Status st = r->init(options);
  if (!st.ok()) return st;
  GpuPart part;
  part.placement = r->placement();
  part.host_weight_layers = r->host_weight_layers();
  part.runner = std::move(r);
  return part;
}

}  // namespace ll3
