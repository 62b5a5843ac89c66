#include "io/session_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <cstring>
#include <filesystem>
#include <limits>

namespace ll3 {

namespace {

constexpr char kMagic[8] = {'L', 'L', '3', 'S', 'E', 'S', 'S', '\0'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxIdBytes = 4096;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Bounds-checked little-endian reads over the file's bytes.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  bool has(size_t n) const { return n <= b_.size() - pos_; }
  template <class T>
  bool get(T* v) {
    if (!has(sizeof(T))) return false;
    std::memcpy(v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool bytes(void* out, size_t n) {
    if (n == 0) return true;  // out may be the null data() of an empty vector
    if (!has(n)) return false;
    std::memcpy(out, b_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  size_t pos() const { return pos_; }

 private:
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
};

// Buffered writer that checksums what it writes.
class Writer {
 public:
  explicit Writer(int fd) : fd_(fd) {}
  void put(const void* data, size_t n) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    while (n > 0 && ok_) {
      const size_t take = std::min(n, sizeof(buf_) - len_);
      std::memcpy(buf_ + len_, p, take);
      len_ += take;
      p += take;
      n -= take;
      if (len_ == sizeof(buf_)) flush_block();
    }
  }
  template <class T>
  void put(const T& v) {
    put(&v, sizeof(T));
  }
  // Writes the checksum of everything so far, then flushes.
  bool finish() {
    if (len_ > 0) flush_block();
    const uint64_t sum = state_;
    std::memcpy(buf_, &sum, 8);
    len_ = 8;
    write_out();
    return ok_;
  }

 private:
  // The checksum runs over whole 1 MiB blocks chained by seed, then the tail (checksum64 over
  // the file in the same block steps gives the same value).
  void flush_block() {
    state_ = checksum64(buf_, len_, state_);
    write_out();
  }
  void write_out() {
    size_t off = 0;
    while (off < len_ && ok_) {
      ssize_t w = ::write(fd_, buf_ + off, len_ - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) ok_ = false;
      else off += static_cast<size_t>(w);
    }
    len_ = 0;
  }
  int fd_;
  bool ok_ = true;
  uint64_t state_ = 0;
  size_t len_ = 0;
  uint8_t buf_[1 << 20];
};

}  // namespace

uint64_t session_body_checksum(std::span<const uint8_t> b) {
  uint64_t s = 0;
  for (size_t off = 0; off < b.size(); off += 1 << 20) s = checksum64(b.data() + off, std::min<size_t>(1 << 20, b.size() - off), s);
  return s;
}

uint64_t checksum64(const void* data, size_t n, uint64_t seed) {
  // Four independent multiply-rotate lanes over 8-byte words (several GB/s), then the tail.
  constexpr uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full;
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t a[4] = {seed + P1 + P2, seed + P2, seed, seed - P1};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      a[l] = rotl(a[l] + w * P2, 31) * P1;
    }
  }
  uint64_t h = rotl(a[0], 1) + rotl(a[1], 7) + rotl(a[2], 12) + rotl(a[3], 18) + n;
  for (; i < n; ++i) h = rotl(h ^ (p[i] * P1), 11) * P2;
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  return h;
}

Result<ParsedSessionFile> parse_session_file(std::span<const uint8_t> bytes) {
  if (bytes.size() < sizeof(kMagic) + 8 || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return Status::error("not an ll3 session file (bad magic)");
  }
  const size_t body = bytes.size() - 8;
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + body, 8);
  if (session_body_checksum(bytes.first(body)) != stored) {
    return Status::error("checksum mismatch: the file is corrupt or truncated");
  }
  Reader r(bytes.first(body));
  char magic[8];
  ParsedSessionFile out;
  SessionFileHeader& h = out.header;
  uint32_t version = 0, id_len = 0;
  uint64_t n_tokens = 0;
  if (!r.bytes(magic, 8) || !r.get(&version)) return Status::error("truncated header");
  if (version != kVersion) return Status::errorf("unsupported session file version %u (this ll3 reads %u)", version, kVersion);
  if (!r.get(&h.model_id) || !r.get(&h.kv_type) || !r.get(&h.n_layers) || !r.get(&h.n_kv_heads) ||
      !r.get(&h.head_dim) || !r.get(&h.row_bytes) || !r.get(&id_len)) {
    return Status::error("truncated header");
  }
  if (id_len > kMaxIdBytes || !r.has(id_len)) return Status::errorf("session id of %u bytes is invalid", id_len);
  h.id.resize(id_len);
  if (!r.bytes(h.id.data(), id_len) || !r.get(&n_tokens)) return Status::error("truncated header");
  if (n_tokens > (body - r.pos()) / 4) return Status::errorf("%llu tokens do not fit the file", static_cast<unsigned long long>(n_tokens));
  h.tokens.resize(static_cast<size_t>(n_tokens));
  if (!r.bytes(h.tokens.data(), n_tokens * 4)) return Status::error("truncated token list");
  out.payload_offset = r.pos();
  // The rows: exactly 2 * n_layers * n_tokens * row_bytes bytes, computed without overflow.
  const size_t rest = body - r.pos();
  const long double want = 2.0L * h.n_layers * static_cast<long double>(n_tokens) * static_cast<long double>(h.row_bytes);
  if (h.n_layers == 0 || h.row_bytes == 0 || want != static_cast<long double>(rest)) {
    return Status::errorf("KV payload of %zu bytes does not match %u layers x %llu tokens x %llu bytes", rest,
                          h.n_layers, static_cast<unsigned long long>(n_tokens),
                          static_cast<unsigned long long>(h.row_bytes));
  }
  return out;
}

Status write_session_file(const std::string& path, const SessionFileHeader& h,
                          FunctionRef<const void*(uint32_t layer, bool is_v, int64_t pos)> row) {
  // A temporary name of this writer's own: replicas sharing a session directory, or two threads
  // of one, may write the same session at once; each renames a whole file over the last.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = strprintf("%s.%d.%llu.tmp", path.c_str(), static_cast<int>(::getpid()),
                                    static_cast<unsigned long long>(counter.fetch_add(1)));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::errorf("cannot create %s: %s", tmp.c_str(), std::strerror(errno));
  auto w = std::make_unique<Writer>(fd);
  w->put(kMagic, sizeof(kMagic));
  w->put(kVersion);
  w->put(h.model_id);
  w->put(h.kv_type);
  w->put(h.n_layers);
  w->put(h.n_kv_heads);
  w->put(h.head_dim);
  w->put(h.row_bytes);
  w->put(static_cast<uint32_t>(h.id.size()));
  w->put(h.id.data(), h.id.size());
  w->put(static_cast<uint64_t>(h.tokens.size()));
  w->put(h.tokens.data(), h.tokens.size() * 4);
  const int64_t n = static_cast<int64_t>(h.tokens.size());
  for (uint32_t l = 0; l < h.n_layers; ++l) {
    for (int is_v = 0; is_v < 2; ++is_v) {
      for (int64_t p = 0; p < n; ++p) w->put(row(l, is_v != 0, p), h.row_bytes);
    }
  }
  const bool ok = w->finish() && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    return Status::errorf("cannot write %s: %s", tmp.c_str(), std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Status::errorf("cannot rename %s to %s: %s", tmp.c_str(), path.c_str(), std::strerror(errno));
  }
  // The rename itself reaches the disk: a node that fails now still has the file.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status();
}

}  // namespace ll3
