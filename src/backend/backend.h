// Where the work runs. The CPU backend is always there; the CUDA backend is compiled in when
// nvcc is found (CMake option LL3_CUDA) and usable when a device answers at run time; the
// engine then runs the model there (backend/runner.h chooses).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ll3 {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;  // compute capability
  int sm_count = 0;
  int64_t total_memory = 0, free_memory = 0;  // bytes
};

// The CUDA devices this process can use; empty with *why set when there are none (not compiled
// in, no driver, no device).
std::vector<CudaDeviceInfo> cuda_devices(std::string* why);
// The GPU architectures the CUDA code was compiled for ("sm_80 sm_90"), empty without CUDA.
std::string cuda_compiled_archs();

// "cpu (avx512 vnni bf16), cuda (sm_80 sm_90; NVIDIA H200, 139.8 GiB)" or "... cuda (sm_80
// sm_90; no device: ...)": the backends compiled in and whether each can run here.
std::string backends_summary();

// Says once per process (to the log, include/ll3/log.h), when CUDA is compiled in but no device is usable, so the
// work runs on the CPU. Silent in a CPU-only build.
void note_cpu_fallback_once();

}  // namespace ll3
