#include "kernels/cpu/attention_impl.h"

namespace ll3::kernels::avx512 {

void attend_rows(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                 float scale, float* scores, float* out) {
  attend_rows_impl<F32x16>(q, q_stride, m, G, hd, kv, n, scale, scores, out);
}

}  // namespace ll3::kernels::avx512
