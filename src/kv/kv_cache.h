// The KV cache: a pool of fixed-size blocks, each holding `block_size` consecutive positions of
// one sequence for every layer. A sequence addresses its positions through a block table
// (position p lives in block table[p / block_size], slot p % block_size), so sequences can grow,
// share nothing by accident, and be freed block by block.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/attention.h"

namespace ll3 {

struct KvCacheConfig {
  int64_t n_layers = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;     // a multiple of 32 for Q8_0 and Q4_0 (a head's slice: whole blocks)
  int64_t block_size = 16;  // positions per block
  int64_t n_blocks = 0;
  // F32, F16, Q8_0 (blocks of 32: an f16 scale, 32 int8) or Q4_0 (an f16 scale, 32 nibbles).
  DType type = DType::F16;
};

class KvCache {
 public:
  static Result<std::unique_ptr<KvCache>> create(const KvCacheConfig& cfg);

  const KvCacheConfig& config() const { return cfg_; }
  int64_t capacity_tokens() const { return cfg_.n_blocks * cfg_.block_size; }
  size_t bytes() const { return storage_bytes_; }

  // Elements of one position's K (or V) row of one layer: n_kv_heads * head_dim.
  int64_t row_elems() const { return cfg_.n_kv_heads * cfg_.head_dim; }
  // Bytes of such a row in cfg.type (Q8_0: row_elems() / 32 blocks of 34 bytes; Q4_0: of 18).
  size_t row_bytes() const { return row_bytes_; }

  // Writes position (block, slot)'s K and V rows of `layer`, row_elems() floats each (all KV
  // heads), converted to cfg.type.
  void store(int64_t layer, int32_t block, int64_t slot, const float* k, const float* v);
  // The same without counting the change: for the rows of one step, stored by several threads
  // at once (distinct positions, distinct bytes), whose caller then counts each row's block by
  // touch_block on one thread (the versions are plain counters).
  void store_uncounted(int64_t layer, int32_t block, int64_t slot, const float* k, const float* v);
  void touch_block(int32_t block) { touch(block); }
  // What attention reads of KV head kv_head of `layer` for a sequence with this block table
  // (which must outlive the view).
  kernels::KvHeadView head_view(int64_t layer, int64_t kv_head, std::span<const int32_t> block_table) const;

  // The raw K / V row of (layer, block, slot), row_bytes() bytes in cfg.type: what a session file
  // saves and restores as is. The writable ones count as a change of the block (version()).
  uint8_t* k_row(int64_t layer, int32_t block, int64_t slot) {
    touch(block);
    return row(k_, layer, block, slot);
  }
  uint8_t* v_row(int64_t layer, int32_t block, int64_t slot) {
    touch(block);
    return row(v_, layer, block, slot);
  }
  const uint8_t* k_row(int64_t layer, int32_t block, int64_t slot) const { return row(k_, layer, block, slot); }
  const uint8_t* v_row(int64_t layer, int32_t block, int64_t slot) const { return row(v_, layer, block, slot); }
  // Copies the first n positions of block src into block dst, every layer (copy on write).
  void copy_positions(int32_t src, int32_t dst, int64_t n);

  // A number that changes whenever anything of the block is written here (store, copy_positions,
  // a writable k_row / v_row): a device that mirrors the cache (the CUDA runner) re-uploads the
  // blocks whose version moved since it last synced them.
  uint64_t version(int32_t block) const { return versions_[static_cast<size_t>(block)]; }

 private:
  KvCache() = default;
  // layout per layer: [n_blocks][block_size][n_kv_heads][head_dim] elements (Q8_0: per row,
  // n_kv_heads * head_dim / 32 blocks, head after head).
  uint8_t* row(uint8_t* base, int64_t layer, int64_t block, int64_t slot) const {
    size_t idx = static_cast<size_t>((layer * cfg_.n_blocks + block) * cfg_.block_size + slot);
    return base + idx * row_bytes_;
  }

  void touch(int32_t block) { ++versions_[static_cast<size_t>(block)]; }

  KvCacheConfig cfg_;
  std::unique_ptr<uint64_t[]> versions_;  // (n_blocks)
  size_t row_bytes_ = 0;
  size_t head_bytes_ = 0;  // one KV head's slice of a row
  size_t storage_bytes_ = 0;
  void (*from_float_)(const float* src, void* dst, int64_t n) = nullptr;  // cfg.type's quantizer
  std::unique_ptr<uint8_t[]> storage_;
  uint8_t* k_ = nullptr;  // 64-byte aligned in storage_
  uint8_t* v_ = nullptr;
};

}  // namespace ll3
