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
  // The cpuid family (base + extended): AMD's 0x19 is Zen 3 / Zen 4, 0x1A Zen 5.
  unsigned family = 0;
  // Whether the panel decode kernels issue software prefetches (kernels/cpu/prefetch.h),
  // measured per CPU (1B preset, 2 threads, t/s without -> with):
  // - Intel (Sapphire Rapids): on; they lift decode by a quarter.
  // - Zen 3 / Zen 4 (AMD family 0x19): off; the hardware prefetchers alone stream faster
  //   (Q4_K_M, one core, 33.1 -> 36.9 t/s without).
  // - Zen 5 (family 0x1A) and later: on, except for the light stream below. Q4_K_M 49 -> 67,
  //   `LL3_CPU=avx2` Q4_K_M 25 -> 55 and Q8_0 28 -> 34.
  bool panel_prefetch = true;
  // The same for the AVX-512 Q8_0 panel decode kernel, whose few operations per byte let
  // AMD's hardware prefetchers keep up alone: off on AMD (Zen 5, 1B Q8_0: 42.2 -> 46.9 t/s
  // without). LL3_PREFETCH=0|1 sets both flags (comparisons).
  bool light_panel_prefetch = true;
  // Zen 5 (family 0x1A): those light kernels instead take one prefetch per 512 bytes of their
  // stream, `panel_prefetch_far` ahead, and leave the other seven lines to the hardware
  // prefetchers. A prefetch per line was slower than none; one per eight is faster than
  // both (1B preset, 2 threads, alternated rounds, t/s: F16 16.4-17.2 -> 18.3-19.3, Q8_0
  // 30.4-31.1 -> 31.3-35.8; one core, F16 panels from DRAM, share of the plain read 75-83% ->
  // 95-103%). The Q4_K / Q6_K kernels lost 30-40% by it (they keep theirs per line).
  // LL3_PREFETCH=0|1 clears it.
  bool light_panel_prefetch_sparse = false;
  // Whether the row-layout decode kernels prefetch 2 KB ahead into L1 beside their L2 prefetch:
  // the four-row float kernels (F32 / F16 rows, BF16; beside the rows eight on) and the integer
  // dot kernels of the types without panels (prefetch_ahead, 4 KB ahead into L2). Zen 5 (family
  // 0x1A): off; the L2 prefetch alone streams faster (1B preset, 2 threads, alternated rounds,
  // t/s: BF16 16.5-17.6 -> 19.9-22.5, Q5_K_M 44.0-48.4 -> 49.4-53.4). LL3_ROWS_PREFETCH_L1=0|1
  // sets it.
  bool rows_prefetch_l1 = true;
  // Where those prefetches go: `panel_prefetch_far` bytes ahead (into L1 with
  // `panel_prefetch_far_l1`, else into L2) and `panel_prefetch_near` bytes ahead into L1 (0:
  // none).
  // - Intel (Sapphire Rapids): 4 KB into L2, 2 KB into L1 (a prefetch into L1 holds one of the
  //   core's few line-fill buffers until its line arrives from DRAM; one into L2 does not).
  // - Zen 5: one prefetch, 12 KB ahead into L1. Under a shared host's load 4 KB ahead is about
  //   one DRAM latency of this stream, too short to hide it (one core, Q4_K / Q6_K panels from
  //   DRAM: +30% at 12 KB). A second, near prefetch made the AVX-512 Q4_K kernel, which issues
  //   a line's prefetches every few instructions, stall on them (perf: half its samples on
  //   prefetcht0): 1B Q4_K_M, 2 threads, alternated rounds, t/s: 4 KB / 2 KB 58-64, 12 KB /
  //   4 KB 66-72, 12 KB alone 70-75 (AVX2 kernels 65-77 beside it).
  // LL3_PREFETCH_AT=FAR,NEAR,FAR_L1 (bytes, bytes, 0|1) sets them (comparisons).
  int panel_prefetch_far = 4096;
  int panel_prefetch_near = 2048;
  bool panel_prefetch_far_l1 = false;
  // AVX2 + FMA + F16C: what the avx2 kernels are compiled for.
  bool has_avx2_set() const { return avx2 && fma && f16c; }
  // The avx512 kernel directory's flags.
  bool has_avx512_set() const {
    return has_avx2_set() && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni && avx512bf16;
  }
  bool operator==(const CpuFeatures&) const = default;
};

// What this process may use: detected once, capped by LL3_CPU.
const CpuFeatures& cpu_features();
// The same detection under the cap `cap` (scalar|avx2|avx512|amx; null or empty: none), read
// fresh: the tests compare caps with it (a cap the CPU does not exceed changes nothing).
CpuFeatures detect_cpu_features(const char* cap);

}  // namespace ll3
