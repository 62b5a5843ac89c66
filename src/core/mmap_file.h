// A whole file, read-only in memory: mapped from the page cache (weights used in place), or
// copied once into anonymous memory backed by 2 MiB pages.
//
// Why the copy: decode streams every weight once per token, and on 4 KiB page-cache pages it
// reaches about 85% of the bandwidth it gets from huge pages (fewer TLB walks, and the pages
// are physically contiguous). It costs the read at load time and memory the kernel cannot drop
// and re-read under pressure, so callers choose (LlamaModel's LoadOptions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace ll3 {

enum class MapMode {
  kMap,        // mmap the file
  kHugeCopy,   // read it into anonymous memory advised for transparent huge pages
};

// kHugeCopy when `bytes` takes at most half of the memory available now (within a container's
// memory limit) and transparent huge pages are not disabled; otherwise kMap (a copy that crowds out the page cache, or one that
// might be swapped, would cost more than the TLB walks it saves).
MapMode auto_map_mode(uint64_t bytes);

class MmapFile {
 public:
  MmapFile() = default;
  ~MmapFile();
  MmapFile(MmapFile&& o) noexcept;
  MmapFile& operator=(MmapFile&& o) noexcept;
  MmapFile(const MmapFile&) = delete;
  MmapFile& operator=(const MmapFile&) = delete;

  static Result<MmapFile> open(const std::string& path, MapMode mode = MapMode::kMap);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  bool copied() const { return copied_; }
  // The copy made writable, to rearrange its bytes in place (weights repacked at load); seal()
  // makes it read-only again. nullptr for a mapping: the page cache is shared with the file.
  uint8_t* unseal();
  void seal();

 private:
  void reset();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t map_bytes_ = 0;  // the mapping's length (the copy is rounded up to whole huge pages)
  bool copied_ = false;
  std::string path_;
};

}  // namespace ll3
