// Anthropic Messages JSON -> engine requests: the bodies of POST /v1/messages and
// /v1/messages/count_tokens. The Anthropic body is checked block by block, naming the field, and
// rewritten as the equivalent OpenAI chat body (system -> a system message, tool_use blocks ->
// assistant tool_calls, tool_result blocks -> tool messages, tools -> functions, tool_choice,
// stop_sequences -> stop), which parse_chat_request then reads: the sampling checks, the chat
// template, tool handling and the prompt are the OpenAI path's, so both APIs render the same
// conversation into the same tokens. Pure, like openai_request.h.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "server/openai_request.h"

namespace ll3::server {

// Anthropic's body -> OpenAI's. count_only: the count_tokens body (no max_tokens, no sampling).
ApiError anthropic_to_openai(const nlohmann::ordered_json& body, bool count_only,
                             nlohmann::ordered_json* out);

// POST /v1/messages: the request as the OpenAI chat path would have it.
ApiError parse_messages_request(std::string_view body, const ModelInfo& model, ApiRequest* out);
// POST /v1/messages/count_tokens: the prompt /v1/messages would generate from.
ApiError parse_count_tokens_request(std::string_view body, const ModelInfo& model, Prompt* out);

// An error in Anthropic's shape: {"type": "error", "error": {"type", "message"}}, the type from
// the HTTP status (400 invalid_request_error, 401 authentication_error, 403 permission_error,
// 404 not_found_error, 413 request_too_large, 429 rate_limit_error, 503 overloaded_error,
// others api_error).
nlohmann::ordered_json anthropic_error_json(const ApiError& e);
const char* anthropic_error_type(int status);

// Paths whose errors take Anthropic's shape.
bool is_anthropic_path(std::string_view path);

}  // namespace ll3::server
