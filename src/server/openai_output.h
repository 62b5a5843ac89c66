// Engine events -> OpenAI JSON: response objects, stream chunks (Server-Sent Events exactly as
// OpenAI sends them), usage, logprobs in the chat and the legacy completions shapes, errors.
// ChoiceOutput turns one choice's token events into chunks (streaming) or into its final
// `choices[]` entry; with tools it holds back output that starts like a tool call and returns it
// as `tool_calls`, streamed as deltas as they are generated. Pure: no I/O, no engine, testable
// with synthetic events.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "ll3/request.h"
#include "server/openai_request.h"
#include "server/tool_calls.h"

namespace ll3::server {

using ojson = nlohmann::ordered_json;

// Serializes for the wire: invalid UTF-8 (a token's raw bytes may be part of a character)
// becomes U+FFFD instead of an exception.
std::string dump_json(const ojson& j);

ojson error_json(const ApiError& e);
// "data: {json}\n\n", and the stream's end.
std::string sse_event(const ojson& j);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// A random id with a prefix: "chatcmpl-" + 24 hex digits.
std::string make_id(const char* prefix);

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};
ojson usage_json(const Usage& u);

// What every object of one response shares.
struct ResponseHeader {
  Endpoint endpoint = Endpoint::kChatCompletions;
  std::string id;
  std::string model;
  int64_t created = 0;
  bool include_usage = false;  // stream chunks carry "usage": null until the usage chunk
};
// An object of the response with its choices: chat.completion, chat.completion.chunk or
// text_completion (with "usage" when given).
ojson response_json(const ResponseHeader& h, bool chunk, ojson choices, const Usage* usage);
// The stream's last chunk before [DONE] when usage was asked for: no choices, the usage.
std::string usage_chunk(const ResponseHeader& h, const Usage& u);

// The text of a token id (the tokenizer's raw piece), for top_logprobs.
using PieceFn = std::function<std::string_view(int32_t)>;

struct ChoiceConfig {
  int index = 0;
  bool stream = false;
  bool logprobs = false;
  int top_logprobs = 0;
  bool tools = false;
  std::vector<std::string> tool_names;
  // Completions with echo: the prompt's text and tokens (listed in the legacy logprobs).
  std::string echo_text;
  std::vector<int32_t> echo_tokens;
  // With logprobs the engine scores the prompt and prompt() brings the scores (a stream's echo
  // chunk waits for them). echo_first: the prompt index of echo_tokens[0] (1 when an added
  // <|begin_of_text|> is not echoed); prompt token 0 has no log-probability (null, as OpenAI).
  bool echo_scored = false;
  int echo_first = 0;
};

class ChoiceOutput {
 public:
  ChoiceOutput(const ResponseHeader* header, ChoiceConfig config, PieceFn piece);

  // Streaming: the chunks to send at the start (chat: the role; completions: the echo), for one
  // token event (one chunk per token; none while a possible tool call is held back), and at the
  // end (the held-back tail as content or the tool calls, with the finish reason). Without
  // streaming the same calls return "" and build the final entry.
  std::string start();
  // The engine's scores of the prompt (Request::on_prompt): entry i is prompt token i + 1.
  std::string prompt(const std::vector<PromptTokenLogprob>& lps);
  std::string token(const TokenEvent& ev);
  std::string finish(const FinishInfo& f);

  // Non-streaming: this choice's entry of "choices".
  ojson choice() const;
  const std::string& text() const { return text_; }
  const std::string& finish_reason() const { return finish_reason_; }
  const std::vector<ToolCall>& tool_calls() const { return calls_; }
  int64_t tokens() const { return n_tokens_; }

 private:
  struct TokenLogprob {
    std::string token;  // raw bytes
    float logprob = 0;
    std::vector<std::pair<std::string, float>> top;
    int64_t text_offset = 0;
    bool scored = true;  // false: the first prompt token (null log-probability)
  };
  TokenLogprob record(const TokenEvent& ev) const;
  ojson chat_logprobs(const std::vector<TokenLogprob>& lps) const;
  ojson legacy_logprobs(const std::vector<TokenLogprob>& lps, bool with_echo) const;
  // A streamed chunk with content `text` and the logprobs of `lps`; finish_reason when given.
  std::string content_chunk(const std::string& text, const std::vector<TokenLogprob>& lps, const char* finish) const;
  std::string content_chunk_tree(const std::string& text, const std::vector<TokenLogprob>& lps, const char* finish) const;
  // content_chunk without logprobs or a finish reason, a streamed token's usual chunk: the
  // chunk rendered once around a marker, each text's JSON string set in its place (the same
  // bytes, for one string escape a token instead of a JSON tree and its allocations).
  std::string text_chunk(const std::string& text) const;
  // One streamed tool_calls delta for call k: its header (id, type, name, empty arguments) when
  // name is given, else a piece of its arguments.
  std::string call_chunk(size_t k, const std::string* name, const std::string& arguments) const;
  // A streamed chat chunk of this choice with `delta`, no logprobs and no finish reason.
  std::string delta_chunk(ojson delta) const;
  // Streaming tools: the deltas the output held so far adds (a call's header once its name is
  // known and offered, then its arguments as they arrive).
  std::string stream_calls();
  // The delta that takes call k's sent arguments to `args`, when `args` extends them.
  std::string send_arguments(size_t k, const std::string& args);
  std::string call_id(size_t k) const;
  bool chat() const { return header_->endpoint == Endpoint::kChatCompletions; }

  const ResponseHeader* header_;
  ChoiceConfig cfg_;
  PieceFn piece_;
  enum class Mode { kContent, kUndecided, kCall } mode_;
  std::string text_;                     // content so far (chat) / output text (completions)
  std::string held_;                     // tools: output not yet sent, maybe a call
  std::vector<TokenLogprob> logprobs_;   // every token's (non-streaming, and held ones)
  size_t held_logprobs_ = 0;             // logprobs_[held_logprobs_..] not yet streamed
  std::vector<TokenLogprob> echo_lps_;   // the echoed prompt tokens' scores, once prompt() has run
  bool echo_ready_ = false;
  std::vector<ToolCall> calls_;
  size_t headers_sent_ = 0;              // streaming tools: calls whose header is out
  std::vector<std::string> args_sent_;   // ... and the arguments text sent for each
  std::string finish_reason_;
  int64_t n_tokens_ = 0;
  mutable std::string text_chunk_head_, text_chunk_tail_;  // text_chunk's, made on first use
};

}  // namespace ll3::server
