#include "core/cpu_features.h"
#include "kernels/lora_kernels.h"

namespace ll3::kernels {

LoraExpandFn lora_expand() {
  static const LoraExpandFn fn = cpu_features().has_avx512_set() ? avx512::lora_expand
                                 : cpu_features().has_avx2_set() ? avx2::lora_expand
                                                                 : ref::lora_expand;
  return fn;
}

}  // namespace ll3::kernels
