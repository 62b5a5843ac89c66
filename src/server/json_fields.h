// The JSON reading every API's request parser shares (OpenAI, Anthropic, embeddings): the body
// as an object, fields, and the 400s that name the field at fault. Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_request.h"

namespace ll3::server {

using ojson = nlohmann::ordered_json;

// "a string", "an array", ...: how a value's type reads in an error message.
const char* json_type_name(const ojson& v);
// A 400: "'param' must be WANT, got TYPE".
ApiError wrong_type(const std::string& param, const char* want, const ojson& got);
// The body as a JSON object (nesting at most kMaxJsonDepth), or a 400 that says why not.
ApiError parse_body(std::string_view body, ojson* out);
// The field `key` of `o`, or null when absent or null (clients send null for "unset").
const ojson* field(const ojson& o, const char* key);
// An integer-valued JSON number within [lo, hi].
ApiError read_int(const ojson& v, const std::string& param, int64_t lo, int64_t hi, int64_t* out);
// An array of token ids, each within the model's vocabulary (when known).
ApiError read_token_ids(const ojson& arr, const std::string& param, const ModelInfo& model, std::vector<int32_t>* out);

}  // namespace ll3::server
