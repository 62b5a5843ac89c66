#include "kernels/attention.h"

#include "core/cpu_features.h"

namespace ll3::kernels {

void attend_rows(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                 float scale, float* scores, float* out) {
  static const bool has_avx512 = cpu_features().has_avx512_set(), has_avx2 = cpu_features().has_avx2_set();
  if (has_avx512 && hd % 16 == 0) {
    avx512::attend_rows(q, q_stride, m, G, hd, kv, n, scale, scores, out);
  } else if (has_avx2 && hd % 8 == 0) {
    avx2::attend_rows(q, q_stride, m, G, hd, kv, n, scale, scores, out);
  } else {
    for (int i = 0; i < m; ++i) ref::attend(q + i * q_stride, G, hd, kv, n + i, scale, scores, out + i * q_stride);
  }
}

void attend(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* scores,
            float* out) {
  attend_rows(q, G * hd, 1, G, hd, kv, n, scale, scores, out);
}

}  // namespace ll3::kernels
