#include "engine/session_store.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/mmap_file.h"
#include "io/session_file.h"

namespace ll3 {

SessionStore::SessionStore(BlockPool& pool, KvCache& kv, uint64_t model_id, int64_t max_blocks, std::string dir,
                           Logger log)
    : pool_(pool), kv_(kv), model_id_(model_id), max_blocks_(max_blocks), dir_(std::move(dir)), log_(std::move(log)) {}

SessionStore::~SessionStore() {
  if (writer_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    writer_.join();  // after the queued writes
    reap();
  }
  while (!entries_.empty()) unpin(entries_.size() - 1);
}

int64_t SessionStore::stamp_of(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec + (static_cast<int64_t>(st.st_size) << 1);
}

std::string SessionStore::path_for(const std::string& id) const {
  // The id is the client's text: the file name is a hash of it, never the id itself.
  char name[40];
  std::snprintf(name, sizeof(name), "%016llx%016llx.ll3s",
                static_cast<unsigned long long>(checksum64(id.data(), id.size(), 1)),
                static_cast<unsigned long long>(checksum64(id.data(), id.size(), 2)));
  return (std::filesystem::path(dir_) / name).string();
}

size_t SessionStore::find(const std::string& id) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].id == id) return i;
  }
  return entries_.size();
}

bool SessionStore::in_memory(const std::string& id) const { return find(id) < entries_.size(); }

int64_t SessionStore::pinned_blocks() const {
  int64_t n = 0;
  for (const Entry& e : entries_) n += static_cast<int64_t>(e.blocks.size());
  return n;
}

bool SessionStore::has_unsaved() const {
  for (const Entry& e : entries_) {
    if (unsaved(e) && e.queued_version < e.version) return true;
  }
  return false;
}

void SessionStore::unpin(size_t i) {
  for (auto it = entries_[i].blocks.rbegin(); it != entries_[i].blocks.rend(); ++it) pool_.release(*it);
  entries_.erase(entries_.begin() + static_cast<ptrdiff_t>(i));
}

void SessionStore::pin(const std::string& id, std::span<const int32_t> tokens, std::span<const int32_t> blocks) {
  for (int32_t b : blocks) pool_.retain(b);
  size_t i = find(id);
  if (i == entries_.size()) {
    entries_.push_back(Entry{});
    entries_.back().id = id;
  }
  Entry& e = entries_[i];
  for (auto it = e.blocks.rbegin(); it != e.blocks.rend(); ++it) pool_.release(*it);
  e.tokens.assign(tokens.begin(), tokens.end());
  e.blocks.assign(blocks.begin(), blocks.end());
  e.last_used = ++clock_;
  ++e.version;
  if (!dir_.empty()) save_behind(e);
  while (pinned_blocks() > max_blocks_ && evict_one()) {
  }
}

bool SessionStore::evict_one() {
  if (entries_.empty()) return false;
  size_t lru = 0;
  for (size_t i = 1; i < entries_.size(); ++i) {
    if (entries_[i].last_used < entries_[lru].last_used) lru = i;
  }
  if (unsaved(entries_[lru]) && entries_[lru].queued_version < entries_[lru].version) {
    Status st = save(entries_[lru]);
    if (!st.ok()) log_.warn("session " + entries_[lru].id + ": " + st.message());
  }
  unpin(lru);
  return true;
}

// Writes a session's file from its KV rows (on either thread: the rows are only read, through
// the const accessors that leave the blocks' versions alone).
Status SessionStore::write_file(const std::string& path, const std::string& id, std::span<const int32_t> tokens,
                                std::span<const int32_t> blocks) const {
  const KvCache& kv = kv_;
  const KvCacheConfig& c = kv.config();
  SessionFileHeader h;
  h.model_id = model_id_;
  h.kv_type = static_cast<uint32_t>(c.type);
  h.n_layers = static_cast<uint32_t>(c.n_layers);
  h.n_kv_heads = static_cast<uint32_t>(c.n_kv_heads);
  h.head_dim = static_cast<uint32_t>(c.head_dim);
  h.row_bytes = kv.row_bytes();
  h.id = id;
  h.tokens.assign(tokens.begin(), tokens.end());
  const int64_t bs = c.block_size;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  return write_session_file(path, h, [&](uint32_t layer, bool is_v, int64_t p) -> const void* {
    const int32_t b = blocks[static_cast<size_t>(p / bs)];
    return is_v ? kv.v_row(layer, b, p % bs) : kv.k_row(layer, b, p % bs);
  });
}

Status SessionStore::save(Entry& e) {
  const std::string path = path_for(e.id);
  Status st = write_file(path, e.id, e.tokens, e.blocks);
  if (st.ok()) {
    e.saved_version = e.version;
    e.file_stamp = stamp_of(path);
    ++saved;
  }
  return st;
}

// Hands the entry's current version to the writer thread, holding its blocks until reaped.
void SessionStore::save_behind(Entry& e) {
  Write w;
  w.id = e.id;
  w.path = path_for(e.id);
  w.tokens = e.tokens;
  w.blocks = e.blocks;
  w.version = e.version;
  for (int32_t b : w.blocks) pool_.retain(b);
  e.queued_version = e.version;
  ++in_flight_;
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(std::move(w));
    if (!writer_.joinable()) writer_ = std::thread([this] { writer_loop(); });
  }
  cv_.notify_one();
}

void SessionStore::writer_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything written
    Write w = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lk.unlock();
    w.result = write_file(w.path, w.id, w.tokens, w.blocks);
    w.stamp = w.result.ok() ? stamp_of(w.path) : 0;
    lk.lock();
    writing_ = false;
    done_.push_back(std::move(w));
    cv_.notify_all();  // drain() waits for this too
    if (on_written_) on_written_();
  }
}

void SessionStore::reap() {
  if (in_flight_ == 0) return;
  std::vector<Write> done;
  {
    std::lock_guard<std::mutex> lk(mu_);
    done.swap(done_);
  }
  for (Write& w : done) {
    --in_flight_;
    for (auto it = w.blocks.rbegin(); it != w.blocks.rend(); ++it) pool_.release(*it);
    const size_t i = find(w.id);
    if (!w.result.ok()) {
      log_.warn("session " + w.id + ": " + w.result.message());
      if (i < entries_.size() && entries_[i].queued_version == w.version) entries_[i].queued_version = 0;  // retry later
      continue;
    }
    ++saved;
    if (i < entries_.size() && entries_[i].saved_version < w.version) {
      entries_[i].saved_version = w.version;
      entries_[i].file_stamp = w.stamp;
    }
  }
}

void SessionStore::drain() {
  if (in_flight_ == 0) return;
  {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return queue_.empty() && !writing_; });
  }
  reap();
}

Status SessionStore::save_all() {
  Status first;
  if (dir_.empty()) return first;
  drain();
  for (Entry& e : entries_) {
    if (!unsaved(e)) continue;
    Status st = save(e);
    if (!st.ok() && first.ok()) first = st.with_context("session " + e.id + ": ");
  }
  return first;
}

// Why a parsed file cannot be used for session `id` by this store ("" when it can).
std::string SessionStore::mismatch(const SessionFileHeader& h, const std::string& id) const {
  const KvCacheConfig& c = kv_.config();
  if (h.id != id) return "it holds session \"" + h.id + "\"";
  if (h.model_id != model_id_) return "it was made with another model";
  if (h.kv_type != static_cast<uint32_t>(c.type) || h.row_bytes != kv_.row_bytes()) {
    return strprintf("its KV type is %s, this engine's is %s", std::string(dtype_name(static_cast<DType>(h.kv_type))).c_str(),
                     std::string(dtype_name(c.type)).c_str());
  }
  if (h.n_layers != c.n_layers || h.n_kv_heads != c.n_kv_heads || h.head_dim != c.head_dim) {
    return "its KV shape does not match the model";
  }
  return "";
}

// Copies a file's K and V rows (payload: each layer's K rows, then its V rows) into e's blocks,
// then names them, so that the session's next request finds them through the prefix cache.
void SessionStore::load(Entry& e, const uint8_t* payload, size_t row_bytes, uint64_t salt) {
  const KvCacheConfig& c = kv_.config();
  const int64_t n = static_cast<int64_t>(e.tokens.size()), bs = c.block_size;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const uint8_t* k = payload + static_cast<size_t>(2 * l) * n * row_bytes;
    const uint8_t* v = k + static_cast<size_t>(n) * row_bytes;
    for (int64_t p = 0; p < n; ++p) {
      const int32_t b = e.blocks[static_cast<size_t>(p / bs)];
      std::memcpy(kv_.k_row(l, b, p % bs), k + p * row_bytes, row_bytes);
      std::memcpy(kv_.v_row(l, b, p % bs), v + p * row_bytes, row_bytes);
    }
  }
  uint64_t chain = pool_.root_hash(salt);
  for (size_t i = 0; i < e.blocks.size(); ++i) {
    const int64_t len = std::min<int64_t>(bs, n - static_cast<int64_t>(i) * bs);
    chain = pool_.name(e.blocks[i], chain, std::span<const int32_t>(e.tokens).subspan(i * bs, static_cast<size_t>(len)));
  }
}

Status SessionStore::restore(const std::string& id, uint64_t salt) {
  if (dir_.empty()) return Status();
  const std::string path = path_for(id);
  const int64_t stamp = stamp_of(path);
  const size_t held = find(id);
  if (held < entries_.size()) {
    // Ours is current unless someone else wrote the file since (or a write of ours is pending).
    const Entry& e = entries_[held];
    if (stamp == 0 || stamp == e.file_stamp || e.queued_version > e.saved_version) return Status();
    drain();
    const size_t again = find(id);
    if (again < entries_.size()) unpin(again);  // its blocks stay cached for the lookup
  }
  if (stamp == 0) return Status();
  auto reject = [&](const std::string& why) {
    ++rejected;
    return Status::error("session file " + path + " rejected: " + why);
  };
  Result<MmapFile> f = MmapFile::open(path);
  if (!f.ok()) return reject(f.message());
  Result<ParsedSessionFile> pf = parse_session_file(std::span<const uint8_t>(f->data(), f->size()));
  if (!pf.ok()) return reject(pf.message());
  const SessionFileHeader& h = pf->header;
  if (std::string why = mismatch(h, id); !why.empty()) return reject(why);
  const int64_t n = static_cast<int64_t>(h.tokens.size()), bs = kv_.config().block_size;
  const int64_t need = (n + bs - 1) / bs;
  if (n == 0) return Status();
  if (need > max_blocks_ || need > pool_.available()) {
    return Status::errorf("session %s: %lld tokens do not fit the free KV blocks now; recomputing", id.c_str(),
                          static_cast<long long>(n));
  }
  Entry e;
  e.id = id;
  e.tokens = h.tokens;
  e.last_used = ++clock_;
  e.file_stamp = stamp;
  for (int64_t i = 0; i < need; ++i) e.blocks.push_back(pool_.allocate());
  load(e, f->data() + pf->payload_offset, static_cast<size_t>(h.row_bytes), salt);
  entries_.push_back(std::move(e));
  ++restored;
  while (pinned_blocks() > max_blocks_ && entries_.size() > 1 && evict_one()) {
  }
  return Status();
}

}  // namespace ll3
