#include "core/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>

#include "core/resource_limits.h"

namespace ll3 {

MmapFile::~MmapFile() { reset(); }

MmapFile::MmapFile(MmapFile&& o) noexcept
    : data_(o.data_), size_(o.size_), map_bytes_(o.map_bytes_), copied_(o.copied_), path_(std::move(o.path_)) {
  o.data_ = nullptr;
  o.size_ = o.map_bytes_ = 0;
}

MmapFile& MmapFile::operator=(MmapFile&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = o.data_;
    size_ = o.size_;
    path_ = std::move(o.path_);
    map_bytes_ = o.map_bytes_;
    copied_ = o.copied_;
    o.data_ = nullptr;
    o.size_ = o.map_bytes_ = 0;
  }
  return *this;
}

void MmapFile::reset() {
  if (data_ != nullptr && map_bytes_ > 0) munmap(const_cast<uint8_t*>(data_), map_bytes_);
  data_ = nullptr;
  size_ = map_bytes_ = 0;
  copied_ = false;
}

namespace {

// Reads the file into fresh anonymous memory advised for huge pages, then makes it read-only.
Result<void*> read_into_huge_pages(int fd, const std::string& path, size_t size, size_t* map_bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  *map_bytes = (size + kHuge - 1) / kHuge * kHuge;
  void* p = mmap(nullptr, *map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return Status::errorf("%s: cannot allocate %zu bytes for the weights: %s", path.c_str(), *map_bytes,
                          std::strerror(errno));
  }
  madvise(p, *map_bytes, MADV_HUGEPAGE);  // advisory: without THP the copy still works
  for (size_t off = 0; off < size;) {
    const ssize_t r = pread(fd, static_cast<char*>(p) + off, std::min<size_t>(size - off, size_t{64} << 20),
                            static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const int e = r < 0 ? errno : EIO;
      munmap(p, *map_bytes);
      return Status::errorf("%s: read failed at byte %zu of %zu: %s", path.c_str(), off, size, std::strerror(e));
    }
    off += static_cast<size_t>(r);
  }
  mprotect(p, *map_bytes, PROT_READ);
  return p;
}

// MemAvailable from /proc/meminfo in bytes; 0 when unknown.
uint64_t available_memory() {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
  }
  std::fclose(f);
  return static_cast<uint64_t>(kb) * 1024;
}

bool huge_pages_possible() {
  FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (f == nullptr) return false;
  char buf[128] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  return n > 0 && std::strstr(buf, "[never]") == nullptr;
}

}  // namespace

uint8_t* MmapFile::unseal() {
  if (!copied_ || data_ == nullptr) return nullptr;
  auto* p = const_cast<uint8_t*>(data_);  // our own anonymous memory, mapped read-write
  if (mprotect(p, map_bytes_, PROT_READ | PROT_WRITE) != 0) return nullptr;
  return p;
}

void MmapFile::seal() {
  if (copied_ && data_ != nullptr) mprotect(const_cast<uint8_t*>(data_), map_bytes_, PROT_READ);
}

MapMode auto_map_mode(uint64_t bytes) {
  // Within a container's memory limit too: a copy is anonymous memory, charged to the cgroup.
  const int64_t room = memory_within(read_resource_limits(), static_cast<int64_t>(available_memory()));
  return huge_pages_possible() && bytes <= static_cast<uint64_t>(std::max<int64_t>(room, 0)) / 2 ? MapMode::kHugeCopy
                                                                                                 : MapMode::kMap;
}

Result<MmapFile> MmapFile::open(const std::string& path, MapMode mode) {
  // A signal (a SIGTERM that ll3 serve handles on another thread) interrupts an open that waits
  // (a FIFO, a network file system): it is no reason to fail.
  int fd;
  while ((fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (fd < 0) return Status::errorf("%s: cannot open: %s", path.c_str(), std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status::errorf("%s: cannot stat: %s", path.c_str(), std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::errorf("%s: not a regular file", path.c_str());
  }
  MmapFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ > 0 && mode == MapMode::kHugeCopy) {
    Result<void*> p = read_into_huge_pages(fd, path, f.size_, &f.map_bytes_);
    ::close(fd);
    if (!p.ok()) {
      f.size_ = f.map_bytes_ = 0;
      return p.status();
    }
    f.data_ = static_cast<const uint8_t*>(p.value());
    f.copied_ = true;
    return f;
  }
  if (f.size_ > 0) {
    f.map_bytes_ = f.size_;
    void* p = mmap(nullptr, f.size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      f.size_ = f.map_bytes_ = 0;
      return Status::errorf("%s: mmap failed: %s", path.c_str(), std::strerror(e));
    }
    f.data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

}  // namespace ll3
