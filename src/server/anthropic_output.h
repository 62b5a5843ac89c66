// Engine output -> Anthropic Messages JSON: the message object of POST /v1/messages, its stream
// (message_start, content_block_start, ping, content_block_delta, content_block_stop,
// message_delta, message_stop, each as `event: NAME` + `data: JSON`), errors as `event: error`,
// and the two routes. AnthropicOutput is GenerateCall's dialect: it reads what the call's
// ChoiceOutput holds (the text, the tool calls it parsed, the finish reason), so tool-call
// detection is the OpenAI path's. Text streams as it becomes final; a tool_use block goes out
// whole once the output is known to be a call (its input as one input_json_delta).
#pragma once

#include <memory>
#include <string>

#include "server/generate_call.h"

namespace ll3::server {

// "event: NAME\ndata: JSON\n\n".
std::string named_event(const char* name, const ojson& data);

// Anthropic's usage: input_tokens counts the prompt tokens computed for this request,
// cache_read_input_tokens those whose KV the prefix cache or a session held (so the two add up
// to the prompt), output_tokens the generated ones.
ojson anthropic_usage(const Usage& u);

// stop_reason from the output's finish: "tool_use", "max_tokens", "stop_sequence", "end_turn".
std::string anthropic_stop_reason(const std::string& finish_reason, const FinishInfo& f);

class AnthropicOutput final : public OutputDialect {
 public:
  // tools: the output may be a tool call, so the text block opens only once text is known.
  explicit AnthropicOutput(bool tools) : tools_(tools) {}
  const char* id_prefix() const override { return "msg_"; }
  std::string start(const ResponseHeader& h, int64_t prompt_tokens) override;
  std::string token(const ChoiceOutput& out) override;
  std::string finish(const ChoiceOutput& out, const FinishInfo& f) override;
  std::string end(const Usage& u) override;
  std::string error(const ApiError& e) override;
  std::string response(const ResponseHeader& h, const ChoiceOutput& out, const FinishInfo& f,
                       const Usage& u) override;

 private:
  std::string open_block(ojson block);  // content_block_start (and the ping after the first)
  std::string close_block();
  std::string send_text(const ChoiceOutput& out);  // the text the output has that was not sent

  bool tools_;
  int index_ = -1;  // of the last block opened
  bool open_ = false, text_open_ = false, pinged_ = false;
  size_t text_sent_ = 0;
  std::string stop_reason_, stop_sequence_;
};

// The message content of a finished output: a text block (unless the output is only tool
// calls), then a tool_use block per call.
ojson anthropic_content(const ChoiceOutput& out);

// The routes. Errors go out through ServeContext::error_response, which gives paths under
// /v1/messages Anthropic's error shape.
void serve_messages(ServeContext& ctx, const std::shared_ptr<HttpExchange>& ex);
void serve_count_tokens(ServeContext& ctx, HttpExchange& ex);

}  // namespace ll3::server
