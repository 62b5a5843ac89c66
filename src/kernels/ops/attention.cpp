#include "kernels/attention.h"

#include "core/cpu_features.h"

namespace ll3::kernels {

void attend(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* scores,
            float* out) {
  static const bool simd = cpu_features().has_avx512_set();
  if (simd && hd % 16 == 0) {
    avx512::attend(q, G, hd, kv, n, scale, scores, out);
  } else {
    ref::attend(q, G, hd, kv, n, scale, scores, out);
  }
}

}  // namespace ll3::kernels
