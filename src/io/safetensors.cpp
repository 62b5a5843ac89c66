#include "io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

namespace ll3 {
namespace {

using nlohmann::json;

struct DTypeName {
  const char* name;
  DType type;
  uint64_t size;
};
constexpr DTypeName kSupported[] = {
    {"F32", DType::F32, 4}, {"F16", DType::F16, 2}, {"BF16", DType::BF16, 2}};

// A non-negative integer from a JSON number, or -1.
int64_t json_uint(const json& j) {
  if (j.is_number_unsigned()) {
    uint64_t v = j.get<uint64_t>();
    return v > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(v);
  }
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    return v < 0 ? -1 : v;
  }
  return -1;
}

}  // namespace

int64_t SafetensorsTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string SafetensorsTensor::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path, MapMode mode) {
  auto map = MmapFile::open(path, mode);
  if (!map.ok()) return map.status().with_context("safetensors: ");
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->map_ = std::move(map.value());
  f->data_ = f->map_.data();
  f->size_ = f->map_.size();
  f->origin_ = path;
  LL3_RETURN_IF_ERROR(f->parse_all());
  return f;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::parse(const uint8_t* data, size_t size,
                                                                std::string origin) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->data_ = data;
  f->size_ = size;
  f->origin_ = std::move(origin);
  LL3_RETURN_IF_ERROR(f->parse_all());
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

// The JSON header, which must be an object without duplicate keys. `where` prefixes errors.
Status parse_header(const char* begin, uint64_t len, const std::string& where, json* out) {
  // nlohmann keeps the last of duplicate keys silently; the callback sees every top-level key.
  std::set<std::string> seen;
  std::string duplicate;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && duplicate.empty()) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!seen.insert(k).second) duplicate = k;
    }
    return true;
  };
  *out = json::parse(begin, begin + len, cb, /*allow_exceptions=*/false);
  if (out->is_discarded()) return Status::error(where + "header is not valid JSON");
  if (!out->is_object()) {
    return Status::error(where +
                         strprintf("header is a JSON %s, expected an object", out->type_name()));
  }
  if (!duplicate.empty()) return Status::error(where + "duplicate tensor '" + duplicate + "'");
  return ok_status();
}

Status read_metadata(const json& v, const std::string& where,
                     std::map<std::string, std::string>& metadata) {
  if (!v.is_object()) return Status::error(where + "__metadata__ is not an object");
  for (auto m = v.begin(); m != v.end(); ++m) {
    if (!m.value().is_string()) {
      return Status::error(where + "__metadata__ entry '" + m.key() + "' is not a string");
    }
    metadata[m.key()] = m.value().get<std::string>();
  }
  return ok_status();
}

// The tensor's shape into t->shape; *n_elems: its element count, whose bytes must fit in 63 bits.
// `terr` makes the tensor's error.
template <typename Err>
Status read_shape(const json& sh, uint64_t elem_size, const Err& terr, SafetensorsTensor* t,
                  uint64_t* n_elems) {
  *n_elems = 1;
  for (const json& d : sh) {
    int64_t dim = json_uint(d);
    if (dim < 0) return terr("shape has a dimension that is not a non-negative integer");
    // Elements times element size must fit in 63 bits.
    if (dim != 0 && *n_elems > (static_cast<uint64_t>(INT64_MAX) / elem_size) / dim) {
      return terr("shape " + sh.dump() + " overflows");
    }
    *n_elems *= static_cast<uint64_t>(dim);
    t->shape.push_back(dim);
  }
  return ok_status();
}

// data_offsets [begin, end]: inside the data section and exactly the bytes the shape needs.
template <typename Err>
Status read_offsets(const json& off, uint64_t body_size, const std::string& dtype, uint64_t expect,
                    const Err& terr, SafetensorsTensor* t) {
  int64_t begin = json_uint(off[0]);
  int64_t end = json_uint(off[1]);
  if (begin < 0 || end < 0) return terr("data_offsets are not non-negative integers");
  if (begin > end) {
    return terr(strprintf("data_offsets begin %lld is after end %lld",
                          static_cast<long long>(begin), static_cast<long long>(end)));
  }
  if (static_cast<uint64_t>(end) > body_size) {
    return terr(
        strprintf("data_offsets [%lld, %lld] extend past end of file (data section "
                  "%llu bytes)",
                  static_cast<long long>(begin), static_cast<long long>(end),
                  static_cast<unsigned long long>(body_size)));
  }
  if (static_cast<uint64_t>(end - begin) != expect) {
    return terr(strprintf("holds %lld bytes but shape %s of %s needs %llu",
                          static_cast<long long>(end - begin), t->shape_string().c_str(),
                          dtype.c_str(), static_cast<unsigned long long>(expect)));
  }
  t->offset = static_cast<uint64_t>(begin);
  t->nbytes = expect;
  return ok_status();
}

// One header entry {dtype, shape, data_offsets} into *t, its data a view into `body`.
Status read_tensor(const std::string& name, const json& v, const uint8_t* body, uint64_t body_size,
                   const std::string& where, SafetensorsTensor* t) {
  auto terr = [&](const std::string& msg) {
    return Status::error(where + "tensor '" + name + "': " + msg);
  };
  if (!v.is_object()) return terr("entry is not an object");
  auto dt = v.find("dtype");
  auto sh = v.find("shape");
  auto off = v.find("data_offsets");
  if (dt == v.end() || !dt->is_string()) return terr("missing or non-string 'dtype'");
  if (sh == v.end() || !sh->is_array()) return terr("missing or non-array 'shape'");
  if (off == v.end() || !off->is_array() || off->size() != 2) {
    return terr("'data_offsets' must be an array [begin, end]");
  }
  t->name = name;
  const std::string& dtype = dt->get_ref<const std::string&>();
  uint64_t elem_size = 0;
  for (const auto& s : kSupported) {
    if (dtype == s.name) {
      t->type = s.type;
      elem_size = s.size;
    }
  }
  if (elem_size == 0) {
    return terr("unsupported dtype '" + dtype + "' (supported: F32, F16, BF16)");
  }
  uint64_t n_elems = 0;
  LL3_RETURN_IF_ERROR(read_shape(*sh, elem_size, terr, t, &n_elems));
  LL3_RETURN_IF_ERROR(read_offsets(*off, body_size, dtype, n_elems * elem_size, terr, t));
  t->data = body + t->offset;
  return ok_status();
}

// Sorts the tensors by offset and checks that no two share bytes.
Status sort_and_check_overlaps(std::vector<SafetensorsTensor>& tensors, const std::string& where) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.nbytes < b.nbytes;
  });
  for (size_t i = 1; i < tensors.size(); ++i) {
    const auto& p = tensors[i - 1];
    const auto& t = tensors[i];
    if (t.offset < p.offset + p.nbytes) {
      return Status::error(where +
                           strprintf("tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap",
                                     p.name.c_str(), static_cast<unsigned long long>(p.offset),
                                     static_cast<unsigned long long>(p.offset + p.nbytes),
                                     t.name.c_str(), static_cast<unsigned long long>(t.offset),
                                     static_cast<unsigned long long>(t.offset + t.nbytes)));
    }
  }
  return ok_status();
}

}  // namespace

Status SafetensorsFile::parse_all() {
  const std::string where = "safetensors: " + origin_ + ": ";
  auto err = [&](const std::string& msg) { return Status::error(where + msg); };

  if (size_ < 8) {
    return err(strprintf("file is %zu bytes, too short for the 8-byte header length", size_));
  }
  uint64_t header_len;
  std::memcpy(&header_len, data_, 8);  // little-endian, as is the host
  if (header_len > kMaxHeaderBytes) {
    return err(strprintf("header length %llu is absurd (limit %llu bytes)",
                         static_cast<unsigned long long>(header_len),
                         static_cast<unsigned long long>(kMaxHeaderBytes)));
  }
  if (header_len > size_ - 8) {
    return err(strprintf("header length %llu extends past end of file (file size %zu)",
                         static_cast<unsigned long long>(header_len), size_));
  }
  const char* hbegin = reinterpret_cast<const char*>(data_ + 8);
  const uint8_t* body = data_ + 8 + header_len;
  const uint64_t body_size = size_ - 8 - header_len;

  json header;
  LL3_RETURN_IF_ERROR(parse_header(hbegin, header_len, where, &header));
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      LL3_RETURN_IF_ERROR(read_metadata(it.value(), where, metadata_));
      continue;
    }
    SafetensorsTensor t;
    LL3_RETURN_IF_ERROR(read_tensor(it.key(), it.value(), body, body_size, where, &t));
    tensors_.push_back(std::move(t));
  }
  LL3_RETURN_IF_ERROR(sort_and_check_overlaps(tensors_, where));
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
  return ok_status();
}

Result<std::unique_ptr<SafetensorsModel>> SafetensorsModel::open_dir(const std::string& dir,
                                                                     MapMode mode) {
  namespace fs = std::filesystem;
  std::unique_ptr<SafetensorsModel> m(new SafetensorsModel());
  m->dir_ = dir;
  const fs::path root(dir);
  std::error_code ec;
  const fs::path index_path = root / "model.safetensors.index.json";
  const fs::path single_path = root / "model.safetensors";

  std::vector<std::string> shard_names;
  std::map<std::string, std::string> weight_map;  // tensor -> shard file
  if (fs::exists(index_path, ec)) {
    auto map = MmapFile::open(index_path.string());
    if (!map.ok()) return map.status().with_context("safetensors: ");
    const char* p = reinterpret_cast<const char*>(map->data());
    json index = json::parse(p, p + map->size(), nullptr, /*allow_exceptions=*/false);
    const std::string where = "safetensors: " + index_path.string() + ": ";
    if (index.is_discarded() || !index.is_object()) {
      return Status::error(where + "not a JSON object");
    }
    auto wm = index.find("weight_map");
    if (wm == index.end() || !wm->is_object()) {
      return Status::error(where + "missing or non-object 'weight_map'");
    }
    std::set<std::string> names;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string()) {
        return Status::error(where + "weight_map entry '" + it.key() + "' is not a string");
      }
      const std::string& shard = it.value().get_ref<const std::string&>();
      // Shards are plain file names beside the index; never a path out of the directory.
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
        return Status::error(where + "weight_map entry '" + it.key() + "' names shard '" + shard +
                             "', which is not a file name in the directory");
      }
      weight_map[it.key()] = shard;
      names.insert(shard);
    }
    shard_names.assign(names.begin(), names.end());
  } else if (fs::exists(single_path, ec)) {
    shard_names.push_back("model.safetensors");
  } else {
    return Status::error("safetensors: " + dir +
                         ": no model.safetensors or model.safetensors.index.json");
  }

  std::map<std::string, const SafetensorsFile*> by_shard;
  for (const auto& name : shard_names) {
    auto f = SafetensorsFile::open((root / name).string(), mode);
    if (!f.ok()) return f.status();
    m->shards_.push_back(std::move(f.value()));
    const SafetensorsFile& shard = *m->shards_.back();
    by_shard[name] = &shard;
    for (const auto& t : shard.tensors()) {
      auto [it, inserted] = m->by_name_.emplace(t.name, &t);
      if (!inserted) {
        return Status::error("safetensors: " + dir + ": tensor '" + t.name +
                             "' appears in more than one shard (second: " + name + ")");
      }
    }
  }
  for (const auto& [tensor, shard] : weight_map) {
    if (by_shard[shard]->find(tensor) == nullptr) {
      return Status::error("safetensors: " + dir + ": weight_map places '" + tensor + "' in " +
                           shard + ", which does not hold it");
    }
  }
  return m;
}

const SafetensorsTensor* SafetensorsModel::find_tensor(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Status write_safetensors(const std::string& path,
                         const std::vector<SafetensorsWriteTensor>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0, max_bytes = 0;
  std::vector<uint64_t> sizes;
  for (const auto& t : tensors) {
    const char* dtype = nullptr;
    uint64_t bytes = 0;
    for (const auto& s : kSupported) {
      if (s.type == t.type) {
        dtype = s.name;
        bytes = s.size;
      }
    }
    if (dtype == nullptr) {
      return Status::errorf("safetensors writer: tensor '%s' has type %s (F32, F16, BF16 only)",
                            t.name.c_str(), std::string(dtype_name(t.type)).c_str());
    }
    for (int64_t d : t.shape) bytes *= static_cast<uint64_t>(d);
    if (header.contains(t.name)) {
      return Status::errorf("safetensors writer: duplicate tensor '%s'", t.name.c_str());
    }
    header[t.name] = {
        {"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    max_bytes = std::max(max_bytes, bytes);
    sizes.push_back(bytes);
  }
  std::string h = header.dump();
  h.resize((h.size() + 7) / 8 * 8, ' ');

  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return Status::errorf("safetensors writer: cannot create '%s': %s", tmp.c_str(),
                          std::strerror(errno));
  }
  bool ok = true;
  uint64_t len = h.size();
  ok = ok && std::fwrite(&len, 8, 1, f) == 1;
  ok = ok && std::fwrite(h.data(), 1, h.size(), f) == h.size();
  std::vector<uint8_t> buf(max_bytes);
  for (size_t i = 0; ok && i < tensors.size(); ++i) {
    tensors[i].fill(buf.data());
    ok = std::fwrite(buf.data(), 1, sizes[i], f) == sizes[i];
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = Status::errorf("safetensors writer: cannot write '%s': %s", path.c_str(),
                              std::strerror(errno));
    std::remove(tmp.c_str());
    return s;
  }
  return ok_status();
}

}  // namespace ll3
