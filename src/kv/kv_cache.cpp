#include "kv/kv_cache.h"

#include <cstring>

#include <algorithm>
#include <limits>
#include <new>

#include "kernels/quant_blocks.h"
#include "kernels/type_traits.h"

namespace ll3 {

Result<std::unique_ptr<KvCache>> KvCache::create(const KvCacheConfig& cfg) {
  const bool blocks = cfg.type == DType::Q8_0 || cfg.type == DType::Q4_0;
  if (cfg.type != DType::F32 && cfg.type != DType::F16 && !blocks) {
    return Status::errorf("KV cache type must be f32, f16, q8_0 or q4_0, not %s",
                          std::string(dtype_name(cfg.type)).c_str());
  }
  if (cfg.n_layers <= 0 || cfg.n_kv_heads <= 0 || cfg.head_dim <= 0 || cfg.block_size <= 0 ||
      cfg.n_blocks <= 0 || cfg.n_blocks > std::numeric_limits<int32_t>::max()) {
    return Status::error("KV cache: invalid configuration");
  }
  if (blocks && cfg.head_dim % quant::kQK != 0) {
    return Status::errorf("KV cache type %s needs a head dimension that is a multiple of %d (blocks of %d "
                          "per head); this model's is %lld",
                          std::string(dtype_name(cfg.type)).c_str(), quant::kQK, quant::kQK,
                          static_cast<long long>(cfg.head_dim));
  }
  std::unique_ptr<KvCache> kv(new KvCache());
  kv->cfg_ = cfg;
  kv->head_bytes_ = dtype_row_bytes(cfg.type, cfg.head_dim);
  kv->row_bytes_ = static_cast<size_t>(cfg.n_kv_heads) * kv->head_bytes_;
  // The scalar quantizer of each type (Q8_0: d = amax / 127, q = round(x / d); Q4_0: d = the
  // signed absmax / -8; as GGUF files).
  kv->from_float_ = type_traits(cfg.type)->from_float;
  size_t rows = static_cast<size_t>(cfg.n_layers * cfg.n_blocks * cfg.block_size);
  kv->storage_bytes_ = 2 * rows * kv->row_bytes_;
  // 64 bytes more, to start K on a cache line: the attention kernels prefetch whole lines.
  kv->storage_.reset(new (std::nothrow) uint8_t[kv->storage_bytes_ + 64]);
  if (!kv->storage_) {
    return Status::errorf("KV cache: cannot allocate %.1f MiB", kv->storage_bytes_ / 1048576.0);
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(kv->storage_.get());
  kv->k_ = kv->storage_.get() + ((64 - base % 64) % 64);
  kv->v_ = kv->k_ + rows * kv->row_bytes_;
  kv->versions_.reset(new (std::nothrow) uint64_t[static_cast<size_t>(cfg.n_blocks)]());
  if (!kv->versions_) return Status::error("KV cache: cannot allocate its block versions");
  return kv;
}

void KvCache::store(int64_t layer, int32_t block, int64_t slot, const float* k, const float* v) {
  touch(block);
  store_uncounted(layer, block, slot, k, v);
}

void KvCache::store_uncounted(int64_t layer, int32_t block, int64_t slot, const float* k, const float* v) {
  from_float_(k, row(k_, layer, block, slot), row_elems());
  from_float_(v, row(v_, layer, block, slot), row_elems());
}

kernels::KvHeadView KvCache::head_view(int64_t layer, int64_t kv_head, std::span<const int32_t> block_table) const {
  kernels::KvHeadView view;
  const size_t head = static_cast<size_t>(kv_head) * head_bytes_;
  view.k = row(k_, layer, 0, 0) + head;
  view.v = row(v_, layer, 0, 0) + head;
  view.slot_bytes = row_bytes_;
  view.block_size = cfg_.block_size;
  view.block_table = block_table.data();
  view.type = cfg_.type;
  return view;
}

void KvCache::copy_positions(int32_t src, int32_t dst, int64_t n) {
  // A block's positions are consecutive rows of each layer: one copy per layer for K and V.
  touch(dst);
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    std::memcpy(row(k_, l, dst, 0), row(k_, l, src, 0), static_cast<size_t>(n) * row_bytes_);
    std::memcpy(row(v_, l, dst, 0), row(v_, l, src, 0), static_cast<size_t>(n) * row_bytes_);
  }
}

}  // namespace ll3
