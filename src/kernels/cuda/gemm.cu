// cuBLAS's GEMM on the tensor cores, F16 or BF16 operands, F32 accumulation and output: the
// yardstick ll3-cuda-bench sets beside matmul_mma (which the runner uses for every product).
//
// cuBLAS is opened with dlopen when the first handle is made, not linked: linked, its two
// libraries cost every ll3 process 0.15 s and 215 MB of memory at start-up (`ll3 --version`:
// 0.01 s and 5 MB without), GPU or not.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace ll3::cuda {

struct Blas {
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
};

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// The cuBLAS entry points this file calls (cublas_v2.h maps the plain names to the _v2 ones).
struct BlasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  std::string error;  // why it could not be opened
};

const BlasApi& blas_api() {
  static BlasApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string so = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* h = nullptr;
    for (const std::string& name : {so, "/usr/local/cuda/lib64/" + so, "/usr/local/cuda/lib/" + so}) {
      if ((h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    }
    if (h == nullptr) {
      api.error = "cannot open " + so + " (" + dlerror() + ")";
      return;
    }
    auto get = [h](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      return fn != nullptr;
    };
    if (!get(api.create, "cublasCreate_v2") || !get(api.destroy, "cublasDestroy_v2") ||
        !get(api.set_stream, "cublasSetStream_v2") || !get(api.set_workspace, "cublasSetWorkspace_v2") ||
        !get(api.gemm_ex, "cublasGemmEx") || !get(api.status_string, "cublasGetStatusString")) {
      api.error = so + " lacks a function ll3 calls";
      api.create = nullptr;
    }
  });
  return api;
}

Status blas_status(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status();
  return Status::errorf("cuBLAS %s: %s", what, blas_api().status_string(st));
}

}  // namespace

Result<Blas*> blas_create(cudaStream_t s) {
  const BlasApi& api = blas_api();
  if (api.create == nullptr) return Status::error("cuBLAS: " + api.error);
  auto* b = new Blas();
  auto fail = [b](Status st) -> Result<Blas*> {
    blas_destroy(b);
    return st;
  };
  if (Status st = blas_status(api.create(&b->handle), "create"); !st.ok()) return fail(st);
  // A workspace of our own, made once: cuBLAS then allocates nothing while it runs.
  if (cudaMalloc(&b->workspace, kWorkspaceBytes) != cudaSuccess) {
    cudaGetLastError();
    b->workspace = nullptr;
    return fail(Status::error("cuBLAS workspace: out of device memory"));
  }
  if (Status st = blas_status(api.set_workspace(b->handle, b->workspace, kWorkspaceBytes), "set workspace"); !st.ok()) {
    return fail(st);
  }
  if (Status st = blas_status(api.set_stream(b->handle, s), "set stream"); !st.ok()) return fail(st);
  return b;
}

void blas_destroy(Blas* b) {
  if (b == nullptr) return;
  if (b->handle != nullptr) blas_api().destroy(b->handle);
  if (b->workspace != nullptr) cudaFree(b->workspace);
  delete b;
}

Status gemm_half(Blas* b, bool bf16, const uint16_t* w, int64_t rows, int64_t cols, const uint16_t* x, int64_t n,
                 float* y) {
  if (rows <= 0 || n <= 0) return Status();
  // Row-major y (n, rows) = x (n, cols) . w^T (rows, cols) is, column-major,
  // y (rows, n) = w^T (cols, rows)^T . x (cols, n).
  const float one = 1.0f, zero = 0.0f;
  const cudaDataType_t t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  return blas_status(blas_api().gemm_ex(b->handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n),
                                  static_cast<int>(cols), &one, w, t, static_cast<int>(cols), x, t,
                                  static_cast<int>(cols), &zero, y, CUDA_R_32F, static_cast<int>(rows),
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "gemm");
}

}  // namespace ll3::cuda
