#include "kv/kv_cache.h"

#include <algorithm>
#include <limits>
#include <new>

namespace ll3 {

Result<std::unique_ptr<KvCache>> KvCache::create(const KvCacheConfig& cfg) {
  if (cfg.type != DType::F32 && cfg.type != DType::F16) {
    return Status::errorf("KV cache type must be f32 or f16, not %s", std::string(dtype_name(cfg.type)).c_str());
  }
  if (cfg.n_layers <= 0 || cfg.n_kv_heads <= 0 || cfg.head_dim <= 0 || cfg.block_size <= 0 ||
      cfg.n_blocks <= 0 || cfg.n_blocks > std::numeric_limits<int32_t>::max()) {
    return Status::error("KV cache: invalid configuration");
  }
  std::unique_ptr<KvCache> kv(new KvCache());
  kv->cfg_ = cfg;
  size_t elem = cfg.type == DType::F32 ? 4 : 2;
  kv->row_bytes_ = static_cast<size_t>(cfg.n_kv_heads * cfg.head_dim) * elem;
  size_t rows = static_cast<size_t>(cfg.n_layers * cfg.n_blocks * cfg.block_size);
  kv->storage_bytes_ = 2 * rows * kv->row_bytes_;
  kv->storage_.reset(new (std::nothrow) uint8_t[kv->storage_bytes_]);
  if (!kv->storage_) {
    return Status::errorf("KV cache: cannot allocate %.1f MiB", kv->storage_bytes_ / 1048576.0);
  }
  kv->k_ = kv->storage_.get();
  kv->v_ = kv->k_ + rows * kv->row_bytes_;
  kv->free_.resize(static_cast<size_t>(cfg.n_blocks));
  // Hand out low block ids first (pop from the back).
  for (int64_t i = 0; i < cfg.n_blocks; ++i) kv->free_[i] = static_cast<int32_t>(cfg.n_blocks - 1 - i);
  return kv;
}

Status KvCache::allocate(int64_t n, std::vector<int32_t>* table) {
  if (n > free_blocks()) {
    return Status::errorf("KV cache full: need %lld more blocks of %lld positions, %lld free",
                          static_cast<long long>(n), static_cast<long long>(cfg_.block_size),
                          static_cast<long long>(free_blocks()));
  }
  for (int64_t i = 0; i < n; ++i) {
    table->push_back(free_.back());
    free_.pop_back();
  }
  return Status();
}

void KvCache::release(std::span<const int32_t> blocks) {
  for (int32_t b : blocks) free_.push_back(b);
}

}  // namespace ll3
