// ll3-cuda-bench: the CUDA ops' speed against the card's own copy bandwidth, measured in the
// same run (scripts/gpu-check.sh prints its table). Shapes of the llama3.1-8b preset: the
// products of its FFN (14336 x 4096 and 4096 x 14336) per weight type on the batch-invariant
// tensor-core kernel at 1, 8, 64 and 512 tokens, beside the F32 GEMV at 1 and cuBLAS at 512;
// and decode attention over 4096 cached positions for 32 sequences. Times are the median of 20
// runs after 3 warm-ups, by CUDA events.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"
#include "kernels/cuda/cuda_ops.h"

namespace {

#define CHECK_CUDA(x)                                                                   \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "ll3-cuda-bench: %s: %s\n", #x, cudaGetErrorString(e_));     \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

template <class F>
double median_ms(F&& fn) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) fn();
  std::vector<float> t;
  for (int i = 0; i < 20; ++i) {
    CHECK_CUDA(cudaEventRecord(a));
    fn();
    CHECK_CUDA(cudaEventRecord(b));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t[t.size() / 2];
}

template <class T>
T* dev_alloc(size_t n) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, n * sizeof(T)));
  return static_cast<T*>(p);
}

void* dev_random(size_t bytes, uint32_t seed) {
  std::vector<uint8_t> h(bytes);
  std::mt19937 rng(seed);
  // Small random bytes: valid values of every weight type (F16 / BF16 exponents stay finite).
  for (auto& x : h) x = static_cast<uint8_t>(rng() & 0x3F);
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, bytes));
  CHECK_CUDA(cudaMemcpy(p, h.data(), bytes, cudaMemcpyHostToDevice));
  return p;
}

}  // namespace

int main() {
  std::string why;
  const auto devs = ll3::cuda_devices(&why);
  if (devs.empty()) {
    std::printf("ll3-cuda-bench: no CUDA device (%s)\n", why.c_str());
    return 1;
  }
  std::printf("device: %s, sm_%d%d, %d SMs, %.1f GiB\n", devs[0].name.c_str(), devs[0].cc_major, devs[0].cc_minor,
              devs[0].sm_count, devs[0].total_memory / 1073741824.0);

  // The copy bandwidth: read + write of a 2 GiB device-to-device copy.
  const size_t copy_bytes = size_t{2} << 30;
  void *src = nullptr, *dst = nullptr;
  CHECK_CUDA(cudaMalloc(&src, copy_bytes));
  CHECK_CUDA(cudaMalloc(&dst, copy_bytes));
  CHECK_CUDA(cudaMemset(src, 1, copy_bytes));
  const double copy_ms = median_ms([&] { CHECK_CUDA(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice)); });
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e6);
  cudaFree(src);
  cudaFree(dst);
  std::printf("copy bandwidth: %.0f GB/s (2 GiB device to device, read + write)\n\n", copy_gbs);
  ll3::Result<ll3::cuda::Blas*> blas_r = ll3::cuda::blas_create(nullptr);
  if (!blas_r.ok()) {
    std::printf("ll3-cuda-bench: %s\n", blas_r.message().c_str());
    return 1;
  }
  ll3::cuda::Blas* blas = blas_r.value();

  std::printf("| op | shape | batch | time (us) | GB/s | %% of copy | TFLOP/s |\n|---|---|---|---|---|---|---|\n");
  auto row = [&](const char* op, ll3::DType t, int64_t rows, int64_t cols, int64_t batch, double ms, size_t wbytes) {
    const double gbs = wbytes / (ms * 1e6);
    std::printf("| %s %s | %lldx%lld | %lld | %.1f | %.0f | %.0f%% | %.1f |\n", op, std::string(ll3::dtype_name(t)).c_str(),
                static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(batch), ms * 1e3, gbs,
                100 * gbs / copy_gbs, 2.0 * rows * cols * batch / (ms * 1e9));
  };
  const int64_t shapes[2][2] = {{14336, 4096}, {4096, 14336}};
  const int64_t max_batch = 512;
  for (ll3::DType t : {ll3::DType::F16, ll3::DType::BF16, ll3::DType::Q8_0, ll3::DType::Q4_K}) {
    for (const auto& sh : shapes) {
      const int64_t rows = sh[0], cols = sh[1];
      const size_t wbytes = ll3::dtype_row_bytes(t, cols) * rows;
      void* w = dev_random(wbytes, 1);  // any bytes below 64: valid in the Q8_0 device layout too
      float* x = static_cast<float*>(dev_random(max_batch * cols * sizeof(float), 4));
      float* y = dev_alloc<float>(max_batch * rows);
      ll3::Status st;
      // The batch-invariant tensor-core product the runner uses for every step.
      for (int64_t batch : {1, 8, 64, 512}) {
        const double ms = median_ms([&] { st = ll3::cuda::matmul_mma(t, w, rows, cols, x, batch, y, nullptr); });
        if (!st.ok()) std::printf("| mma %s | failed: %s |\n", std::string(ll3::dtype_name(t)).c_str(), st.message().c_str());
        row("mma", t, rows, cols, batch, ms, wbytes);
      }
      // For comparison: the F32 GEMV at batch 1, and cuBLAS on F16 operands at 512.
      const double ms = median_ms([&] { st = ll3::cuda::gemv(t, w, rows, cols, x, y, 1, nullptr); });
      row("gemv", t, rows, cols, 1, ms, wbytes);
      if (t == ll3::DType::F16 || t == ll3::DType::BF16) {
        const bool bf16 = t == ll3::DType::BF16;
        uint16_t* xh = dev_alloc<uint16_t>(max_batch * cols);
        CHECK_CUDA(cudaMemset(xh, 0, max_batch * cols * 2));
        const double mb = median_ms([&] {
          st = ll3::cuda::gemm_half(blas, bf16, static_cast<const uint16_t*>(w), rows, cols, xh, max_batch, y);
        });
        row("cublas", t, rows, cols, max_batch, mb, wbytes);
        cudaFree(xh);
      }
      cudaFree(w);
      cudaFree(x);
      cudaFree(y);
    }
  }

  // Decode attention: 32 sequences x 4096 positions, 32 heads over 8 KV heads of 128.
  const int n_seqs = 32, ctx = 4096, bs = 16, n_heads = 32, n_kv = 8, hd = 128;
  const int max_blocks = ctx / bs, n_blocks = n_seqs * max_blocks;
  const size_t kv_bytes = static_cast<size_t>(n_blocks) * bs * n_kv * hd * 2;
  void* k = dev_random(kv_bytes, 2);
  void* v = dev_random(kv_bytes, 3);
  std::vector<int32_t> tables(n_blocks), lens(n_seqs, ctx);
  for (int i = 0; i < n_blocks; ++i) tables[i] = i;
  int32_t* dt = dev_alloc<int32_t>(tables.size());
  int32_t* dl = dev_alloc<int32_t>(lens.size());
  CHECK_CUDA(cudaMemcpy(dt, tables.data(), tables.size() * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dl, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
  float* q = dev_alloc<float>(n_seqs * n_heads * hd);
  float* out = dev_alloc<float>(n_seqs * n_heads * hd);
  CHECK_CUDA(cudaMemset(q, 0, n_seqs * n_heads * hd * 4));
  ll3::cuda::PagedKv kv{static_cast<const uint16_t*>(k), static_cast<const uint16_t*>(v), dt, dl, max_blocks, bs, n_kv};
  ll3::Status st;
  const double ms = median_ms([&] { st = ll3::cuda::attention_decode(q, kv, n_seqs, n_heads, hd, 0.088f, out, nullptr); });
  const double gbs = 2.0 * kv_bytes / (ms * 1e6);
  std::printf("| attention decode (F16 KV) | %d seqs x %d positions | %d | %.1f | %.0f | %.0f%% |\n", n_seqs, ctx, n_seqs,
              ms * 1e3, gbs, 100 * gbs / copy_gbs);
  if (!st.ok()) std::printf("attention failed: %s\n", st.message().c_str());
  return 0;
}
