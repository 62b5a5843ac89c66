// The file a session's KV is saved in (--session-dir): which model and KV layout it belongs to,
// the session's tokens, and their K and V rows, with a checksum over all of it.
//
// Layout (little-endian):
//   "LL3SESS\0" | u32 version | u64 model_id | u32 kv_type (DType) | u32 n_layers |
//   u32 n_kv_heads | u32 head_dim | u64 row_bytes | u32 id_len | id | u64 n_tokens |
//   i32 tokens[n_tokens] | for each layer: K rows (n_tokens * row_bytes), V rows |
//   u64 checksum of everything before it (checksum64)
// Untrusted input: a file is checked whole (sizes, checksum, identity) before any of it is used.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"  // FunctionRef

namespace ll3 {

struct SessionFileHeader {
  uint64_t model_id = 0;
  uint32_t kv_type = 0;
  uint32_t n_layers = 0, n_kv_heads = 0, head_dim = 0;
  uint64_t row_bytes = 0;
  std::string id;
  std::vector<int32_t> tokens;
};

// A fast 64-bit checksum (not cryptographic: it catches corruption, not forgery).
uint64_t checksum64(const void* data, size_t n, uint64_t seed = 0);

// The checksum a session file stores after `body` (everything before the checksum): checksum64
// over 1 MiB pieces, each seeded with the previous result.
uint64_t session_body_checksum(std::span<const uint8_t> body);

struct ParsedSessionFile {
  SessionFileHeader header;
  size_t payload_offset = 0;  // K rows of layer l at payload_offset + 2 * l * n_tokens * row_bytes
};
// Checks and parses a whole session file held in memory.
Result<ParsedSessionFile> parse_session_file(std::span<const uint8_t> bytes);

// Writes `path` atomically (a temporary file in the same directory, flushed, then renamed).
// row(layer, is_v, position) gives the row_bytes bytes of one position's K or V.
Status write_session_file(const std::string& path, const SessionFileHeader& header,
                          FunctionRef<const void*(uint32_t layer, bool is_v, int64_t pos)> row);

}  // namespace ll3
