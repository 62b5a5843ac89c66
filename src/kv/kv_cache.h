// The KV cache: a pool of fixed-size blocks, each holding `block_size` consecutive positions of
// one sequence for every layer. A sequence addresses its positions through a block table
// (position p lives in block table[p / block_size], slot p % block_size), so sequences can grow,
// share nothing by accident, and be freed block by block.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace ll3 {

struct KvCacheConfig {
  int64_t n_layers = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;  // positions per block
  int64_t n_blocks = 0;
  DType type = DType::F16;  // F32 or F16
};

class KvCache {
 public:
  static Result<std::unique_ptr<KvCache>> create(const KvCacheConfig& cfg);

  const KvCacheConfig& config() const { return cfg_; }
  int64_t capacity_tokens() const { return cfg_.n_blocks * cfg_.block_size; }
  size_t bytes() const { return storage_bytes_; }

  // Element stride between consecutive positions of one layer's K (or V) rows: n_kv_heads * head_dim.
  int64_t row_elems() const { return cfg_.n_kv_heads * cfg_.head_dim; }
  // Address of K / V for (layer, block, slot): row_elems() elements of cfg.type.
  // layout per layer: [n_blocks][block_size][n_kv_heads][head_dim]
  void* k_row(int64_t layer, int64_t block, int64_t slot) { return row(k_, layer, block, slot); }
  void* v_row(int64_t layer, int64_t block, int64_t slot) { return row(v_, layer, block, slot); }
  const void* k_row(int64_t layer, int64_t block, int64_t slot) const { return row(k_, layer, block, slot); }
  const void* v_row(int64_t layer, int64_t block, int64_t slot) const { return row(v_, layer, block, slot); }

  // Block allocation (a free list; allocation never touches the heap after create()).
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  // Appends n block ids to *table, or fails with "KV cache full" leaving *table unchanged.
  Status allocate(int64_t n, std::vector<int32_t>* table);
  void release(std::span<const int32_t> blocks);

 private:
  KvCache() = default;
  uint8_t* row(uint8_t* base, int64_t layer, int64_t block, int64_t slot) const {
    size_t idx = static_cast<size_t>((layer * cfg_.n_blocks + block) * cfg_.block_size + slot);
    return base + idx * row_bytes_;
  }

  KvCacheConfig cfg_;
  size_t row_bytes_ = 0;
  size_t storage_bytes_ = 0;
  std::unique_ptr<uint8_t[]> storage_;
  uint8_t* k_ = nullptr;
  uint8_t* v_ = nullptr;
  std::vector<int32_t> free_;  // stack of free block ids
};

}  // namespace ll3
