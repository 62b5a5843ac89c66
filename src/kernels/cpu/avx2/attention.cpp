#include "kernels/cpu/attention_impl.h"

namespace ll3::kernels::avx2 {

void attend(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* scores,
            float* out) {
  attend_impl<F32x8>(q, G, hd, kv, n, scale, scores, out);
}

}  // namespace ll3::kernels::avx2
