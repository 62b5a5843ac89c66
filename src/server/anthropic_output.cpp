#include "server/anthropic_output.h"

#include "server/anthropic_request.h"

namespace ll3::server {

namespace {

// A call's arguments (a JSON text) as the tool_use block's input, which Anthropic's clients
// take as an object: anything else (a model's broken JSON) becomes an empty input.
ojson call_input(const ToolCall& c) {
  if (json_depth(c.arguments, kMaxJsonDepth) > kMaxJsonDepth) return ojson::object();
  ojson v = ojson::parse(c.arguments, nullptr, false);
  return v.is_object() ? v : ojson::object();
}

ojson tool_use_block(const ToolCall& c, bool empty_input) {
  ojson b = ojson::object();
  b["type"] = "tool_use";
  b["id"] = make_id("toolu_");
  b["name"] = c.name;
  b["input"] = empty_input ? ojson::object() : call_input(c);
  return b;
}

ojson text_block(const std::string& text) {
  ojson b = ojson::object();
  b["type"] = "text";
  b["text"] = text;
  return b;
}

ojson nullable(const std::string& s) { return s.empty() ? ojson(nullptr) : ojson(s); }

}  // namespace

std::string named_event(const char* name, const ojson& data) {
  return std::string("event: ") + name + "\ndata: " + dump_json(data) + "\n\n";
}

ojson anthropic_usage(const Usage& u) {
  ojson j = ojson::object();
  j["input_tokens"] = u.prompt_tokens - u.cached_tokens;
  j["cache_creation_input_tokens"] = 0;
  j["cache_read_input_tokens"] = u.cached_tokens;
  j["output_tokens"] = u.completion_tokens;
  return j;
}

std::string anthropic_stop_reason(const std::string& finish_reason, const FinishInfo& f) {
  if (finish_reason == "tool_calls") return "tool_use";
  if (finish_reason == "length") return "max_tokens";
  return f.stop_string.empty() ? "end_turn" : "stop_sequence";
}

ojson anthropic_content(const ChoiceOutput& out) {
  ojson content = ojson::array();
  if (!out.text().empty() || out.tool_calls().empty()) content.push_back(text_block(out.text()));
  for (const ToolCall& c : out.tool_calls()) content.push_back(tool_use_block(c, false));
  return content;
}

std::string AnthropicOutput::start(const ResponseHeader& h, int64_t prompt_tokens) {
  ojson msg = ojson::object();
  msg["id"] = h.id;
  msg["type"] = "message";
  msg["role"] = "assistant";
  msg["model"] = h.model;
  msg["content"] = ojson::array();
  msg["stop_reason"] = nullptr;
  msg["stop_sequence"] = nullptr;
  // How much of the prompt the cache holds is known only at the end (message_delta says).
  Usage u;
  u.prompt_tokens = prompt_tokens;
  msg["usage"] = anthropic_usage(u);
  std::string out =
      named_event("message_start", ojson{{"type", "message_start"}, {"message", std::move(msg)}});
  // Without tools the output is text: its block opens at once, as Anthropic's streams do.
  if (!tools_) out += open_block(text_block(""));
  text_open_ = !tools_;
  return out;
}

std::string AnthropicOutput::open_block(ojson block) {
  std::string out = named_event("content_block_start", ojson{{"type", "content_block_start"},
                                                             {"index", ++index_},
                                                             {"content_block", std::move(block)}});
  open_ = true;
  if (!pinged_) {
    pinged_ = true;
    out += named_event("ping", ojson{{"type", "ping"}});
  }
  return out;
}

std::string AnthropicOutput::close_block() {
  if (!open_) return "";
  open_ = text_open_ = false;
  return named_event("content_block_stop",
                     ojson{{"type", "content_block_stop"}, {"index", index_}});
}

std::string AnthropicOutput::send_text(const ChoiceOutput& out) {
  const std::string& text = out.text();
  if (text.size() <= text_sent_) return "";
  std::string ev;
  if (!text_open_) {
    ev += open_block(text_block(""));
    text_open_ = true;
  }
  ojson delta = ojson{{"type", "text_delta"}, {"text", text.substr(text_sent_)}};
  text_sent_ = text.size();
  return ev + named_event("content_block_delta", ojson{{"type", "content_block_delta"},
                                                       {"index", index_},
                                                       {"delta", std::move(delta)}});
}

std::string AnthropicOutput::token(const ChoiceOutput& out) { return send_text(out); }

std::string AnthropicOutput::finish(const ChoiceOutput& out, const FinishInfo& f) {
  stop_reason_ = anthropic_stop_reason(out.finish_reason(), f);
  stop_sequence_ = stop_reason_ == "stop_sequence" ? f.stop_string : "";
  std::string ev = send_text(out);
  // An output with neither text nor calls still has its (empty) text block.
  if (index_ < 0 && out.tool_calls().empty()) ev += open_block(text_block(""));
  for (const ToolCall& c : out.tool_calls()) {
    ev += close_block();
    ev += open_block(tool_use_block(c, true));
    ojson delta = ojson{{"type", "input_json_delta"}, {"partial_json", dump_json(call_input(c))}};
    ev += named_event(
        "content_block_delta",
        ojson{{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(delta)}});
  }
  return ev + close_block();
}

std::string AnthropicOutput::end(const Usage& u) {
  ojson delta = ojson{{"stop_reason", stop_reason_}, {"stop_sequence", nullable(stop_sequence_)}};
  std::string ev = named_event(
      "message_delta",
      ojson{{"type", "message_delta"}, {"delta", std::move(delta)}, {"usage", anthropic_usage(u)}});
  return ev + named_event("message_stop", ojson{{"type", "message_stop"}});
}

std::string AnthropicOutput::error(const ApiError& e) {
  return named_event("error", anthropic_error_json(e));
}

std::string AnthropicOutput::response(const ResponseHeader& h, const ChoiceOutput& out,
                                      const FinishInfo& f, const Usage& u) {
  const std::string reason = anthropic_stop_reason(out.finish_reason(), f);
  ojson msg = ojson::object();
  msg["id"] = h.id;
  msg["type"] = "message";
  msg["role"] = "assistant";
  msg["model"] = h.model;
  msg["content"] = anthropic_content(out);
  msg["stop_reason"] = reason;
  msg["stop_sequence"] = reason == "stop_sequence" ? ojson(f.stop_string) : ojson(nullptr);
  msg["usage"] = anthropic_usage(u);
  return dump_json(msg);
}

void serve_messages(ServeContext& ctx, const std::shared_ptr<HttpExchange>& ex) {
  ApiRequest r;
  ApiError e = parse_messages_request(ex->request().body, ctx.model(), &r);
  if (e.ok()) e = apply_session_header(ex->request().header("x-session-id"), &r);
  if (!e.ok()) {
    ex->log_field("error", e.message);
    return ex->respond(ctx.error_response(e, ex->request()));
  }
  auto dialect = std::make_unique<AnthropicOutput>(r.tools);
  auto call = std::make_shared<GenerateCall>(ctx, ex, std::move(r), std::move(dialect));
  call->start();
}

void serve_count_tokens(ServeContext& ctx, HttpExchange& ex) {
  Prompt p;
  ApiError e = parse_count_tokens_request(ex.request().body, ctx.model(), &p);
  if (!e.ok()) return ex.respond(ctx.error_response(e, ex.request()));
  // Tokenized as GenerateCall tokenizes the prompt of /v1/messages.
  const size_t n = p.segments.empty() ? ctx.encode(p.text, p.add_bos).size()
                                      : ctx.encode_segments(p.segments).size();
  HttpResponse r;
  r.body = dump_json(ojson{{"input_tokens", n}});
  r.headers = ctx.common_headers(ex.request());
  ex.respond(std::move(r));
}

}  // namespace ll3::server
