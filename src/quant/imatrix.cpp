#include "quant/imatrix.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>

#include "core/check.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"

namespace ll3 {

namespace {

constexpr int64_t kDefaultChunkSize = 512;  // llama-imatrix's default -c
constexpr const char* kKeyDatasets = "imatrix.datasets";
constexpr const char* kKeyChunkCount = "imatrix.chunk_count";
constexpr const char* kKeyChunkSize = "imatrix.chunk_size";

bool strip_suffix(std::string& s, const std::string& suffix) {
  if (s.size() <= suffix.size() || s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
  s.resize(s.size() - suffix.size());
  return true;
}

// A bounds-checked little-endian reader over a .dat file's bytes.
struct DatCursor {
  const uint8_t* p;
  size_t size, off = 0;
  bool i32(int32_t* v) {
    if (size - off < 4) return false;
    std::memcpy(v, p + off, 4);
    off += 4;
    return true;
  }
  bool bytes(void* dst, size_t n) {
    if (size - off < n) return false;
    std::memcpy(dst, p + off, n);
    off += n;
    return true;
  }
};

}  // namespace

void Imatrix::add_rows(const std::string& name, const float* x, int64_t rows, int64_t cols) {
  ImatrixEntry& e = entries[name];
  if (e.counts.empty()) {
    e.n_cols = cols;
    e.sum2.assign(static_cast<size_t>(cols), 0.0);
    e.sum.assign(static_cast<size_t>(cols), 0.0);
    e.counts.assign(1, 0);
  }
  LL3_CHECK(e.n_cols == cols && e.n_mat() == 1);
  double* s2 = e.sum2.data();
  double* s1 = e.sum.data();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    for (int64_t j = 0; j < cols; ++j) {
      const double v = xr[j];
      s1[j] += v;
      s2[j] += v * v;
    }
  }
  e.counts[0] += rows;
}

Status Imatrix::merge(const Imatrix& other) {
  for (const auto& [name, o] : other.entries) {
    auto it = entries.find(name);
    if (it == entries.end()) {
      entries.emplace(name, o);
      continue;
    }
    ImatrixEntry& e = it->second;
    if (e.n_cols != o.n_cols) {
      return Status::errorf("imatrix: '%s' has %lld columns in one file and %lld in another", name.c_str(),
                            static_cast<long long>(e.n_cols), static_cast<long long>(o.n_cols));
    }
    // One count broadcasts over the experts (an old file of a MoE weight), as llama.cpp does.
    if (e.n_mat() == 1 && o.n_mat() > 1) e.counts.assign(static_cast<size_t>(o.n_mat()), e.counts[0]);
    std::vector<int64_t> oc = o.counts;
    if (oc.size() == 1 && e.n_mat() > 1) oc.assign(static_cast<size_t>(e.n_mat()), oc[0]);
    if (oc.size() != e.counts.size() || o.sum2.size() != e.sum2.size()) {
      return Status::errorf("imatrix: '%s' has %lld matrices in one file and %lld in another", name.c_str(),
                            static_cast<long long>(e.n_mat()), static_cast<long long>(o.n_mat()));
    }
    for (size_t i = 0; i < e.sum2.size(); ++i) e.sum2[i] += o.sum2[i];
    // Σx is only meaningful when every part has it.
    if (!e.sum.empty() && o.sum.size() == e.sum.size()) {
      for (size_t i = 0; i < e.sum.size(); ++i) e.sum[i] += o.sum[i];
    } else {
      e.sum.clear();
    }
    for (size_t i = 0; i < oc.size(); ++i) e.counts[i] += oc[i];
  }
  datasets.insert(datasets.end(), other.datasets.begin(), other.datasets.end());
  if (chunk_size == 0) chunk_size = other.chunk_size;
  update_chunk_count();
  return Status();
}

void Imatrix::update_chunk_count() {
  int64_t max_count = 0;
  for (const auto& [name, e] : entries) {
    for (int64_t c : e.counts) max_count = std::max(max_count, c);
  }
  chunk_count = chunk_size > 0 ? max_count / chunk_size : 0;
}

std::vector<float> Imatrix::mean_sq(const std::string& name) const {
  auto it = entries.find(name);
  if (it == entries.end()) return {};
  const ImatrixEntry& e = it->second;
  std::vector<float> out(e.sum2.size());
  for (int64_t m = 0; m < e.n_mat(); ++m) {
    const double c = static_cast<double>(e.counts[static_cast<size_t>(m)]);
    for (int64_t j = 0; j < e.n_cols; ++j) {
      const size_t k = static_cast<size_t>(m * e.n_cols + j);
      out[k] = c > 0 ? static_cast<float>(e.sum2[k] / c) : 0.0f;
    }
  }
  return out;
}

// ---- GGUF ----------------------------------------------------------------------------------

namespace {

Result<std::vector<double>> f32_tensor(const GgufTensorInfo& t, const std::string& origin) {
  if (t.type != DType::F32) {
    const std::string_view type = dtype_name(t.type);
    return Status::errorf("imatrix %s: tensor '%s' is %.*s, expected f32", origin.c_str(), t.name.c_str(),
                          static_cast<int>(type.size()), type.data());
  }
  std::vector<double> v(static_cast<size_t>(t.n_elements()));
  const float* f = reinterpret_cast<const float*>(t.data);
  for (size_t i = 0; i < v.size(); ++i) {
    float x;
    std::memcpy(&x, f + i, sizeof x);  // the map's alignment is the file's, not a float's
    v[i] = x;
  }
  return v;
}

// One weight's tensors (in_sum2 and counts required, in_sum optional) into an entry.
Result<ImatrixEntry> gguf_entry(const std::string& name, const GgufTensorInfo* s2, const GgufTensorInfo* cnt,
                                const GgufTensorInfo* s1, const std::string& origin) {
  if (s2 == nullptr || cnt == nullptr) {
    return Status::errorf("imatrix %s: '%s' has %s but no %s", origin.c_str(), name.c_str(),
                          s2 != nullptr ? "in_sum2" : (cnt != nullptr ? "counts" : "in_sum"),
                          s2 == nullptr ? "in_sum2" : "counts");
  }
  const int64_t n_mat = cnt->n_elements();
  if (n_mat < 1 || s2->n_elements() % n_mat != 0 || s2->n_elements() == 0) {
    return Status::errorf("imatrix %s: '%s' has %lld sums for %lld counts", origin.c_str(), name.c_str(),
                          static_cast<long long>(s2->n_elements()), static_cast<long long>(n_mat));
  }
  if (s1 != nullptr && s1->n_elements() != s2->n_elements()) {
    return Status::errorf("imatrix %s: '%s' has %lld in_sum values but %lld in_sum2", origin.c_str(), name.c_str(),
                          static_cast<long long>(s1->n_elements()), static_cast<long long>(s2->n_elements()));
  }
  ImatrixEntry e;
  e.n_cols = s2->n_elements() / n_mat;
  Result<std::vector<double>> v2 = f32_tensor(*s2, origin);
  if (!v2.ok()) return v2.status();
  e.sum2 = std::move(v2.value());
  if (s1 != nullptr) {
    Result<std::vector<double>> v1 = f32_tensor(*s1, origin);
    if (!v1.ok()) return v1.status();
    e.sum = std::move(v1.value());
  }
  Result<std::vector<double>> c = f32_tensor(*cnt, origin);
  if (!c.ok()) return c.status();
  for (double x : c.value()) {
    if (!(x >= 0) || x > 9e15) {
      return Status::errorf("imatrix %s: '%s' has an invalid count %g", origin.c_str(), name.c_str(), x);
    }
    e.counts.push_back(std::llround(x));
  }
  return e;
}

Result<Imatrix> load_gguf(const std::string& path) {
  Result<std::unique_ptr<GgufFile>> f = GgufFile::open(path);
  if (!f.ok()) return Status::error("imatrix: " + f.message());
  const GgufFile& g = **f;
  if (auto type = g.get_string("general.type"); type && *type != "imatrix") {
    return Status::errorf("imatrix %s: general.type is '%.*s', not 'imatrix': not an imatrix file", path.c_str(),
                          static_cast<int>(type->size()), type->data());
  }
  Imatrix im;
  if (const GgufValue* d = g.find(kKeyDatasets); d != nullptr && d->type == GgufType::ARRAY) {
    for (std::string_view s : d->strings) im.datasets.emplace_back(s);
  }
  im.chunk_size = g.get_int(kKeyChunkSize).value_or(0);
  struct Parts {
    const GgufTensorInfo *s2 = nullptr, *cnt = nullptr, *s1 = nullptr;
  };
  std::map<std::string, Parts> parts;
  for (const GgufTensorInfo& t : g.tensors()) {
    std::string name = t.name;
    if (strip_suffix(name, ".in_sum2")) {
      parts[name].s2 = &t;
    } else if (strip_suffix(name, ".counts")) {
      parts[name].cnt = &t;
    } else if (strip_suffix(name, ".in_sum")) {
      parts[name].s1 = &t;
    }  // other tensors: not ours, ignored as llama.cpp does
  }
  if (parts.empty()) {
    return Status::errorf("imatrix %s: no <weight>.in_sum2 / .counts tensors: not an imatrix file", path.c_str());
  }
  for (const auto& [name, p] : parts) {
    Result<ImatrixEntry> e = gguf_entry(name, p.s2, p.cnt, p.s1, path);
    if (!e.ok()) return e.status();
    im.entries.emplace(name, std::move(e.value()));
  }
  im.update_chunk_count();
  return im;
}

Status save_gguf(const Imatrix& im, const std::string& path) {
  GgufWriter w;
  w.set_string("general.type", "imatrix");
  w.set_string_array(kKeyDatasets, im.datasets);
  w.set_u32(kKeyChunkCount, static_cast<uint32_t>(im.chunk_count));
  w.set_u32(kKeyChunkSize, static_cast<uint32_t>(im.chunk_size));
  // The writer borrows the data until write(): keep every converted array alive here.
  std::vector<std::unique_ptr<std::vector<float>>> keep;
  auto to_f32 = [&keep](const auto& v) {
    keep.push_back(std::make_unique<std::vector<float>>(v.begin(), v.end()));
    return keep.back()->data();
  };
  for (const auto& [name, e] : im.entries) {
    const int64_t n_mat = e.n_mat();
    LL3_RETURN_IF_ERROR(w.add_tensor(name + ".in_sum2", DType::F32, {e.n_cols, n_mat}, to_f32(e.sum2)));
    LL3_RETURN_IF_ERROR(w.add_tensor(name + ".counts", DType::F32, {1, n_mat}, to_f32(e.counts)));
    if (!e.sum.empty()) {
      LL3_RETURN_IF_ERROR(w.add_tensor(name + ".in_sum", DType::F32, {e.n_cols, n_mat}, to_f32(e.sum)));
    }
  }
  return w.write(path);
}

// ---- legacy .dat ---------------------------------------------------------------------------

Status save_dat(const Imatrix& im, const std::string& path) {
  const int64_t cs = im.chunk_size > 0 ? im.chunk_size : kDefaultChunkSize;
  std::string out;
  auto put_i32 = [&out](int64_t v) {
    const int32_t x = static_cast<int32_t>(v);
    out.append(reinterpret_cast<const char*>(&x), 4);
  };
  put_i32(static_cast<int64_t>(im.entries.size()));
  for (const auto& [name, e] : im.entries) {
    put_i32(static_cast<int64_t>(name.size()));
    out += name;
    const int64_t max_count = *std::max_element(e.counts.begin(), e.counts.end());
    const int64_t ncall = (max_count + cs - 1) / cs;  // rounded up: a weight seen at all keeps ncall > 0
    put_i32(ncall);
    put_i32(static_cast<int64_t>(e.sum2.size()));
    for (int64_t m = 0; m < e.n_mat(); ++m) {
      double c = static_cast<double>(e.counts[static_cast<size_t>(m)]);
      for (int64_t j = 0; j < e.n_cols; ++j) {
        double v = e.sum2[static_cast<size_t>(m * e.n_cols + j)];
        if (c == 0) v = c = 1;  // an expert never routed to: 1, as llama.cpp stores it
        const float f = static_cast<float>(v / c * static_cast<double>(ncall));
        out.append(reinterpret_cast<const char*>(&f), 4);
      }
    }
  }
  put_i32(im.chunk_count);
  const std::string ds = im.datasets.empty() ? std::string() : im.datasets.back();
  put_i32(static_cast<int64_t>(ds.size()));
  out += ds;

  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Status::errorf("imatrix: cannot create %s", tmp.c_str());
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    if (!f) return Status::errorf("imatrix: writing %s failed", tmp.c_str());
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Status::errorf("imatrix: cannot rename %s", tmp.c_str());
  return Status();
}

}  // namespace

Result<Imatrix> Imatrix::parse_dat(const uint8_t* data, size_t size, const std::string& origin,
                                   int64_t dat_chunk_size) {
  const int64_t cs = dat_chunk_size > 0 ? dat_chunk_size : kDefaultChunkSize;
  DatCursor in{data, size};
  int32_t n_entries = 0;
  if (!in.i32(&n_entries) || n_entries < 1) {
    return Status::errorf("imatrix %s: no entries (not an imatrix file, or an empty one)", origin.c_str());
  }
  Imatrix im;
  im.chunk_size = cs;
  for (int32_t i = 0; i < n_entries; ++i) {
    int32_t len = 0, ncall = 0, nval = 0;
    const size_t at = in.off;
    if (!in.i32(&len) || len < 1 || static_cast<size_t>(len) > size - in.off) {
      return Status::errorf("imatrix %s: entry %d: bad name length %d at offset %zu (truncated or not an imatrix?)",
                            origin.c_str(), i + 1, len, at);
    }
    std::string name(static_cast<size_t>(len), '\0');
    in.bytes(name.data(), name.size());
    if (!in.i32(&ncall) || !in.i32(&nval) || ncall < 0 || nval < 1 ||
        static_cast<uint64_t>(nval) * 4 > size - in.off) {
      return Status::errorf("imatrix %s: entry %d ('%s'): bad or truncated value count %d (ncall %d)",
                            origin.c_str(), i + 1, name.c_str(), nval, ncall);
    }
    std::vector<float> v(static_cast<size_t>(nval));
    in.bytes(v.data(), v.size() * 4);
    if (im.entries.count(name) != 0) {
      return Status::errorf("imatrix %s: entry '%s' appears twice", origin.c_str(), name.c_str());
    }
    // v = mean(x^2) * ncall and ncall chunks of cs tokens: back to sums and counts.
    ImatrixEntry e;
    e.n_cols = nval;
    e.sum2.resize(v.size());
    for (size_t j = 0; j < v.size(); ++j) e.sum2[j] = static_cast<double>(v[j]) * static_cast<double>(cs);
    e.counts.assign(1, static_cast<int64_t>(ncall) * cs);
    im.entries.emplace(std::move(name), std::move(e));
  }
  // The trailer (chunk count, dataset name) is absent in the oldest files: best effort.
  int32_t last_chunk = 0, len = 0;
  if (in.i32(&last_chunk) && in.i32(&len) && len > 0 && static_cast<size_t>(len) <= size - in.off) {
    std::string ds(static_cast<size_t>(len), '\0');
    in.bytes(ds.data(), ds.size());
    im.datasets.push_back(std::move(ds));
  }
  im.update_chunk_count();
  return im;
}

Result<Imatrix> Imatrix::load(const std::string& path, int64_t dat_chunk_size) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::errorf("imatrix: cannot open %s", path.c_str());
  char magic[4] = {};
  f.read(magic, 4);
  if (f.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0) return load_gguf(path);
  f.seekg(0);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return parse_dat(bytes.data(), bytes.size(), path, dat_chunk_size);
}

Status Imatrix::save(const std::string& path, ImatrixFormat format) const {
  if (entries.empty()) return Status::errorf("imatrix: nothing to save to %s (no weights collected)", path.c_str());
  return format == ImatrixFormat::kDat ? save_dat(*this, path) : save_gguf(*this, path);
}

ImatrixFormat imatrix_format_for(const std::string& path) {
  return path.size() >= 4 && path.compare(path.size() - 4, 4, ".dat") == 0 ? ImatrixFormat::kDat
                                                                            : ImatrixFormat::kGguf;
}

std::vector<std::string> imatrix_weights_for_tap(const char* tap_name, int64_t layer) {
  static const std::map<std::string, std::vector<std::string>> kFeeds = {
      {"attn_norm", {"attn_q", "attn_k", "attn_v"}},
      {"kqv_out", {"attn_output"}},
      {"ffn_norm", {"ffn_gate", "ffn_up"}},
      {"ffn_swiglu", {"ffn_down"}},
  };
  if (layer < 0) return std::strcmp(tap_name, "result_norm") == 0 ? std::vector<std::string>{"output.weight"}
                                                                  : std::vector<std::string>{};
  auto it = kFeeds.find(tap_name);
  if (it == kFeeds.end()) return {};
  std::vector<std::string> out;
  for (const std::string& w : it->second) out.push_back("blk." + std::to_string(layer) + "." + w + ".weight");
  return out;
}

}  // namespace ll3
