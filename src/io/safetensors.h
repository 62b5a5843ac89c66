// Safetensors reader (Hugging Face checkpoints). A file is an 8-byte little-endian header length,
// a JSON header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then
// the tensor bytes. The file is mmapped and tensors are views into the map. Every header field is
// validated against the file, so a hostile file gives a Status that says what and where.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/mmap_file.h"
#include "core/status.h"

namespace ll3 {

struct SafetensorsTensor {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> shape;  // outermost first, as stored ([rows, cols] for a matrix)
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
  uint64_t offset = 0;  // from the start of the data section
  int64_t n_elements() const;
  std::string shape_string() const;  // "[2048, 8192]"
};

class SafetensorsFile {
 public:
  // The header may not exceed this many bytes (real checkpoints have a few hundred KB).
  static constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path, MapMode mode = MapMode::kMap);
  // Parse a buffer the caller keeps alive (tests, fuzzing). `origin` names it in errors.
  static Result<std::unique_ptr<SafetensorsFile>> parse(const uint8_t* data, size_t size,
                                                        std::string origin = "<buffer>");

  const std::string& origin() const { return origin_; }
  // Tensors in data-offset order.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;
  // "__metadata__" string entries.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  Status parse_all();

  MmapFile map_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string origin_;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// A Hugging Face model directory: model.safetensors, or shards listed by
// model.safetensors.index.json ("weight_map": {tensor name: shard file}).
class SafetensorsModel {
 public:
  static Result<std::unique_ptr<SafetensorsModel>> open_dir(const std::string& dir, MapMode mode = MapMode::kMap);

  const std::string& dir() const { return dir_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
  // nullptr when no shard holds `name`.
  const SafetensorsTensor* find_tensor(std::string_view name) const;
  size_t n_tensors() const { return by_name_.size(); }
  // Every tensor, by name.
  const std::map<std::string, const SafetensorsTensor*, std::less<>>& tensors() const {
    return by_name_;
  }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, const SafetensorsTensor*, std::less<>> by_name_;
};

// Writing (Hugging Face export, tests). Each tensor's bytes come from `fill` (called once, in
// order, into a buffer of exactly its size); the header is padded with spaces to 8 bytes.
struct SafetensorsWriteTensor {
  std::string name;
  DType type = DType::F32;     // F32, F16 or BF16
  std::vector<int64_t> shape;  // outermost first
  std::function<void(uint8_t* dst)> fill;
};
Status write_safetensors(const std::string& path,
                         const std::vector<SafetensorsWriteTensor>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace ll3
