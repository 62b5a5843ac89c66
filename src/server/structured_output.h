// Output constrained by a grammar on the OpenAI endpoints: response_format (json_object,
// json_schema), llama.cpp's `json_schema` and `grammar` fields, and forced tool calls
// (tool_choice "required" or a named function). Schemas are compiled once and kept: clients
// send the same schema with every request.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "ll3/grammar.h"
#include "server/openai_request.h"

namespace ll3::server {

// The grammar `body` asks its output to match (null: none). A schema keyword that cannot be
// enforced is a 400 naming it, with param "response_format".
ApiError parse_output_grammar(const nlohmann::ordered_json& body, std::shared_ptr<const Grammar>* out);

// A call of one of `tools` (OpenAI function tools, already checked) in the shape the Llama 3.1
// tool format and parse_tool_calls read: {"name": NAME, "parameters": ARGUMENTS}, the arguments
// valid under the function's `parameters` schema.
ApiError tool_call_grammar(const nlohmann::ordered_json& tools, std::shared_ptr<const Grammar>* out);

// For a chat template that does not read `tools`: a system-prompt text that describes them and
// the call format above (`required`: a call must be made).
std::string generic_tool_preamble(const nlohmann::ordered_json& tools, bool required);

// A compiled schema by its text, from a small cache shared by all requests (thread-safe).
Result<std::shared_ptr<const Grammar>> cached_schema_grammar(const std::string& schema);

}  // namespace ll3::server
