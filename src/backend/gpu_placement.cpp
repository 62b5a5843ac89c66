#include "backend/gpu_placement.h"

#include <algorithm>

namespace ll3 {

std::string gib(int64_t bytes) { return strprintf("%.2f GiB", static_cast<double>(bytes) / (1 << 30)); }

Result<GpuPlacement> place_on_gpu(const GpuNeeds& needs, int64_t budget, int requested) {
  const int64_t n = static_cast<int64_t>(needs.layer_bytes.size());
  if (requested == 0 || requested < -1) return Status::invalid("place_on_gpu: ask for -1 (as many as fit) or N > 0 layers", "gpu_layers");
  // Layers from the last one down while they fit (or up to the count asked for).
  const int64_t want = requested < 0 ? n : std::min<int64_t>(requested, n);
  GpuPlacement p;
  p.first_layer = n;
  p.bytes = needs.fixed_bytes;
  while (n - p.first_layer < want && p.bytes + needs.layer_bytes[static_cast<size_t>(p.first_layer - 1)] <= budget) {
    --p.first_layer;
    p.bytes += needs.layer_bytes[static_cast<size_t>(p.first_layer)];
  }
  const int64_t placed = n - p.first_layer;
  if ((requested > 0 && placed < want) || placed == 0) {
    const int64_t asked = requested > 0 ? want : 1;
    int64_t need = needs.fixed_bytes;
    for (int64_t l = n - asked; l < n; ++l) need += needs.layer_bytes[static_cast<size_t>(l)];
    return Status::errorf("%lld layer%s on the GPU need%s %s of device memory and %s is available, which holds %lld",
                          static_cast<long long>(asked), asked == 1 ? "" : "s", asked == 1 ? "s" : "",
                          gib(need).c_str(), gib(budget).c_str(), static_cast<long long>(placed));
  }
  p.output = p.bytes + needs.output_bytes <= budget;
  if (p.output) p.bytes += needs.output_bytes;
  return p;
}

}  // namespace ll3
