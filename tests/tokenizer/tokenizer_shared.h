// Test helpers: the real Llama-3 tokenizer from the shared data, loaded once per process from
// tokenizer.json and from a GGUF file's metadata.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace ll3::test {

// nullptr when the shared directory is absent (callers use LL3_REQUIRE_SHARED first).
const Tokenizer* hf_tokenizer();
const Tokenizer* gguf_tokenizer();

std::string fixture_path(const std::string& name);
std::vector<nlohmann::json> read_jsonl(const std::string& path);

}  // namespace ll3::test
