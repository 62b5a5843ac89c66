// Software prefetch of a weight stream for the one-activation-row (decode) kernels (SSE
// instructions: usable from every instruction set's files).
#pragma once

#include <immintrin.h>

#include "core/cpu_features.h"

namespace ll3::kernels {

// Software prefetch in the weight stream at two distances: into L2 4 KB ahead (a prefetch into
// L1 holds one of the core's few line-fill buffers until its line arrives from DRAM; one into
// L2 does not) and from L2 into L1 2 KB ahead, so the loads of the kernel find their lines in
// L1. Decode, 1B preset, t/s: Q4_K_M 21.9 (2 KB into L1, file pages) -> 23.8 (4 KB into L2)
// -> 29.3 (huge pages); then the L1 step, A/B in one run: Q4_K_M 25.9 -> 27.6-28.2 (2 threads),
// 13.9 -> 14.8-14.9 (1 thread); Q8_0 16.4-16.6 -> 17.4-18.6, 9.0-9.1 -> 10.0-10.5; F16 (2 KB
// into L1 before) 10.8-11.1 -> 11.9-12.5, 5.5-5.7 -> 6.2-6.3. With the panel kernels (1 GiB,
// 2 threads, share of the streaming read, 3 rounds): L1 step 1 KB -> 2 KB, Q4_K 90-91% ->
// 92-93%, Q6_K 87-90% -> 90%, Q8_0 85-89% -> 88-90%.
constexpr int kPrefetchL2Bytes = 4096;
constexpr int kPrefetchL1Bytes = 2048;
// The panel decode kernels' distances are per CPU (CpuFeatures); their defaults are these.
static_assert(CpuFeatures{}.panel_prefetch_far == kPrefetchL2Bytes && CpuFeatures{}.panel_prefetch_near == kPrefetchL1Bytes &&
              !CpuFeatures{}.panel_prefetch_far_l1);

// Both prefetches for the line at p, whatever the CPU: the batched (prompt) panel kernels, which
// gain by them on AMD too (Zen 4, LL3_CPU=avx2, Q4_K_M pp128: 206 -> 214 t/s).
inline void prefetch_line_always(const void* p) {
  const char* c = static_cast<const char*>(p);
  _mm_prefetch(c + kPrefetchL2Bytes, _MM_HINT_T1);
  _mm_prefetch(c + kPrefetchL1Bytes, _MM_HINT_T0);
}

// CpuFeatures::panel_prefetch, light_panel_prefetch and the distances, read once.
inline const bool kPanelPrefetch = cpu_features().panel_prefetch;
inline const bool kLightPanelPrefetch = cpu_features().light_panel_prefetch;
inline const int kPanelPrefetchFar = cpu_features().panel_prefetch_far;
inline const int kPanelPrefetchNear = cpu_features().panel_prefetch_near;
inline const bool kPanelPrefetchFarL1 = cpu_features().panel_prefetch_far_l1;
inline const bool kLightPanelPrefetchSparse = cpu_features().light_panel_prefetch_sparse;
inline const bool kRowsPrefetchL1 = cpu_features().rows_prefetch_l1;

// Prefetch the kLines cache lines (one block's worth) at both distances past p (the L1 one
// where CpuFeatures::rows_prefetch_l1). The one-activation-row kernels (dot_q, decode) use it;
// the batched ones are not memory-bound.
template <int kLines>
inline void prefetch_ahead(const void* p) {
  const char* far = static_cast<const char*>(p) + kPrefetchL2Bytes;
  const char* near = static_cast<const char*>(p) + kPrefetchL1Bytes;
  for (int l = 0; l < kLines; ++l) _mm_prefetch(far + 64 * l, _MM_HINT_T1);
  if (kRowsPrefetchL1) for (int l = 0; l < kLines; ++l) _mm_prefetch(near + 64 * l, _MM_HINT_T0);
}

// The prefetches for the line at p where the CPU gains by them, at the CPU's distances: the
// panel decode kernels issue them once per line loaded. kLight marks a kernel with few
// operations per byte (the AVX-512 Q8_0 one), which AMD's hardware prefetchers keep up with
// alone (kLightPanelPrefetch).
// The far prefetch of the line at p: panel_prefetch_far ahead, into L1 or L2 as the CPU wants.
inline void prefetch_far(const void* p) {
  const char* c = static_cast<const char*>(p) + kPanelPrefetchFar;
  if (kPanelPrefetchFarL1) {
    _mm_prefetch(c, _MM_HINT_T0);
  } else {
    _mm_prefetch(c, _MM_HINT_T1);
  }
}

template <bool kLight = false>
inline void prefetch_line(const void* p) {
  if (!(kLight ? kLightPanelPrefetch : kPanelPrefetch)) return;
  prefetch_far(p);
  if (kPanelPrefetchNear > 0) _mm_prefetch(static_cast<const char*>(p) + kPanelPrefetchNear, _MM_HINT_T0);
}

// The sparse form of the light kernels' prefetch (CpuFeatures::light_panel_prefetch_sparse):
// they call it once per 512 bytes of their stream, in addition to prefetch_line<true> per line.
inline void prefetch_sparse(const void* p) {
  if (kLightPanelPrefetchSparse) prefetch_far(p);
}

// The L2 prefetch of the four-row float decode kernels (kernels/cpu/*/float_types.cpp), issued
// when they start the cache line at byte `off` of each of their rows (row r at w + r * stride):
// four lines of the rows eight on (the next call's, two groups ahead), taken in address order, so
// that DRAM sees one sequential stream rather than four interleaved ones. Against row r's line
// at the same offset eight rows on, the same bytes at the same distance (Zen 4, one core,
// 256 MB of F16 rows of 2048 (8192), share of the plain streaming read, medians of 7): 86% ->
// 103% (110% -> 119%); two cores 105% -> 116%.
inline const char* rows_ahead_line(const uint8_t* w, size_t stride, size_t off, int r) {
  return reinterpret_cast<const char*>(w + 8 * stride + 4 * off + 64 * static_cast<size_t>(r));
}

}  // namespace ll3::kernels
