// What the CPU this process runs on can do (cpuid + xgetbv), detected once.
#pragma once

namespace ll3 {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avx_vnni = false;
  // AMX tiles with BF16 products, enabled by the OS and permitted for this process
  // (arch_prctl XTILEDATA), so the kernels may execute them.
  bool amx_bf16 = false;
  // AMX tiles with int8 products (TDPBSUD), under the same conditions: the batched
  // kernels of Q4_K, Q6_K and Q8_0 weights run on them (kernels/cpu/amx/quant_panel_rows.cpp).
  bool amx_int8 = false;
  // AMD (cpuid vendor AuthenticAMD): where vpmulld is one multiply-port slot (Zen 4 / 5),
  // against two on Intel's cores; the Q4_K batch kernel picks its scale multiply by it.
  bool amd = false;
  // Whether the panel decode kernels issue software prefetches (kernels/cpu/prefetch.h). On
  // Intel they lift decode by a quarter (Sapphire Rapids); on Zen 4 the hardware prefetchers
  // alone stream faster (Q4_K_M, one core, 33.1 -> 36.9 t/s without). Off on AMD;
  // LL3_PREFETCH=0|1 overrides it (comparisons).
  bool panel_prefetch = true;
  // AVX2 + FMA + F16C: what the avx2 kernels are compiled for.
  bool has_avx2_set() const { return avx2 && fma && f16c; }
  // The avx512 kernel directory's flags.
  bool has_avx512_set() const {
    return has_avx2_set() && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni && avx512bf16;
  }
};

const CpuFeatures& cpu_features();

}  // namespace ll3
