// libFuzzer target: the GGUF parser on arbitrary bytes. A crash, a sanitizer report, an error
// without a message, or a parsed file whose views point outside the input is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "io/gguf.h"

namespace {

const uint8_t* g_begin = nullptr;
const uint8_t* g_end = nullptr;

void check_view(const void* p, size_t n) {
  auto* b = static_cast<const uint8_t*>(p);
  if (n == 0) return;
  if (b < g_begin || b > g_end || n > size_t(g_end - b)) std::abort();
}

// Reads every byte a value's views expose (so ASan sees any out-of-bounds view) and exercises
// the typed accessors; returns a checksum so the reads are not optimized away.
uint64_t visit(const ll3::GgufValue& v, int depth) {
  if (depth > 64) std::abort();  // the parser must bound nesting
  uint64_t h = uint64_t(v.type);
  check_view(v.str.data(), v.str.size());
  for (char c : v.str) h = h * 31 + uint8_t(c);
  if (auto i = v.as_int()) h ^= uint64_t(*i);
  if (auto d = v.as_number()) h ^= uint64_t(*d != *d);
  if (v.type == ll3::GgufType::ARRAY) {
    for (const auto& s : v.strings) {
      check_view(s.data(), s.size());
      for (char c : s) h = h * 31 + uint8_t(c);
    }
    for (const auto& item : v.items) h ^= visit(item, depth + 1);
    if (v.elems != nullptr && v.count > 0) {
      // First, last and a few in between: enough to catch a wrong element size or count.
      for (uint64_t k : {uint64_t(0), v.count / 2, v.count - 1}) {
        if (auto d = v.array_number(k)) h += uint64_t(*d == *d);
        if (auto i = v.array_int(k)) h += uint64_t(*i);
      }
    }
  }
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  g_begin = data;
  g_end = data + size;
  auto r = ll3::GgufFile::parse(data, size, "fuzz");
  if (!r.ok()) {
    if (r.message().empty()) std::abort();
    return 0;
  }
  const ll3::GgufFile& f = **r;
  if (f.version() != 2 && f.version() != 3) std::abort();
  if (f.alignment() == 0 || (f.alignment() & (f.alignment() - 1)) != 0) std::abort();
  // A file without tensors may end before the padded start of its (empty) data section.
  if (!f.tensors().empty() && f.data_offset() > size) std::abort();
  volatile uint64_t sink = 0;
  for (const auto& [key, value] : f.metadata()) {
    if (f.find(key) != &value) std::abort();  // keys are unique and indexed
    sink = sink + visit(value, 0);
  }
  (void)f.get_int("general.alignment");
  (void)f.get_string("general.architecture");
  for (const auto& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) std::abort();
    if (t.n_dims < 1 || t.n_dims > 4) std::abort();
    for (int d = 0; d < 4; ++d) {
      if (t.ne[d] < 0) std::abort();
    }
    check_view(t.data, t.nbytes);
    if (t.nbytes > 0) sink = sink + t.data[0] + t.data[t.nbytes - 1];
    (void)t.shape_string();
  }
  return 0;
}
