#include "kernels/attention.h"

#include "core/cpu_features.h"

namespace ll3::kernels {

void attend(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* scores,
            float* out) {
  static const bool has_avx512 = cpu_features().has_avx512_set(), has_avx2 = cpu_features().has_avx2_set();
  if (has_avx512 && hd % 16 == 0) {
    avx512::attend(q, G, hd, kv, n, scale, scores, out);
  } else if (has_avx2 && hd % 8 == 0) {
    avx2::attend(q, G, hd, kv, n, scale, scores, out);
  } else {
    ref::attend(q, G, hd, kv, n, scale, scores, out);
  }
}

}  // namespace ll3::kernels
