#include "kernels/cpu/attention_impl.h"

namespace ll3::kernels::avx512 {

void attend_rows(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                 float scale, float* scratch, float* out) {
  attend_rows_impl<F32x16>(q, q_stride, m, G, hd, kv, n, scale, scratch, out);
}

void attend_chunk(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                  int64_t c, float scale, float* scratch, const AttendPartial& part) {
  attend_chunk_impl<F32x16>(q, q_stride, m, G, hd, kv, n, c, scale, scratch, part);
}

void attend_combine(const AttendPartial* parts, int64_t n_parts, int m, int G, int64_t hd, float* out,
                    int64_t out_stride) {
  attend_combine_impl<F32x16>(parts, n_parts, m, G, hd, out, out_stride);
}

}  // namespace ll3::kernels::avx512
