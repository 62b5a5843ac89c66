// libFuzzer target: the safetensors header parser on arbitrary bytes. Any crash, sanitizer report
// or out-of-bounds tensor view is a bug; errors must come back as a Status.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = ll3::SafetensorsFile::parse(data, size, "fuzz");
  if (r.ok()) {
    for (const auto& t : (*r)->tensors()) {
      if (t.data < data || t.nbytes > size || t.data + t.nbytes > data + size) std::abort();
    }
  } else if (r.message().empty()) {
    std::abort();
  }
  return 0;
}
