#include "kernels/stream_read.h"

#include "core/cpu_features.h"

namespace ll3::kernels {

uint64_t stream_read(const uint8_t* p, size_t n, bool prefetch) {
  const CpuFeatures& f = cpu_features();
  if (f.has_avx512_set()) return avx512::stream_read(p, n, prefetch);
  if (f.has_avx2_set()) return avx2::stream_read(p, n, prefetch);
  return ref::stream_read(p, n);
}

}  // namespace ll3::kernels
