#include "tokenizer_shared.h"

#include <fstream>

#include "test_support.h"

namespace ll3::test {

static std::unique_ptr<Tokenizer> load_or_null(const std::string& path) {
  auto t = load_tokenizer(path);
  if (!t.ok()) {
    fprintf(stderr, "tokenizer load failed: %s\n", t.message().c_str());
    return nullptr;
  }
  return std::move(*t);
}

const Tokenizer* hf_tokenizer() {
  static std::unique_ptr<Tokenizer> t =
      shared_dir().empty() ? nullptr : load_or_null(shared_dir() + "/tokenizers/llama3");
  return t.get();
}

const Tokenizer* gguf_tokenizer() {
  static std::unique_ptr<Tokenizer> t =
      shared_dir().empty() ? nullptr : load_or_null(shared_dir() + "/models/tiny-llama3-f32.gguf");
  return t.get();
}

std::string fixture_path(const std::string& name) {
  return source_dir() + "/tests/fixtures/tokenizer/" + name;
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

}  // namespace ll3::test
