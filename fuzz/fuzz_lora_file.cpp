// Fuzz target: the LoRA adapter readers (src/io/lora_file.cpp) on arbitrary bytes. The first
// byte picks the form: even, a GGUF adapter (the rest of the input is the file); odd, a PEFT
// directory (adapter_config.json's text up to the first NUL, then adapter_model.safetensors).
// Every input ends in an adapter whose pairs are whole (both matrices, positive shapes, bytes
// inside the input) or an error that says what, never a crash, a leak or a hang.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "io/gguf.h"
#include "io/lora_file.h"
#include "io/safetensors.h"

namespace {

void check(const ll3::Result<ll3::LoraFile>& f, const uint8_t* data, size_t size) {
  if (!f.ok()) {
    if (f.message().empty()) std::abort();
    return;
  }
  for (const ll3::LoraFilePair& p : f->pairs) {
    if (p.where.empty() || p.layer < -1 || p.target < 0 || p.target >= ll3::kLoraTargetCount) std::abort();
    for (const ll3::LoraTensor* t : {&p.a, &p.b}) {
      if (t->data == nullptr && t->nbytes > 0) std::abort();
      if (t->nbytes > 0 && (t->data < data || t->data + t->nbytes > data + size)) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (1 << 20)) return 0;
  const uint8_t* rest = data + 1;
  const size_t n = size - 1;
  if ((data[0] & 1) == 0) {
    auto g = ll3::GgufFile::parse(rest, n, "fuzz.gguf");
    if (!g.ok()) return 0;
    check(ll3::read_gguf_lora(std::move(g.value())), rest, n);
    return 0;
  }
  const std::string_view all(reinterpret_cast<const char*>(rest), n);
  const size_t nul = all.find('\0');
  if (nul == std::string_view::npos) return 0;
  auto st = ll3::SafetensorsFile::parse(rest + nul + 1, n - nul - 1, "fuzz.safetensors");
  if (!st.ok()) return 0;
  check(ll3::read_peft_lora(all.substr(0, nul), std::move(st.value())), rest, n);
  return 0;
}
