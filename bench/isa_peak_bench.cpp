// The core's throughput of the instructions the kernels are built from, one thread, 12
// independent chains (more than any latency needs), register operands only: the compute
// roofline the prompt kernels are measured against. Counters: G instructions per second and
// the multiply-adds (or FLOPs) they do. A CPU without an instruction skips its benchmark.
//
// On this project's Xeon (AVX-512 VNNI / BF16, no AMX), this showed that vdpbf16ps zmm retires
// at a quarter of vfmadd231ps zmm's rate: 32 bf16 products per instruction against 16 fma
// lanes, so half the multiply-adds per second of the FP32 FMA path, not twice.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include "core/cpu_features.h"

namespace {

#define LL3_R12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
constexpr int64_t kIters = 1 << 20;  // of 12 instructions

void report(benchmark::State& state, double work_per_instr, const char* unit) {
  state.counters["Ginstr/s"] =
      benchmark::Counter(12.0 * kIters, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters[unit] = benchmark::Counter(12.0 * kIters * work_per_instr, benchmark::Counter::kIsIterationInvariantRate,
                                            benchmark::Counter::kIs1000);
}

__attribute__((target("avx512f"))) void fma_zmm(benchmark::State& state) {
  if (!ll3::cpu_features().avx512f) return state.SkipWithError("no AVX-512");
#define LL3_DECL(i) __m512 a##i = _mm512_set1_ps(0.5f + i);
  LL3_R12(LL3_DECL)
  const __m512 m = _mm512_set1_ps(0.5f), c = _mm512_set1_ps(0.5f);
  for (auto _ : state) {
    for (int64_t n = 0; n < kIters; ++n) {
#define LL3_FMA(i) a##i = _mm512_fmadd_ps(a##i, m, c);
      LL3_R12(LL3_FMA)
      __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8),
                       "+v"(a9), "+v"(a10), "+v"(a11));
    }
  }
  report(state, 32, "GFLOP/s");  // 16 lanes x (multiply + add)
}

__attribute__((target("avx512f,avx512bf16"))) void dpbf16_zmm(benchmark::State& state) {
  if (!ll3::cpu_features().avx512bf16) return state.SkipWithError("no AVX512-BF16");
  LL3_R12(LL3_DECL)
  const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x3c003c00);
  for (auto _ : state) {
    for (int64_t n = 0; n < kIters; ++n) {
#define LL3_DPBF(i) a##i = _mm512_dpbf16_ps(a##i, x, y);
      LL3_R12(LL3_DPBF)
      __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8),
                       "+v"(a9), "+v"(a10), "+v"(a11));
    }
  }
  report(state, 64, "GFLOP/s");  // 32 products, each a multiply and an add
}

template <int kOp>  // 0: vpdpbusd, 1: vpdpwssd, 2: vpmulld
__attribute__((target("avx512f,avx512vnni"))) void int_zmm(benchmark::State& state) {
  if (!ll3::cpu_features().avx512vnni) return state.SkipWithError("no AVX512-VNNI");
#define LL3_IDECL(i) __m512i a##i = _mm512_set1_epi32(i);
  LL3_R12(LL3_IDECL)
  const __m512i x = _mm512_set1_epi32(3), y = _mm512_set1_epi32(5);
  for (auto _ : state) {
    for (int64_t n = 0; n < kIters; ++n) {
#define LL3_INT(i)                                       \
  if constexpr (kOp == 0) a##i = _mm512_dpbusd_epi32(a##i, x, y); \
  else if constexpr (kOp == 1) a##i = _mm512_dpwssd_epi32(a##i, x, y); \
  else a##i = _mm512_mullo_epi32(a##i, x);
      LL3_R12(LL3_INT)
      __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8),
                       "+v"(a9), "+v"(a10), "+v"(a11));
    }
  }
  report(state, kOp == 0 ? 64 : kOp == 1 ? 32 : 16, "Gmul/s");  // multiplies per instruction
}

// The AVX2 building blocks of the kernels for CPUs without VNNI (avx2/): FP32 FMA, and the
// u8 x s8 pairs to int16 (vpmaddubsw) and int16 pairs to int32 (vpmaddwd) that replace vpdpbusd.
__attribute__((target("avx2,fma"))) void fma_ymm(benchmark::State& state) {
  if (!ll3::cpu_features().avx2) return state.SkipWithError("no AVX2");
#define LL3_YDECL(i) __m256 a##i = _mm256_set1_ps(0.5f + i);
  LL3_R12(LL3_YDECL)
  const __m256 m = _mm256_set1_ps(0.5f), c = _mm256_set1_ps(0.5f);
  for (auto _ : state) {
    for (int64_t n = 0; n < kIters; ++n) {
#define LL3_YFMA(i) a##i = _mm256_fmadd_ps(a##i, m, c);
      LL3_R12(LL3_YFMA)
      __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8),
                       "+x"(a9), "+x"(a10), "+x"(a11));
    }
  }
  report(state, 16, "GFLOP/s");  // 8 lanes x (multiply + add)
}

template <int kOp>  // 0: vpmaddubsw, 1: vpmaddwd, 2: vpaddw
__attribute__((target("avx2"))) void int_ymm(benchmark::State& state) {
  if (!ll3::cpu_features().avx2) return state.SkipWithError("no AVX2");
#define LL3_YIDECL(i) __m256i a##i = _mm256_set1_epi32(i);
  LL3_R12(LL3_YIDECL)
  const __m256i x = _mm256_set1_epi8(3);
  for (auto _ : state) {
    for (int64_t n = 0; n < kIters; ++n) {
#define LL3_YINT(i)                                                 \
  if constexpr (kOp == 0) a##i = _mm256_maddubs_epi16(a##i, x);     \
  else if constexpr (kOp == 1) a##i = _mm256_madd_epi16(a##i, x);   \
  else a##i = _mm256_add_epi16(a##i, x);
      LL3_R12(LL3_YINT)
      __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8),
                       "+x"(a9), "+x"(a10), "+x"(a11));
    }
  }
  report(state, kOp == 0 ? 32 : kOp == 1 ? 16 : 16, "Gmul/s");  // products (adds) per instruction
}

BENCHMARK(fma_zmm)->Unit(benchmark::kMillisecond);
BENCHMARK(dpbf16_zmm)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(int_zmm, 0)->Name("vpdpbusd_zmm")->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(int_zmm, 1)->Name("vpdpwssd_zmm")->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(int_zmm, 2)->Name("vpmulld_zmm")->Unit(benchmark::kMillisecond);
BENCHMARK(fma_ymm)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(int_ymm, 0)->Name("vpmaddubsw_ymm")->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(int_ymm, 1)->Name("vpmaddwd_ymm")->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(int_ymm, 2)->Name("vpaddw_ymm")->Unit(benchmark::kMillisecond);

}  // namespace
