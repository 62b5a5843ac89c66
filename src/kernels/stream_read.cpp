#include "kernels/stream_read.h"

#include "core/cpu_features.h"

namespace ll3::kernels {

uint64_t stream_read(const uint8_t* p, size_t n, size_t ahead) {
  const CpuFeatures& f = cpu_features();
  if (f.has_avx512_set()) return avx512::stream_read(p, n, ahead);
  if (f.has_avx2_set()) return avx2::stream_read(p, n, ahead);
  return ref::stream_read(p, n);
}

}  // namespace ll3::kernels
