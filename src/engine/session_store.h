// Sessions: the KV of a named conversation pinned in the block pool after its request ends, so
// the next turn computes only its new tokens. The pinned blocks are ordinary named blocks of the
// prefix cache (the next request finds them by lookup); a session only holds references to them,
// within a budget of blocks. With a directory, sessions are saved there (on idle, when unpinned,
// at shutdown) and restored on demand, so a restarted engine continues a conversation.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/log.h"
#include "core/status.h"
#include "kv/block_pool.h"
#include "kv/kv_cache.h"

namespace ll3 {

class SessionStore {
 public:
  SessionStore(BlockPool& pool, KvCache& kv, uint64_t model_id, int64_t max_blocks, std::string dir, Logger log = {});
  ~SessionStore();

  // After a request of session `id` ended with KV for `tokens` in `blocks`: pins those blocks
  // (and drops the session's previous pins). Over budget, the least recently used sessions are
  // unpinned (saved first).
  void pin(const std::string& id, std::span<const int32_t> tokens, std::span<const int32_t> blocks);
  bool in_memory(const std::string& id) const;
  // Restores session `id` from its file into blocks of the pool (named and pinned). OK when
  // there is no file or no directory; an error says why the file was rejected (it is never
  // used then, and the session is recomputed).
  Status restore(const std::string& id);
  // Unpins the least recently used session, saving it first if its KV is unsaved. False if none.
  bool evict_one();
  // Saves every session whose KV is unsaved; the first error, if any.
  Status save_all();
  bool has_unsaved() const;

  int64_t sessions() const { return static_cast<int64_t>(entries_.size()); }
  int64_t pinned_blocks() const;
  int64_t saved = 0, restored = 0, rejected = 0;
  std::string path_for(const std::string& id) const;

 private:
  struct Entry {
    std::string id;
    std::vector<int32_t> tokens;
    std::vector<int32_t> blocks;
    uint64_t last_used = 0;
    bool dirty = false;
  };
  Status save(Entry& e);
  void unpin(size_t i);
  size_t find(const std::string& id) const;  // entries_.size() if absent

  BlockPool& pool_;
  KvCache& kv_;
  uint64_t model_id_;
  int64_t max_blocks_;
  std::string dir_;
  Logger log_;
  uint64_t clock_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace ll3
