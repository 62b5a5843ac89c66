// GGUF v2/v3 reader. The file is mmapped; metadata strings and tensor data are views into the map
// (never copied). Every offset and count is checked against the file before it is used, so a
// hostile file yields a Status that says what and where, never a crash or an out-of-bounds read.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/mmap_file.h"
#include "core/status.h"

namespace ll3 {

enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
const char* gguf_type_name(GgufType t);

// One metadata value. Scalars are widened into i/u/f; strings are views into the file.
// Arrays of numbers keep a pointer to their packed little-endian elements; arrays of strings
// a vector of views; arrays of arrays a vector of values.
struct GgufValue {
  GgufType type = GgufType::U8;
  int64_t i = 0;   // signed integer types and BOOL
  uint64_t u = 0;  // unsigned integer types
  double f = 0;    // F32 / F64
  std::string_view str;

  GgufType elem_type = GgufType::U8;  // ARRAY only
  uint64_t count = 0;                 // ARRAY only
  const uint8_t* elems = nullptr;     // ARRAY of numbers / bools: packed elements
  std::vector<std::string_view> strings;  // ARRAY of STRING
  std::vector<GgufValue> items;           // ARRAY of ARRAY

  bool is_integer() const;
  bool is_float() const { return type == GgufType::F32 || type == GgufType::F64; }
  // Integer value of an integer-typed scalar; nullopt for other types or an out-of-range u64.
  std::optional<int64_t> as_int() const;
  // Numeric value of an integer or float scalar.
  std::optional<double> as_number() const;
  // Element k of a numeric array as a number (k < count, numeric elem_type).
  std::optional<double> array_number(uint64_t k) const;
  std::optional<int64_t> array_int(uint64_t k) const;
};

struct GgufTensorInfo {
  std::string name;
  DType type = DType::F32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the contiguous (innermost) dimension
  uint64_t offset = 0;           // from the start of the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // into the map
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  std::string shape_string() const;  // "[4096, 128256]"
};

class GgufFile {
 public:
  // mmap and parse `path`.
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path, MapMode mode = MapMode::kMap);
  // Parse a buffer the caller keeps alive (tests, fuzzing). `origin` names it in errors.
  static Result<std::unique_ptr<GgufFile>> parse(const uint8_t* data, size_t size,
                                                 std::string origin = "<buffer>");

  uint32_t version() const { return version_; }
  const std::string& origin() const { return origin_; }
  size_t file_size() const { return size_; }
  size_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }

  // Metadata in file order, and lookup by key.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<std::string_view> get_string(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  // The file's memory when it is a private copy (MapMode::kHugeCopy), for rearranging tensors
  // in place (MmapFile::unseal / seal); nullptr when mapped or parsed from a buffer.
  MmapFile* private_copy() { return map_.copied() ? &map_ : nullptr; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  Status parse_all();
  // parse_all's last step: where the data section starts (the first multiple of the alignment
  // at or after `header_end`) and each tensor's bytes, checked against the file's end.
  Status locate_tensor_data(size_t header_end);

  MmapFile map_;  // empty when parsing a caller's buffer
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string origin_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace ll3
