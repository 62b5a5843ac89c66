#include "kernels/attention.h"

#include "core/cpu_features.h"

namespace ll3::kernels {

namespace {

enum class Isa { kRef, kAvx2, kAvx512 };

Isa isa_for(int64_t hd) {
  static const bool has_avx512 = cpu_features().has_avx512_set(), has_avx2 = cpu_features().has_avx2_set();
  if (has_avx512 && hd % 16 == 0) return Isa::kAvx512;
  if (has_avx2 && hd % 8 == 0) return Isa::kAvx2;
  return Isa::kRef;
}

}  // namespace

void attend_rows(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                 float scale, float* scratch, float* out) {
  switch (isa_for(hd)) {
    case Isa::kAvx512: return avx512::attend_rows(q, q_stride, m, G, hd, kv, n, scale, scratch, out);
    case Isa::kAvx2: return avx2::attend_rows(q, q_stride, m, G, hd, kv, n, scale, scratch, out);
    case Isa::kRef: return ref::attend_rows(q, q_stride, m, G, hd, kv, n, scale, scratch, out);
  }
}

void attend_chunk(const float* q, int64_t q_stride, int m, int G, int64_t hd, const KvHeadView& kv, int64_t n,
                  int64_t c, float scale, float* scratch, const AttendPartial& part) {
  switch (isa_for(hd)) {
    case Isa::kAvx512: return avx512::attend_chunk(q, q_stride, m, G, hd, kv, n, c, scale, scratch, part);
    case Isa::kAvx2: return avx2::attend_chunk(q, q_stride, m, G, hd, kv, n, c, scale, scratch, part);
    case Isa::kRef: return ref::attend_chunk(q, q_stride, m, G, hd, kv, n, c, scale, scratch, part);
  }
}

void attend_combine(const AttendPartial* parts, int64_t n_parts, int m, int G, int64_t hd, float* out,
                    int64_t out_stride) {
  switch (isa_for(hd)) {
    case Isa::kAvx512: return avx512::attend_combine(parts, n_parts, m, G, hd, out, out_stride);
    case Isa::kAvx2: return avx2::attend_combine(parts, n_parts, m, G, hd, out, out_stride);
    case Isa::kRef: return ref::attend_combine(parts, n_parts, m, G, hd, out, out_stride);
  }
}

void attend(const float* q, int G, int64_t hd, const KvHeadView& kv, int64_t n, float scale, float* scratch,
            float* out) {
  attend_rows(q, G * hd, 1, G, hd, kv, n, scale, scratch, out);
}

}  // namespace ll3::kernels
