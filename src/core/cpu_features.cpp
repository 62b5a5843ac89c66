#include "core/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ll3 {

namespace {

// Linux keeps AMX tile data off until a process asks for it (arch_prctl ARCH_REQ_XCOMP_PERM).
bool request_amx_permission() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

}  // namespace

CpuFeatures detect_cpu_features(const char* cap) {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  f.amd = std::strcmp(vendor, "AuthenticAMD") == 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.family = ((a >> 8) & 0xf) + (((a >> 8) & 0xf) == 0xf ? (a >> 20) & 0xff : 0);
  bool osxsave = (c >> 27) & 1;
  bool avx = (c >> 28) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  if (!osxsave || !avx) return f;
  unsigned xlo, xhi;
  __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  bool ymm_ok = (xlo & 0x6) == 0x6;
  bool zmm_ok = (xlo & 0xe6) == 0xe6;
  if (!ymm_ok) {
    f.fma = f.f16c = false;
    return f;
  }
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = (b >> 5) & 1;
  const bool amx_tile = (d >> 24) & 1, amx_bf16 = (d >> 22) & 1, amx_int8 = (d >> 25) & 1;
  const bool tiles_ok = (xlo & 0x60000) == 0x60000;  // XTILECFG + XTILEDATA state enabled
  if (zmm_ok) {
    f.avx512f = (b >> 16) & 1;
    f.avx512dq = (b >> 17) & 1;
    f.avx512bw = (b >> 30) & 1;
    f.avx512vl = (b >> 31) & 1;
    f.avx512vnni = (c >> 11) & 1;
  }
  __cpuid_count(7, 1, a, b, c, d);
  f.avx_vnni = (a >> 4) & 1;
  if (zmm_ok) f.avx512bf16 = (a >> 5) & 1;
  if (cap != nullptr && *cap == '\0') cap = nullptr;  // LL3_CPU= (empty) is no cap, not "no AMX"
  const bool amx_allowed = cap == nullptr || std::strcmp(cap, "amx") == 0;
  const bool tiles_usable = amx_allowed && f.has_avx512_set() && amx_tile && tiles_ok && request_amx_permission();
  f.amx_bf16 = tiles_usable && amx_bf16;
  f.amx_int8 = tiles_usable && amx_int8;
  if (cap != nullptr && std::strcmp(cap, "avx2") == 0) {
    f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512vnni = f.avx512bf16 = false;
  } else if (cap != nullptr && std::strcmp(cap, "scalar") == 0) {
    f = CpuFeatures();
  }
  f.panel_prefetch = !(f.amd && f.family <= 0x19);
  f.light_panel_prefetch = !f.amd;
  if (f.amd && f.family >= 0x1A) {
    f.panel_prefetch_far = 12288;
    f.panel_prefetch_near = 0;
    f.panel_prefetch_far_l1 = true;
    f.light_panel_prefetch_sparse = true;
    f.rows_prefetch_l1 = false;
  }
  if (const char* pf = std::getenv("LL3_ROWS_PREFETCH_L1"); pf != nullptr && (*pf == '0' || *pf == '1')) {
    f.rows_prefetch_l1 = *pf == '1';
  }
  if (const char* pf = std::getenv("LL3_PREFETCH"); pf != nullptr && (*pf == '0' || *pf == '1')) {
    f.panel_prefetch = f.light_panel_prefetch = *pf == '1';
    f.light_panel_prefetch_sparse = false;
  }
  if (const char* at = std::getenv("LL3_PREFETCH_AT"); at != nullptr) {
    int far = 0, near = 0, l1 = 0;
    if (std::sscanf(at, "%d,%d,%d", &far, &near, &l1) == 3 && far > 0 && near >= 0 && far <= 65536 && near <= 65536) {
      f.panel_prefetch_far = far;
      f.panel_prefetch_near = near;
      f.panel_prefetch_far_l1 = l1 != 0;
    }
  }
  return f;
}

const CpuFeatures& cpu_features() {
  // LL3_CPU=scalar|avx2|avx512 caps what the dispatcher may use (tests and comparisons).
  static const CpuFeatures f = detect_cpu_features(std::getenv("LL3_CPU"));
  return f;
}

}  // namespace ll3
