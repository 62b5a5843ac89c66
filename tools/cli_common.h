// Pieces several subcommands share: model loading with the default model, value parsing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "model/llama_model.h"

namespace ll3::cli {

// "f32" / "f16" -> DType for the KV cache.
Result<DType> parse_kv_type(const std::string& s);
// "1,2,3" -> ids.
Result<std::vector<int32_t>> parse_token_list(const std::string& s);

// Loads `path` and prints a one-line summary to stderr.
Result<std::unique_ptr<LlamaModel>> load_model_verbose(const std::string& path);

// Wall-clock seconds since an arbitrary start.
double now_seconds();

}  // namespace ll3::cli
