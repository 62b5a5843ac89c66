// One /v1/chat/completions or /v1/completions request in flight: its prompts tokenized, one
// engine request per choice (prompts x n), the engine's events carried to the connection's
// strand (engine callbacks only post), turned into stream chunks or the final response, and
// the engine requests cancelled when the client goes away.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ll3/engine.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_output.h"
#include "server/openai_request.h"

namespace ll3::server {

// What a call needs from the server around it.
class ServeContext {
 public:
  virtual ~ServeContext() = default;
  // Engine submit / cancel (an error with kUnavailable when no engine serves).
  virtual Result<RequestId> submit(Request r) = 0;
  virtual void cancel(RequestId id) = 0;
  // From an engine callback: runs `fn` on `ex`'s strand. The events of one engine step reach
  // the I/O thread together, in one wakeup (a wakeup per token would preempt the engine's
  // threads wherever cores are short, and its barriers wait for the preempted one).
  virtual void from_engine(const std::shared_ptr<HttpExchange>& ex, std::function<void()> fn) = 0;
  // Special tokens written in `text` are parsed as such.
  virtual std::vector<int32_t> encode(const std::string& text, bool add_bos) const = 0;
  // A chat prompt in pieces (Prompt::segments): special tokens parsed only where a piece allows.
  virtual std::vector<int32_t> encode_segments(const std::vector<std::pair<std::string, bool>>& segments) const = 0;
  virtual std::string decode(const std::vector<int32_t>& tokens) const = 0;
  virtual std::string_view piece(int32_t id) const = 0;
  virtual int32_t bos_id() const = 0;
  virtual const ModelInfo& model() const = 0;
  virtual Metrics& metrics() = 0;
  // The error response for `e` (with CORS and Retry-After headers), and headers every
  // response to `req` carries.
  virtual HttpResponse error_response(const ApiError& e, const HttpRequest& req) const = 0;
  virtual Headers common_headers(const HttpRequest& req) const = 0;
  virtual bool shutting_down() const = 0;
  // In-flight accounting for the graceful shutdown.
  virtual void call_started() = 0;
  virtual void call_finished() = 0;
  // LoRA adapters (server/lora_routes.h): what the engine holds, and run-time loading.
  virtual std::vector<LoraInfo> loras() const = 0;
  virtual Status load_lora(const LoraSpec& spec) = 0;
  virtual Status unload_lora(const std::string& name) = 0;
  virtual bool runtime_lora() const = 0;
  virtual const std::string& lora_root() const = 0;
};

// An engine submit failure as the API reports it: 400 (invalid, too long for the context),
// 429 (queue full) or 503 (shutting down).
ApiError submit_error(const Status& st, Endpoint endpoint, bool shutting_down);

// A call's output in another API's shape than OpenAI's (the Anthropic Messages API:
// anthropic_output.h). The call has one ChoiceOutput, which then builds no OpenAI chunks (its
// config says stream = false) but still holds the text and parses the tool calls; after each of
// its events the dialect writes what the output now holds in its own stream events, and at the
// end its own response. Errors before the stream take the API's shape in error_response().
class OutputDialect {
 public:
  virtual ~OutputDialect() = default;
  virtual const char* id_prefix() const = 0;  // of the response id ("msg_")
  // Streaming: the first events, what a token and the finish add, the last events, and an
  // error after the stream began.
  virtual std::string start(const ResponseHeader& h, int64_t prompt_tokens) = 0;
  virtual std::string token(const ChoiceOutput& out) = 0;
  virtual std::string finish(const ChoiceOutput& out, const FinishInfo& f) = 0;
  virtual std::string end(const Usage& u) = 0;
  virtual std::string error(const ApiError& e) = 0;
  // Not streaming: the response body.
  virtual std::string response(const ResponseHeader& h, const ChoiceOutput& out, const FinishInfo& f, const Usage& u) = 0;
};

class GenerateCall : public std::enable_shared_from_this<GenerateCall> {
 public:
  // dialect: null for OpenAI's output; else the request has one choice (n = 1, one prompt).
  GenerateCall(ServeContext& ctx, std::shared_ptr<HttpExchange> ex, ApiRequest req,
               std::unique_ptr<OutputDialect> dialect = nullptr);
  ~GenerateCall();
  // On the connection's strand.
  void start();

 private:
  struct Choice {
    size_t prompt = 0;
    RequestId id = 0;
    bool live = false;
    double last_token_s = -1;
    FinishInfo fin;
  };
  void on_prompt(size_t i, const std::vector<PromptTokenLogprob>& lps);
  void on_token(size_t i, const TokenEvent& ev);
  void on_finish(size_t i, const FinishInfo& f);
  void fail(ApiError e);  // the whole response becomes this error; live choices are cancelled
  void client_gone();
  void complete();
  void complete_dialect(const Usage& u);  // complete()'s answer with a dialect

  ServeContext& ctx_;
  std::shared_ptr<HttpExchange> ex_;
  ApiRequest req_;
  std::unique_ptr<OutputDialect> dialect_;
  ResponseHeader header_;
  std::vector<std::vector<int32_t>> prompt_tokens_;
  std::vector<Choice> choices_;
  std::vector<ChoiceOutput> outs_;
  int live_ = 0;
  bool started_ = false;  // counted in flight
  bool streaming_ = false;  // the stream's headers are out
  bool gone_ = false;
  bool completed_ = false;
  ApiError error_;
};

}  // namespace ll3::server
