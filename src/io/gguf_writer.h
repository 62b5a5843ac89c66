// GGUF v3 writer. Metadata values are encoded when set; tensor data is either borrowed from the
// caller or produced by a fill callback at write time, one tensor at a time, so a multi-gigabyte
// model streams to disk without ever being held in memory whole. The file is written to
// `path.tmp` and renamed into place only when complete.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "io/gguf.h"

namespace ll3 {

// One encoded metadata value (its type and its payload bytes as they appear in the file).
class GgufWriteValue {
 public:
  static GgufWriteValue u8(uint8_t v);
  static GgufWriteValue i8(int8_t v);
  static GgufWriteValue u16(uint16_t v);
  static GgufWriteValue i16(int16_t v);
  static GgufWriteValue u32(uint32_t v);
  static GgufWriteValue i32(int32_t v);
  static GgufWriteValue u64(uint64_t v);
  static GgufWriteValue i64(int64_t v);
  static GgufWriteValue f32(float v);
  static GgufWriteValue f64(double v);
  static GgufWriteValue boolean(bool v);
  static GgufWriteValue string(std::string_view v);
  // An array of `count` packed little-endian numbers (or bools) of type `elem`.
  static GgufWriteValue numeric_array(GgufType elem, const void* elems, uint64_t count);
  static GgufWriteValue string_array(const std::vector<std::string>& v);
  // An array of arrays (or of any values); every item must have the same type.
  static GgufWriteValue array(const std::vector<GgufWriteValue>& items);

  GgufType type() const { return type_; }
  const std::string& payload() const { return payload_; }

 private:
  GgufType type_ = GgufType::U8;
  GgufType elem_type_ = GgufType::U8;  // ARRAY only
  std::string payload_;                // encoded bytes after the type id
};

class GgufWriter {
 public:
  // Fills the tensor's `nbytes` bytes at dst (called once, at write time).
  using FillFn = std::function<void(uint8_t* dst)>;

  // Sets (or replaces, keeping its place) a metadata key.
  void set(std::string_view key, GgufWriteValue value);
  void set_u8(std::string_view key, uint8_t v) { set(key, GgufWriteValue::u8(v)); }
  void set_i8(std::string_view key, int8_t v) { set(key, GgufWriteValue::i8(v)); }
  void set_u16(std::string_view key, uint16_t v) { set(key, GgufWriteValue::u16(v)); }
  void set_i16(std::string_view key, int16_t v) { set(key, GgufWriteValue::i16(v)); }
  void set_u32(std::string_view key, uint32_t v) { set(key, GgufWriteValue::u32(v)); }
  void set_i32(std::string_view key, int32_t v) { set(key, GgufWriteValue::i32(v)); }
  void set_u64(std::string_view key, uint64_t v) { set(key, GgufWriteValue::u64(v)); }
  void set_i64(std::string_view key, int64_t v) { set(key, GgufWriteValue::i64(v)); }
  void set_f32(std::string_view key, float v) { set(key, GgufWriteValue::f32(v)); }
  void set_f64(std::string_view key, double v) { set(key, GgufWriteValue::f64(v)); }
  void set_bool(std::string_view key, bool v) { set(key, GgufWriteValue::boolean(v)); }
  void set_string(std::string_view key, std::string_view v) { set(key, GgufWriteValue::string(v)); }
  void set_string_array(std::string_view key, const std::vector<std::string>& v) {
    set(key, GgufWriteValue::string_array(v));
  }
  void set_i32_array(std::string_view key, const std::vector<int32_t>& v) {
    set(key, GgufWriteValue::numeric_array(GgufType::I32, v.data(), v.size()));
  }
  void set_f32_array(std::string_view key, const std::vector<float>& v) {
    set(key, GgufWriteValue::numeric_array(GgufType::F32, v.data(), v.size()));
  }

  // Data-section alignment (a power of two, at least 8); also sets general.alignment (u32).
  // Without it the alignment is 32, which readers assume when the key is absent.
  Status set_alignment(uint32_t alignment);
  uint32_t alignment() const { return alignment_; }

  // Adds a tensor; ne[0] is the innermost (contiguous) dimension, at most 4 dims. `data` must
  // stay valid until write() returns.
  Status add_tensor(std::string_view name, DType type, const std::vector<int64_t>& ne,
                    const void* data);
  Status add_tensor(std::string_view name, DType type, const std::vector<int64_t>& ne, FillFn fill);

  size_t n_tensors() const { return tensors_.size(); }
  // Total bytes write() will produce.
  uint64_t file_size() const;

  Status write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    uint64_t nbytes = 0;
    uint64_t offset = 0;  // from the start of the data section
    const void* data = nullptr;
    FillFn fill;
  };
  Status add(std::string_view name, DType type, const std::vector<int64_t>& ne, const void* data,
             FillFn fill);
  std::string encode_header() const;

  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufWriteValue>> kv_;
  std::vector<Tensor> tensors_;
  uint64_t data_size_ = 0;  // data section bytes, with the padding between tensors
};

}  // namespace ll3
