#include "io/gguf.h"

#include <cstring>
#include <limits>

namespace ll3 {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxArrayDepth = 8;         // nested arrays deeper than this are refused
constexpr int kMaxDims = 4;

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::BOOL: return 1;
    case GgufType::U16:
    case GgufType::I16: return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32: return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64: return 8;
    default: return 0;  // STRING, ARRAY, unknown
  }
}

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Reads one scalar of type t from p (which has scalar_size(t) bytes) into a value.
void decode_scalar(GgufType t, const uint8_t* p, GgufValue* v) {
  v->type = t;
  switch (t) {
    case GgufType::U8: v->u = load<uint8_t>(p); break;
    case GgufType::I8: v->i = load<int8_t>(p); break;
    case GgufType::U16: v->u = load<uint16_t>(p); break;
    case GgufType::I16: v->i = load<int16_t>(p); break;
    case GgufType::U32: v->u = load<uint32_t>(p); break;
    case GgufType::I32: v->i = load<int32_t>(p); break;
    case GgufType::U64: v->u = load<uint64_t>(p); break;
    case GgufType::I64: v->i = load<int64_t>(p); break;
    case GgufType::F32: v->f = load<float>(p); break;
    case GgufType::F64: v->f = load<double>(p); break;
    case GgufType::BOOL: v->i = load<uint8_t>(p) != 0; break;
    default: break;
  }
}

bool is_unsigned(GgufType t) {
  return t == GgufType::U8 || t == GgufType::U16 || t == GgufType::U32 || t == GgufType::U64;
}

// A bounds-checked cursor over the file. Every read says what it was reading, so errors can say
// what and where ("reading key 12's value at offset 3456: ...").
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  Status need(size_t n, const char* what) const {
    if (n > remaining()) {
      return Status::errorf("unexpected end of file reading %s at offset %zu (need %zu bytes, %zu left)",
                            what, pos_, n, remaining());
    }
    return Status();
  }

  template <class T>
  Status read(T* out, const char* what) {
    LL3_RETURN_IF_ERROR(need(sizeof(T), what));
    *out = load<T>(data_ + pos_);
    pos_ += sizeof(T);
    return Status();
  }

  Status read_string(std::string_view* out, const char* what) {
    uint64_t len;
    size_t at = pos_;
    LL3_RETURN_IF_ERROR(read(&len, what));
    if (len > remaining()) {
      return Status::errorf("%s at offset %zu has length %llu, past the end of the file (%zu bytes left)",
                            what, at, static_cast<unsigned long long>(len), remaining());
    }
    *out = std::string_view(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return Status();
  }

  const uint8_t* here() const { return data_ + pos_; }
  void skip(size_t n) { pos_ += n; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

Status read_value(Cursor& c, GgufType type, GgufValue* v, int depth);

Status read_array(Cursor& c, GgufValue* v, int depth) {
  if (depth >= kMaxArrayDepth) {
    return Status::errorf("arrays nested deeper than %d at offset %zu", kMaxArrayDepth, c.pos());
  }
  uint32_t et;
  uint64_t count;
  LL3_RETURN_IF_ERROR(c.read(&et, "array element type"));
  size_t count_at = c.pos();
  LL3_RETURN_IF_ERROR(c.read(&count, "array length"));
  GgufType elem = static_cast<GgufType>(et);
  v->type = GgufType::ARRAY;
  v->elem_type = elem;
  v->count = count;
  size_t esize = scalar_size(elem);
  if (esize > 0) {
    if (count > c.remaining() / esize) {
      return Status::errorf("array at offset %zu claims %llu elements of %zu bytes, past the end of the file",
                            count_at, static_cast<unsigned long long>(count), esize);
    }
    v->elems = c.here();
    c.skip(static_cast<size_t>(count) * esize);
    return Status();
  }
  if (elem == GgufType::STRING) {
    // Each string takes at least its 8-byte length: bound the count before reserving.
    if (count > c.remaining() / 8) {
      return Status::errorf("string array at offset %zu claims %llu strings, more than the file can hold",
                            count_at, static_cast<unsigned long long>(count));
    }
    v->strings.reserve(static_cast<size_t>(count));
    for (uint64_t k = 0; k < count; ++k) {
      std::string_view s;
      LL3_RETURN_IF_ERROR(c.read_string(&s, "array string"));
      v->strings.push_back(s);
    }
    return Status();
  }
  if (elem == GgufType::ARRAY) {
    if (count > c.remaining() / 12) {  // element type + length at least
      return Status::errorf("nested array at offset %zu claims %llu arrays, more than the file can hold",
                            count_at, static_cast<unsigned long long>(count));
    }
    v->items.resize(static_cast<size_t>(count));
    for (uint64_t k = 0; k < count; ++k) {
      LL3_RETURN_IF_ERROR(read_array(c, &v->items[k], depth + 1));
    }
    return Status();
  }
  return Status::errorf("array at offset %zu has unknown element type %u", count_at, et);
}

Status read_value(Cursor& c, GgufType type, GgufValue* v, int depth) {
  if (type == GgufType::STRING) {
    v->type = type;
    return c.read_string(&v->str, "string value");
  }
  if (type == GgufType::ARRAY) return read_array(c, v, depth);
  size_t n = scalar_size(type);
  if (n == 0) return Status::errorf("unknown value type %u", static_cast<unsigned>(type));
  LL3_RETURN_IF_ERROR(c.need(n, "value"));
  decode_scalar(type, c.here(), v);
  c.skip(n);
  return Status();
}

// Magic, version and the two counts; counts the file cannot hold are refused here, before
// anything is reserved for them.
Status read_file_header(Cursor& c, uint32_t* version, uint64_t* n_tensors, uint64_t* n_kv) {
  uint32_t magic;
  LL3_RETURN_IF_ERROR(c.read(&magic, "magic"));
  if (magic != kMagic) return Status::errorf("not a GGUF file (magic 0x%08x)", magic);
  LL3_RETURN_IF_ERROR(c.read(version, "version"));
  if (*version != 2 && *version != 3) {
    return Status::errorf("unsupported GGUF version %u (ll3 reads versions 2 and 3)", *version);
  }
  LL3_RETURN_IF_ERROR(c.read(n_tensors, "tensor count"));
  LL3_RETURN_IF_ERROR(c.read(n_kv, "metadata count"));
  // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info at least
  // 8 + 4 + 4 + 8 bytes (checked once the metadata is read).
  if (*n_kv > c.remaining() / 13) {
    return Status::errorf("metadata count %llu is more than the file can hold",
                          static_cast<unsigned long long>(*n_kv));
  }
  return Status();
}

// Metadata entry k: its key and value.
Status read_kv(Cursor& c, uint64_t k, std::string* key, GgufValue* v) {
  std::string_view key_view;
  LL3_RETURN_IF_ERROR(
      c.read_string(&key_view, "metadata key")
          .with_context(strprintf("metadata entry %llu: ", static_cast<unsigned long long>(k))));
  uint32_t type;
  LL3_RETURN_IF_ERROR(c.read(&type, "value type"));
  *key = std::string(key_view);
  return read_value(c, static_cast<GgufType>(type), v, 0)
      .with_context("metadata key '" + *key + "': ");
}

// A tensor's element count and byte size, with overflow checks. `where` names it in errors.
Status tensor_nbytes(const GgufTensorInfo& t, const DTypeInfo& info, const std::string& where,
                     uint64_t* nbytes) {
  uint64_t n = 1;
  for (int d = 0; d < kMaxDims; ++d) {
    uint64_t ne = static_cast<uint64_t>(t.ne[d]);
    if (ne != 0 && n > std::numeric_limits<uint64_t>::max() / 2 / ne) {
      return Status::error(where + "element count overflows");
    }
    n *= ne;
  }
  if (t.ne[0] % info.block_size != 0) {
    return Status::error(where +
                         strprintf("row length %lld is not a multiple of the %s block size %lld",
                                   static_cast<long long>(t.ne[0]), info.name,
                                   static_cast<long long>(info.block_size)));
  }
  uint64_t blocks = n / static_cast<uint64_t>(info.block_size);
  if (blocks > std::numeric_limits<uint64_t>::max() / info.block_bytes) {
    return Status::error(where + "byte size overflows");
  }
  *nbytes = blocks * info.block_bytes;
  return Status();
}

// Tensor info k: name, shape, type, offset (a multiple of `alignment`) and byte size.
Status read_tensor_info(Cursor& c, uint64_t k, size_t alignment, GgufTensorInfo* t) {
  std::string_view name;
  LL3_RETURN_IF_ERROR(
      c.read_string(&name, "tensor name")
          .with_context(strprintf("tensor info %llu: ", static_cast<unsigned long long>(k))));
  t->name = std::string(name);
  const std::string where = "tensor '" + t->name + "': ";
  uint32_t n_dims;
  LL3_RETURN_IF_ERROR(c.read(&n_dims, "tensor dimension count").with_context(where));
  if (n_dims < 1 || n_dims > kMaxDims) {
    return Status::error(where +
                         strprintf("has %u dimensions (must be 1 to %d)", n_dims, kMaxDims));
  }
  t->n_dims = static_cast<int>(n_dims);
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t ne;
    LL3_RETURN_IF_ERROR(c.read(&ne, "tensor shape").with_context(where));
    if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Status::error(where + strprintf("dimension %u is negative or too large", d));
    }
    t->ne[d] = static_cast<int64_t>(ne);
  }
  uint32_t type;
  LL3_RETURN_IF_ERROR(c.read(&type, "tensor type").with_context(where));
  DTypeInfo info = dtype_info(type);
  if (info.name == nullptr) return Status::error(where + strprintf("has unknown type id %u", type));
  t->type = static_cast<DType>(type);
  LL3_RETURN_IF_ERROR(c.read(&t->offset, "tensor offset").with_context(where));
  LL3_RETURN_IF_ERROR(tensor_nbytes(*t, info, where, &t->nbytes));
  if (t->offset % alignment != 0) {
    return Status::error(where + strprintf("offset %llu is not a multiple of the alignment %zu",
                                           static_cast<unsigned long long>(t->offset), alignment));
  }
  return Status();
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::U8: return "u8";
    case GgufType::I8: return "i8";
    case GgufType::U16: return "u16";
    case GgufType::I16: return "i16";
    case GgufType::U32: return "u32";
    case GgufType::I32: return "i32";
    case GgufType::F32: return "f32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::U64: return "u64";
    case GgufType::I64: return "i64";
    case GgufType::F64: return "f64";
  }
  return "unknown";
}

bool GgufValue::is_integer() const {
  return type != GgufType::F32 && type != GgufType::F64 && type != GgufType::STRING &&
         type != GgufType::ARRAY && scalar_size(type) > 0;
}

std::optional<int64_t> GgufValue::as_int() const {
  if (!is_integer()) return std::nullopt;
  if (is_unsigned(type)) {
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  return i;
}

std::optional<double> GgufValue::as_number() const {
  if (is_float()) return f;
  if (!is_integer()) return std::nullopt;
  return is_unsigned(type) ? static_cast<double>(u) : static_cast<double>(i);
}

std::optional<double> GgufValue::array_number(uint64_t k) const {
  if (type != GgufType::ARRAY || k >= count || elems == nullptr) return std::nullopt;
  size_t es = scalar_size(elem_type);
  GgufValue tmp;
  decode_scalar(elem_type, elems + k * es, &tmp);
  return tmp.as_number();
}

std::optional<int64_t> GgufValue::array_int(uint64_t k) const {
  if (type != GgufType::ARRAY || k >= count || elems == nullptr) return std::nullopt;
  size_t es = scalar_size(elem_type);
  GgufValue tmp;
  decode_scalar(elem_type, elems + k * es, &tmp);
  return tmp.as_int();
}

std::string GgufTensorInfo::shape_string() const {
  std::string s = "[";
  for (int d = 0; d < n_dims; ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
  return s + "]";
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path, MapMode mode) {
  Result<MmapFile> map = MmapFile::open(path, mode);
  if (!map.ok()) return map.status().with_context("gguf: ");
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->map_ = std::move(map.value());
  f->data_ = f->map_.data();
  f->size_ = f->map_.size();
  f->origin_ = path;
  LL3_RETURN_IF_ERROR(f->parse_all().with_context("gguf: " + path + ": "));
  return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::parse(const uint8_t* data, size_t size, std::string origin) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->data_ = data;
  f->size_ = size;
  f->origin_ = std::move(origin);
  LL3_RETURN_IF_ERROR(f->parse_all().with_context("gguf: " + f->origin_ + ": "));
  return f;
}

Status GgufFile::parse_all() {
  Cursor c(data_, size_);
  uint64_t n_tensors, n_kv;
  LL3_RETURN_IF_ERROR(read_file_header(c, &version_, &n_tensors, &n_kv));
  kv_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    size_t at = c.pos();
    std::string key_str;
    GgufValue v;
    LL3_RETURN_IF_ERROR(read_kv(c, k, &key_str, &v));
    if (kv_index_.count(key_str) != 0) {
      return Status::errorf("duplicate metadata key '%s' at offset %zu", key_str.c_str(), at);
    }
    kv_index_.emplace(key_str, kv_.size());
    kv_.emplace_back(std::move(key_str), std::move(v));
  }

  if (const GgufValue* a = find("general.alignment")) {
    std::optional<int64_t> al = a->as_int();
    if (!al || *al <= 0 || (*al & (*al - 1)) != 0 || *al > (1 << 20)) {
      return Status::error("general.alignment must be a power of two up to 1 MiB");
    }
    alignment_ = static_cast<size_t>(*al);
  }

  if (n_tensors > c.remaining() / 24) {
    return Status::errorf("tensor count %llu is more than the file can hold",
                          static_cast<unsigned long long>(n_tensors));
  }
  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t;
    LL3_RETURN_IF_ERROR(read_tensor_info(c, k, alignment_, &t));
    if (tensor_index_.count(t.name) != 0) {
      return Status::errorf("duplicate tensor name '%s'", t.name.c_str());
    }
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }
  return locate_tensor_data(c.pos());
}

Status GgufFile::locate_tensor_data(size_t header_end) {
  data_offset_ = (header_end + alignment_ - 1) / alignment_ * alignment_;
  if (data_offset_ > size_ && !tensors_.empty()) {
    return Status::errorf(
        "data section would start at offset %zu, past the end of the file (%zu bytes)",
        data_offset_, size_);
  }
  uint64_t data_size = size_ >= data_offset_ ? size_ - data_offset_ : 0;
  for (GgufTensorInfo& t : tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      return Status::errorf(
          "tensor '%s' extends past end of file (offset %llu in the data section, size %llu, data "
          "section %llu bytes)",
          t.name.c_str(), static_cast<unsigned long long>(t.offset),
          static_cast<unsigned long long>(t.nbytes), static_cast<unsigned long long>(data_size));
    }
    t.data = data_ + data_offset_ + t.offset;
  }
  return Status();
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(std::string(key));
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? v->as_int() : std::nullopt;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? v->as_number() : std::nullopt;
}

std::optional<std::string_view> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::STRING) return std::nullopt;
  return v->str;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::BOOL) return std::nullopt;
  return v->i != 0;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace ll3
