// libFuzzer target: the session file reader (--session-dir files are untrusted: they may be
// truncated by a crash, corrupted on disk, or written by anyone). Each input is parsed as is,
// and again with a valid checksum appended, so that mutations reach the header checks behind
// the checksum. A crash, a sanitizer report or a parse that claims more bytes than the input
// holds is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "io/session_file.h"

namespace {

void check(std::span<const uint8_t> bytes) {
  ll3::Result<ll3::ParsedSessionFile> r = ll3::parse_session_file(bytes);
  if (!r.ok()) {
    if (r.message().empty()) std::abort();
    return;
  }
  const ll3::SessionFileHeader& h = r->header;
  const long double payload = 2.0L * h.n_layers * h.tokens.size() * h.row_bytes;
  if (r->payload_offset > bytes.size() || payload + r->payload_offset + 8 != bytes.size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check(std::span<const uint8_t>(data, size));
  std::vector<uint8_t> fixed(data, data + size);
  const uint64_t sum = ll3::session_body_checksum(fixed);
  fixed.resize(size + 8);
  std::memcpy(fixed.data() + size, &sum, 8);
  check(fixed);
  return 0;
}
