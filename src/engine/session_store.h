// Sessions: the KV of a named conversation pinned in the block pool after its request ends, so
// the next turn computes only its new tokens. The pinned blocks are ordinary named blocks of the
// prefix cache (the next request finds them by lookup); a session only holds references to them,
// within a budget of blocks. With a directory, a session is saved there when its turn ends, by a
// writer thread of its own (write-behind: the engine's steps never wait for the disk), and when
// it is unpinned and at shutdown if still unsaved; it is restored on demand, so a restarted
// engine, or another replica sharing the directory, continues the conversation.
//
// Threads: every method runs on the owner's thread (the engine's); the writer thread only reads
// KV rows of blocks that a write holds a reference to (named blocks are never written while
// referenced), and reap() gives those references back.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "core/status.h"
#include "io/session_file.h"
#include "kv/block_pool.h"
#include "kv/kv_cache.h"

namespace ll3 {

class SessionStore {
 public:
  SessionStore(BlockPool& pool, KvCache& kv, uint64_t model_id, int64_t max_blocks, std::string dir, Logger log = {});
  ~SessionStore();

  // After a request of session `id` ended with KV for `tokens` in `blocks`: pins those blocks
  // (and drops the session's previous pins). Over budget, the least recently used sessions are
  // unpinned (saved first). With a directory, the writer thread then saves it.
  void pin(const std::string& id, std::span<const int32_t> tokens, std::span<const int32_t> blocks);
  bool in_memory(const std::string& id) const;
  // Restores session `id` from its file into blocks of the pool (named and pinned). OK when
  // there is no file or no directory; an error says why the file was rejected (it is never
  // used then, and the session is recomputed). A session in memory is kept unless the file
  // changed since this store last wrote or read it (another replica's newer turn): then the
  // file is read, and the old blocks stay in the prefix cache, so a request finds the longer of
  // the two.
  // Its blocks are named in the chain of `salt` (BlockPool::root_hash: a LoRA set's, 0 the base's).
  Status restore(const std::string& id, uint64_t salt = 0);
  // Unpins the least recently used session, saving it first if its KV is unsaved. False if none.
  bool evict_one();
  // Waits for the writer thread, then saves every session still unsaved; the first error.
  Status save_all();
  bool has_unsaved() const;
  // Gives back the blocks of finished writes and counts them (call on the owner's thread).
  void reap();
  // Called on the writer thread after each write, so the owner can wake up and reap it.
  void set_on_written(std::function<void()> fn) {
    std::lock_guard<std::mutex> lk(mu_);
    on_written_ = std::move(fn);
  }
  int64_t writes_in_flight() const { return in_flight_; }

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
    uint64_t version = 0;        // bumped by each pin
    uint64_t saved_version = 0;  // the version the file holds
    uint64_t queued_version = 0; // the latest version handed to the writer
    int64_t file_stamp = 0;      // the file as this store last wrote or read it (stamp_of)
  };
  // One write-behind: the session's tokens and blocks (referenced until reaped) at a version.
  struct Write {
    std::string id, path;
    std::vector<int32_t> tokens, blocks;
    uint64_t version = 0;
    Status result;
    int64_t stamp = 0;
  };
  bool unsaved(const Entry& e) const { return !dir_.empty() && e.saved_version < e.version; }
  Status write_file(const std::string& path, const std::string& id, std::span<const int32_t> tokens,
                    std::span<const int32_t> blocks) const;
  Status save(Entry& e);
  void save_behind(Entry& e);
  std::string mismatch(const SessionFileHeader& h, const std::string& id) const;
  void load(Entry& e, const uint8_t* payload, size_t row_bytes, uint64_t salt);
  void writer_loop();
  void drain();
  void unpin(size_t i);
  size_t find(const std::string& id) const;  // entries_.size() if absent
  // The file's modification time and size folded into one number (0: no file).
  static int64_t stamp_of(const std::string& path);

  BlockPool& pool_;
  KvCache& kv_;
  uint64_t model_id_;
  int64_t max_blocks_;
  std::string dir_;
  Logger log_;
  uint64_t clock_ = 0;
  std::vector<Entry> entries_;

  // The writer thread and its queue, under mu_.
  std::thread writer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Write> queue_;
  std::vector<Write> done_;
  bool writing_ = false, stop_ = false;
  int64_t in_flight_ = 0;  // writes queued and not yet reaped (owner's thread)
  std::function<void()> on_written_;
};

}  // namespace ll3
