// SHA-256 (FIPS 180-4), incremental. Used to compare dequantized tensors with reference hashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ll3 {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  // The digest as 64 lowercase hex characters; the object must not be updated afterwards.
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);  // one 64-byte block
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;  // bytes hashed
};

std::string sha256_hex(std::string_view data);

}  // namespace ll3
