#include "quant/imatrix_weights.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <utility>

#include "io/gguf.h"

namespace ll3::quant {

namespace {

// A cursor over the bytes of a legacy .dat file; every read checks the remaining length.
struct Reader {
  const std::vector<char>& bytes;
  size_t pos = 0;
  bool read(void* out, size_t n) {
    if (bytes.size() - pos < n) return false;
    std::memcpy(out, bytes.data() + pos, n);
    pos += n;
    return true;
  }
  bool at_end() const { return pos == bytes.size(); }
};

// The legacy format: int32 n_entries, then per entry int32 name length, the name, int32 ncall,
// int32 nval and nval floats (sums of squares over ncall calls), then optionally int32 chunks,
// int32 length and the dataset name. llama-quantize divides each value by ncall, in float.
Result<ImatrixWeights> load_legacy(const std::string& path, const std::vector<char>& bytes) {
  ImatrixWeights w;
  Reader r{bytes};
  int32_t n_entries = 0;
  if (!r.read(&n_entries, 4) || n_entries < 1) {
    return Status::errorf("imatrix '%s': no entries (not an imatrix file?)", path.c_str());
  }
  for (int32_t i = 0; i < n_entries; ++i) {
    int32_t len = 0, ncall = 0, nval = 0;
    if (!r.read(&len, 4))
      return Status::errorf("imatrix '%s': entry %d: truncated", path.c_str(), i + 1);
    if (len < 0)
      return Status::errorf("imatrix '%s': entry %d: bad name length %d", path.c_str(), i + 1, len);
    std::string name(std::min<size_t>(static_cast<size_t>(len), bytes.size()), '\0');
    if (static_cast<size_t>(len) > name.size() || !r.read(name.data(), name.size())) {
      return Status::errorf("imatrix '%s': entry %d: truncated name", path.c_str(), i + 1);
    }
    name.resize(std::strlen(name.c_str()));  // llama.cpp reads the name as a C string
    if (!r.read(&ncall, 4) || !r.read(&nval, 4)) {
      return Status::errorf("imatrix '%s': entry %d ('%s'): truncated header", path.c_str(), i + 1,
                            name.c_str());
    }
    if (nval < 1 || static_cast<size_t>(nval) > bytes.size()) {
      return Status::errorf("imatrix '%s': entry %d ('%s'): bad value count %d", path.c_str(),
                            i + 1, name.c_str(), nval);
    }
    std::vector<float>& e = w.weights[name];
    e.resize(static_cast<size_t>(nval));
    if (!r.read(e.data(), e.size() * sizeof(float))) {
      return Status::errorf("imatrix '%s': entry %d ('%s'): truncated data (%d values expected)",
                            path.c_str(), i + 1, name.c_str(), nval);
    }
    if (ncall > 0) {
      for (float& v : e) v /= ncall;
    }
  }
  if (!r.at_end()) {
    int32_t chunks = 0, dataset_len = 0;
    if (!r.read(&chunks, 4) || !r.read(&dataset_len, 4) || dataset_len < 0) {
      return Status::errorf("imatrix '%s': truncated trailer after %d entries", path.c_str(),
                            n_entries);
    }
    w.dataset.resize(static_cast<size_t>(dataset_len));
    if (!r.read(w.dataset.data(), w.dataset.size())) {
      return Status::errorf("imatrix '%s': truncated dataset name", path.c_str());
    }
    w.chunks = chunks;
  }
  return w;
}

// The GGUF format: per weight tensor NAME, NAME.in_sum2 [ne0, n_mat] (sums of squared inputs) and
// NAME.counts [1, n_mat] (how many inputs each matrix saw); the weight is sum / count, or 1 for a
// matrix that saw no input (an expert never routed to).
Result<ImatrixWeights> load_gguf(const std::string& path) {
  auto file = GgufFile::open(path);
  if (!file.ok()) return Status::errorf("imatrix '%s': %s", path.c_str(), file.message().c_str());
  const GgufFile& f = **file;
  ImatrixWeights w;
  const GgufValue* datasets = f.find("imatrix.datasets");
  const auto chunks = f.get_int("imatrix.chunk_count");
  if (datasets == nullptr || !chunks || !f.get_int("imatrix.chunk_size")) {
    return Status::errorf("imatrix '%s': missing imatrix.datasets / chunk_count / chunk_size",
                          path.c_str());
  }
  if (!datasets->strings.empty()) w.dataset = std::string(datasets->strings[0]);
  w.chunks = static_cast<int>(*chunks);

  const std::string kSums = ".in_sum2", kCounts = ".counts";
  auto strip = [](const std::string& s, const std::string& suffix, std::string* base) {
    if (s.size() <= suffix.size() ||
        s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0)
      return false;
    *base = s.substr(0, s.size() - suffix.size());
    return true;
  };
  std::map<std::string, std::pair<const GgufTensorInfo*, const GgufTensorInfo*>> pairs;
  for (const GgufTensorInfo& t : f.tensors()) {
    std::string base;
    if (strip(t.name, kSums, &base))
      pairs[base].first = &t;
    else if (strip(t.name, kCounts, &base))
      pairs[base].second = &t;
  }
  if (pairs.empty()) return Status::errorf("imatrix '%s': no entries", path.c_str());
  for (const auto& [name, p] : pairs) {
    const GgufTensorInfo* sums = p.first;
    const GgufTensorInfo* counts = p.second;
    if (sums == nullptr || counts == nullptr) {
      return Status::errorf("imatrix '%s': '%s' has %s but no %s", path.c_str(), name.c_str(),
                            sums ? "in_sum2" : "counts", sums ? "counts" : "in_sum2");
    }
    const int64_t ne0 = sums->ne[0], n_mat = sums->ne[1] * sums->ne[2] * sums->ne[3];
    if (sums->type != DType::F32 || counts->type != DType::F32 || counts->n_elements() != n_mat) {
      return Status::errorf(
          "imatrix '%s': '%s': in_sum2 %s and counts %s are not F32 [n, m] and [1, m]",
          path.c_str(), name.c_str(), sums->shape_string().c_str(), counts->shape_string().c_str());
    }
    std::vector<float> s(static_cast<size_t>(ne0 * n_mat)), c(static_cast<size_t>(n_mat));
    std::memcpy(s.data(), sums->data, s.size() * sizeof(float));
    std::memcpy(c.data(), counts->data, c.size() * sizeof(float));
    std::vector<float>& e = w.weights[name];
    e.resize(s.size());
    for (int64_t j = 0; j < n_mat; ++j) {
      for (int64_t i = 0; i < ne0; ++i) e[j * ne0 + i] = c[j] > 0.0f ? s[j * ne0 + i] / c[j] : 1.0f;
    }
  }
  return w;
}

}  // namespace

const std::vector<float>* ImatrixWeights::find(const std::string& tensor) const {
  auto it = weights.find(tensor);
  return it == weights.end() ? nullptr : &it->second;
}

Result<ImatrixWeights> load_imatrix_weights(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::errorf("imatrix '%s': cannot open: %s", path.c_str(), std::strerror(errno));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Result<ImatrixWeights> w = bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0
                                 ? load_gguf(path)
                                 : load_legacy(path, bytes);
  if (!w.ok()) return w;
  // llama-quantize refuses a matrix with NaN or infinite entries: they would poison every search.
  for (const auto& [name, values] : w->weights) {
    for (size_t i = 0; i < values.size(); ++i) {
      if (!std::isfinite(values[i])) {
        return Status::errorf("imatrix '%s': '%s' has a non-finite value at column %zu",
                              path.c_str(), name.c_str(), i);
      }
    }
  }
  w->file = path;
  return w;
}

void filter_imatrix_weights(ImatrixWeights& w, const std::vector<std::string>& include,
                            const std::vector<std::string>& exclude) {
  for (const std::string& part : exclude) {
    std::erase_if(w.weights,
                  [&](const auto& kv) { return kv.first.find(part) != std::string::npos; });
  }
  if (include.empty()) return;
  std::unordered_map<std::string, std::vector<float>> kept;
  for (const std::string& part : include) {
    for (auto& [name, values] : w.weights) {
      if (name.find(part) != std::string::npos && !kept.count(name))
        kept.emplace(name, std::move(values));
    }
  }
  w.weights = std::move(kept);
}

}  // namespace ll3::quant
