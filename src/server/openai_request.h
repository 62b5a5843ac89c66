// OpenAI JSON -> engine requests: the bodies of /v1/chat/completions, /v1/completions,
// /tokenize and /detokenize, checked field by field. A pure function of the body and of what it
// needs to know about the model (ModelInfo): no engine, no tokenizer, no I/O, so it can be
// unit-tested and fuzzed on its own (fuzz/fuzz_openai_request.cpp). Every client mistake comes
// back as an ApiError naming the field; nothing here throws or aborts on any input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ll3/limits.h"
#include "ll3/request.h"

namespace ll3::server {

// An OpenAI-shaped error: {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError {
  int status = 0;  // 0: no error
  std::string message;
  std::string type;   // "invalid_request_error", "authentication_error", ...
  std::string param;  // the offending field ("messages[1].role"), or empty
  std::string code;   // "context_length_exceeded", ..., or empty
  bool ok() const { return status == 0; }
};
ApiError invalid_request(std::string message, std::string param = "", std::string code = "");

// Returns the ApiError of `expr` when it is one.
#define RETURN_IF_API_ERROR(expr) \
  do {                            \
    ApiError e_ = (expr);         \
    if (!e_.ok()) return e_;      \
  } while (0)

// What parsing needs to know about the served model.
struct ModelInfo {
  std::string id;             // the model id of responses
  std::string chat_template;  // Jinja source; "" or unusable: the built-in Llama 3 format
  bool template_usable = false;        // the template parses (checked once at startup)
  bool template_supports_tools = false;  // the template reads `tools`
  std::string bos_token = "<|begin_of_text|>";
  std::string eos_token;
  int64_t n_vocab = 0;  // > 0: token ids are range-checked here, naming the field
};

enum class Endpoint { kChatCompletions, kCompletions };

// One prompt: text (tokenized by the server with the model's tokenizer) or token ids.
struct Prompt {
  std::string text;
  std::vector<int32_t> tokens;
  bool is_tokens = false;
  bool add_bos = true;  // text only: prepend <|begin_of_text|> (the chat template writes its own)
  // Chat: when set, `text` in pieces, each tokenized on its own: the template's text with its
  // special tokens (true), the messages' content without (false). See split_content().
  std::vector<std::pair<std::string, bool>> segments;
};

// Limits on what one request may ask for (amplification: one body, many sequences).
inline constexpr int kMaxN = 128;
inline constexpr size_t kMaxPrompts = 1024;
inline constexpr size_t kMaxChoices = 1024;  // prompts x n
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopBytes = 1024;
inline constexpr int kMaxJsonDepth = 64;

// One entry of llama-server's per-request "lora": [{"id": N or "name", "scale": S}]. An index
// counts in GET /lora-adapters' order; the server resolves it against what is loaded.
struct LoraRef {
  int64_t index = -1;  // >= 0: by index
  std::string name;    // else by name
  float scale = 1.0f;
};
inline constexpr size_t kMaxLoraRefs = 64;

struct ApiRequest {
  Endpoint endpoint = Endpoint::kChatCompletions;
  std::string model;            // "model": the base's id, or a LoRA adapter's name
  std::vector<LoraRef> lora;    // "lora"
  std::vector<Prompt> prompts;  // chat: one, the rendered conversation
  int n = 1;                    // choices per prompt
  bool stream = false;
  bool include_usage = false;   // stream_options.include_usage
  bool logprobs = false;        // chat: logprobs; completions: logprobs present
  int top_logprobs = 0;
  bool echo = false;            // completions: the prompt's text before the output
  bool seeded = false;          // a seed was given: choice j samples with seed + j
  // Tool calls: the tools went into the prompt and the output is parsed for calls.
  bool tools = false;
  std::vector<std::string> tool_names;
  // Sampling, max_tokens, stop, ignore_eos, logprobs, session_id, priority; no prompt, no
  // callbacks (the server sets those).
  Request base;
};

// The bodies of the generation endpoints. Chat renders the conversation with the model's chat
// template into prompts[0].
ApiError parse_chat_request(std::string_view body, const ModelInfo& model, ApiRequest* out);
ApiError parse_completion_request(std::string_view body, const ModelInfo& model, ApiRequest* out);
// The same from a body already parsed (an object): what a caller that reads the body for more
// than one purpose passes, parsing it once.
ApiError parse_chat_request_json(const nlohmann::ordered_json& body, const ModelInfo& model, ApiRequest* out);
ApiError parse_completion_request_json(const nlohmann::ordered_json& body, const ModelInfo& model, ApiRequest* out);
// The X-Session-Id header (a proxy can hash on it without parsing bodies) as the session id, when
// the body names none; a body naming another session is refused.
ApiError apply_session_header(const std::string& header, ApiRequest* r);

// POST /tokenize: {"content" | "prompt": text, "add_special": bool, "parse_special": bool,
// "with_pieces": bool} or {"messages": [...], "tools": [...]} (the chat template applied).
struct TokenizeRequest {
  std::string text;
  std::vector<std::pair<std::string, bool>> segments;  // as Prompt::segments (messages only)
  bool add_bos = true;
  bool parse_special = true;
  bool with_pieces = false;
};
ApiError parse_tokenize_request(std::string_view body, const ModelInfo& model, TokenizeRequest* out);
ApiError parse_tokenize_request_json(const nlohmann::ordered_json& body, const ModelInfo& model, TokenizeRequest* out);

// POST /detokenize: {"tokens": [ids]}.
ApiError parse_detokenize_request(std::string_view body, const ModelInfo& model, std::vector<int32_t>* tokens);
ApiError parse_detokenize_request_json(const nlohmann::ordered_json& body, const ModelInfo& model, std::vector<int32_t>* tokens);

// Nesting depth of a JSON text (brackets outside strings), stopping at `limit` + 1: bounds the
// recursion of whatever walks the parsed value afterwards.
int json_depth(std::string_view text, int limit);

}  // namespace ll3::server
