#include "backend/backend.h"

#include <cstdio>
#include <mutex>

#include "core/cpu_features.h"
#include "core/log.h"

namespace ll3 {

namespace {

std::string cpu_summary() {
  const CpuFeatures& f = cpu_features();
  std::string isa = f.has_avx512_set() ? "avx512" : f.has_avx2_set() ? "avx2" : "scalar";
  if (f.has_avx512_set() && f.avx512vnni) isa += " vnni";
  if (f.has_avx512_set() && f.avx512bf16) isa += " bf16";
  if (f.amx_int8) isa += " amx-int8";
  if (f.amx_bf16) isa += " amx-bf16";
  return "cpu (" + isa + ")";
}

}  // namespace

std::string backends_summary() {
  std::string out = cpu_summary();
  const std::string archs = cuda_compiled_archs();
  if (archs.empty()) return out;
  std::string why;
  const std::vector<CudaDeviceInfo> devs = cuda_devices(&why);
  out += ", cuda (" + archs + "; ";
  if (devs.empty()) return out + "no device: " + why + ")";
  for (size_t i = 0; i < devs.size(); ++i) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s%s sm_%d%d, %.1f GiB", i ? ", " : "", devs[i].name.c_str(), devs[i].cc_major,
                  devs[i].cc_minor, devs[i].total_memory / 1073741824.0);
    out += buf;
  }
  return out + ")";
}

void note_cpu_fallback_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (cuda_compiled_archs().empty()) return;
    std::string why;
    const std::vector<CudaDeviceInfo> devs = cuda_devices(&why);
    if (devs.empty()) {
      log_message(LogLevel::kWarning, "built with CUDA, but no CUDA device is usable (" + why + "): running on the CPU");
    }
  });
}

}  // namespace ll3
