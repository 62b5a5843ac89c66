#include "kernels/cpu/attention_impl.h"

namespace ll3::kernels::avx512 {

void attend(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* scores,
            float* out) {
  attend_impl<F32x16>(q, G, hd, kv, n, scale, scores, out);
}

}  // namespace ll3::kernels::avx512
