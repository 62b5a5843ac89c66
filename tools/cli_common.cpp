#include "cli_common.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace ll3::cli {

Result<DType> parse_kv_type(const std::string& s) {
  if (s == "f32") return DType::F32;
  if (s == "f16") return DType::F16;
  return Status::errorf("KV cache type must be f32 or f16, not '%s'", s.c_str());
}

Result<std::vector<int32_t>> parse_token_list(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    std::string item = s.substr(i, j - i);
    errno = 0;
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || v < 0 || v > 0x7fffffff) {
      return Status::errorf("bad token id '%s' in list", item.c_str());
    }
    ids.push_back(static_cast<int32_t>(v));
    i = j + 1;
  }
  if (ids.empty()) return Status::error("empty token list");
  return ids;
}

double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

Result<std::unique_ptr<LlamaModel>> load_model_verbose(const std::string& path) {
  double t0 = now_seconds();
  Result<std::unique_ptr<LlamaModel>> m = LlamaModel::load(path);
  if (!m.ok()) return m;
  const LlamaConfig& c = (*m)->config;
  std::fprintf(stderr,
               "ll3: loaded %s: %lld layers, dim %lld, %lld heads (%lld KV), vocab %lld, %s, %.1f MiB, %.2f s\n",
               path.c_str(), static_cast<long long>(c.n_layers), static_cast<long long>(c.dim),
               static_cast<long long>(c.n_heads), static_cast<long long>(c.n_kv_heads),
               static_cast<long long>(c.n_vocab), (*m)->type_summary().c_str(),
               (*m)->weight_bytes() / 1048576.0, now_seconds() - t0);
  return m;
}

}  // namespace ll3::cli
