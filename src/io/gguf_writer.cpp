#include "io/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_set>

#include "core/check.h"

namespace ll3 {
namespace {

// GGUF is little-endian; so is every machine ll3 runs on (x86-64, aarch64).
template <class T>
void put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_string(std::string* out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out->append(s.data(), s.size());
}

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::BOOL:
      return 1;
    case GgufType::U16:
    case GgufType::I16:
      return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32:
      return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64:
      return 8;
    default:
      return 0;
  }
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

struct FileCloser {
  void operator()(FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};

}  // namespace

#define LL3_SCALAR(fn, ctype, gtype)           \
  GgufWriteValue GgufWriteValue::fn(ctype v) { \
    GgufWriteValue r;                          \
    r.type_ = GgufType::gtype;                 \
    put(&r.payload_, v);                       \
    return r;                                  \
  }
LL3_SCALAR(u8, uint8_t, U8)
LL3_SCALAR(i8, int8_t, I8)
LL3_SCALAR(u16, uint16_t, U16)
LL3_SCALAR(i16, int16_t, I16)
LL3_SCALAR(u32, uint32_t, U32)
LL3_SCALAR(i32, int32_t, I32)
LL3_SCALAR(u64, uint64_t, U64)
LL3_SCALAR(i64, int64_t, I64)
LL3_SCALAR(f32, float, F32)
LL3_SCALAR(f64, double, F64)
#undef LL3_SCALAR

GgufWriteValue GgufWriteValue::boolean(bool v) {
  GgufWriteValue r;
  r.type_ = GgufType::BOOL;
  put<uint8_t>(&r.payload_, v ? 1 : 0);
  return r;
}

GgufWriteValue GgufWriteValue::string(std::string_view v) {
  GgufWriteValue r;
  r.type_ = GgufType::STRING;
  put_string(&r.payload_, v);
  return r;
}

GgufWriteValue GgufWriteValue::numeric_array(GgufType elem, const void* elems, uint64_t count) {
  size_t es = scalar_size(elem);
  LL3_CHECK(es != 0);  // strings and arrays have their own builders
  GgufWriteValue r;
  r.type_ = GgufType::ARRAY;
  r.elem_type_ = elem;
  r.payload_.reserve(12 + es * count);
  put<uint32_t>(&r.payload_, static_cast<uint32_t>(elem));
  put<uint64_t>(&r.payload_, count);
  r.payload_.append(static_cast<const char*>(elems), es * count);
  return r;
}

GgufWriteValue GgufWriteValue::string_array(const std::vector<std::string>& v) {
  GgufWriteValue r;
  r.type_ = GgufType::ARRAY;
  r.elem_type_ = GgufType::STRING;
  size_t total = 12;
  for (const auto& s : v) total += 8 + s.size();
  r.payload_.reserve(total);
  put<uint32_t>(&r.payload_, static_cast<uint32_t>(GgufType::STRING));
  put<uint64_t>(&r.payload_, v.size());
  for (const auto& s : v) put_string(&r.payload_, s);
  return r;
}

GgufWriteValue GgufWriteValue::array(const std::vector<GgufWriteValue>& items) {
  GgufWriteValue r;
  r.type_ = GgufType::ARRAY;
  r.elem_type_ = items.empty() ? GgufType::U8 : items[0].type_;
  put<uint32_t>(&r.payload_, static_cast<uint32_t>(r.elem_type_));
  put<uint64_t>(&r.payload_, items.size());
  // An element of an array is written as its payload alone: the array names the element type.
  for (const auto& it : items) {
    LL3_CHECK(it.type_ == r.elem_type_);
    r.payload_ += it.payload_;
  }
  return r;
}

void GgufWriter::set(std::string_view key, GgufWriteValue value) {
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(std::string(key), std::move(value));
}

Status GgufWriter::set_alignment(uint32_t alignment) {
  if (alignment < 8 || (alignment & (alignment - 1)) != 0) {
    return Status::errorf("gguf writer: alignment %u is not a power of two >= 8", alignment);
  }
  if (!tensors_.empty()) {
    return Status::error("gguf writer: set the alignment before adding tensors");
  }
  alignment_ = alignment;
  set_u32("general.alignment", alignment);
  return ok_status();
}

Status GgufWriter::add_tensor(std::string_view name, DType type, const std::vector<int64_t>& ne,
                              const void* data) {
  if (data == nullptr) {
    return Status::errorf("gguf writer: tensor '%.*s' has no data", static_cast<int>(name.size()),
                          name.data());
  }
  return add(name, type, ne, data, nullptr);
}

Status GgufWriter::add_tensor(std::string_view name, DType type, const std::vector<int64_t>& ne,
                              FillFn fill) {
  if (!fill) {
    return Status::errorf("gguf writer: tensor '%.*s' has no fill function",
                          static_cast<int>(name.size()), name.data());
  }
  return add(name, type, ne, nullptr, std::move(fill));
}

Status GgufWriter::add(std::string_view name, DType type, const std::vector<int64_t>& ne,
                       const void* data, FillFn fill) {
  std::string n(name);
  if (n.empty()) return Status::error("gguf writer: empty tensor name");
  for (const auto& t : tensors_) {
    if (t.name == n) return Status::errorf("gguf writer: duplicate tensor '%s'", n.c_str());
  }
  DTypeInfo info = dtype_info(type);
  if (info.name == nullptr) {
    return Status::errorf("gguf writer: tensor '%s' has unknown type %u", n.c_str(),
                          static_cast<unsigned>(type));
  }
  if (ne.empty() || ne.size() > 4) {
    return Status::errorf("gguf writer: tensor '%s' has %zu dims (1..4 allowed)", n.c_str(),
                          ne.size());
  }
  uint64_t elems = 1;
  for (int64_t d : ne) {
    if (d <= 0 || static_cast<uint64_t>(d) > (uint64_t{1} << 40) / elems) {
      return Status::errorf("gguf writer: tensor '%s' has a bad dimension %lld", n.c_str(),
                            static_cast<long long>(d));
    }
    elems *= static_cast<uint64_t>(d);
  }
  if (ne[0] % info.block_size != 0) {
    return Status::errorf(
        "gguf writer: tensor '%s': ne[0]=%lld is not a multiple of the %s "
        "block size %lld",
        n.c_str(), static_cast<long long>(ne[0]), info.name,
        static_cast<long long>(info.block_size));
  }
  Tensor t;
  t.name = std::move(n);
  t.type = type;
  t.ne = ne;
  t.nbytes = elems / static_cast<uint64_t>(info.block_size) * info.block_bytes;
  t.offset = align_up(data_size_, alignment_);
  t.data = data;
  t.fill = std::move(fill);
  data_size_ = t.offset + t.nbytes;
  tensors_.push_back(std::move(t));
  return ok_status();
}

std::string GgufWriter::encode_header() const {
  std::string h;
  h.append("GGUF", 4);
  put<uint32_t>(&h, 3);
  put<uint64_t>(&h, tensors_.size());
  put<uint64_t>(&h, kv_.size());
  for (const auto& [k, v] : kv_) {
    put_string(&h, k);
    put<uint32_t>(&h, static_cast<uint32_t>(v.type()));
    h += v.payload();
  }
  for (const auto& t : tensors_) {
    put_string(&h, t.name);
    put<uint32_t>(&h, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(&h, static_cast<uint64_t>(d));
    put<uint32_t>(&h, static_cast<uint32_t>(t.type));
    put<uint64_t>(&h, t.offset);
  }
  h.resize(align_up(h.size(), alignment_), '\0');
  return h;
}

uint64_t GgufWriter::file_size() const {
  return encode_header().size() + align_up(data_size_, alignment_);
}

Status GgufWriter::write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  std::unique_ptr<FILE, FileCloser> f(std::fopen(tmp.c_str(), "wb"));
  if (!f) {
    return Status::errorf("gguf writer: cannot create '%s': %s", tmp.c_str(), std::strerror(errno));
  }
  auto fail = [&](const char* what) {
    Status s = Status::errorf("gguf writer: %s '%s': %s", what, tmp.c_str(), std::strerror(errno));
    f.reset();
    std::remove(tmp.c_str());
    return s;
  };

  const std::string header = encode_header();
  if (std::fwrite(header.data(), 1, header.size(), f.get()) != header.size()) {
    return fail("cannot write header of");
  }
  // One reusable buffer, as large as the largest filled tensor.
  uint64_t max_fill = 0;
  for (const auto& t : tensors_) {
    if (t.fill) max_fill = std::max(max_fill, t.nbytes);
  }
  std::vector<uint8_t> buf(max_fill);
  static const char zeros[256] = {};
  uint64_t pos = 0;  // within the data section
  for (const auto& t : tensors_) {
    while (pos < t.offset) {  // padding between tensors
      size_t n = static_cast<size_t>(std::min<uint64_t>(t.offset - pos, sizeof zeros));
      if (std::fwrite(zeros, 1, n, f.get()) != n) return fail("cannot write");
      pos += n;
    }
    const uint8_t* src = static_cast<const uint8_t*>(t.data);
    if (t.fill) {
      t.fill(buf.data());
      src = buf.data();
    }
    if (std::fwrite(src, 1, t.nbytes, f.get()) != t.nbytes) {
      errno = errno != 0 ? errno : EIO;
      return fail(("cannot write tensor '" + t.name + "' to").c_str());
    }
    pos += t.nbytes;
  }
  uint64_t end = align_up(pos, alignment_);
  while (pos < end) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(end - pos, sizeof zeros));
    if (std::fwrite(zeros, 1, n, f.get()) != n) return fail("cannot write");
    pos += n;
  }
  if (std::fflush(f.get()) != 0) return fail("cannot flush");
  FILE* raw = f.release();
  if (std::fclose(raw) != 0) {
    Status s =
        Status::errorf("gguf writer: cannot close '%s': %s", tmp.c_str(), std::strerror(errno));
    std::remove(tmp.c_str());
    return s;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = Status::errorf("gguf writer: cannot rename '%s' to '%s': %s", tmp.c_str(),
                              path.c_str(), std::strerror(errno));
    std::remove(tmp.c_str());
    return s;
  }
  return ok_status();
}

}  // namespace ll3
