#include "server/generate_call.h"

#include <cmath>
#include <ctime>

#include "server/lora_routes.h"

namespace ll3::server {

namespace {

// The request field the engine named (a Request member), as the API calls it.
std::string api_param(const std::string& field, Endpoint endpoint) {
  if (field == "prompt") return endpoint == Endpoint::kChatCompletions ? "messages" : "prompt";
  return field;
}

// What every object of the response shares: its id, model and creation time.
ResponseHeader response_header(const ApiRequest& req, const ServeContext& ctx) {
  ResponseHeader h;
  h.endpoint = req.endpoint;
  h.id = make_id(req.endpoint == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-");
  h.model = ctx.model().id;
  h.created = static_cast<int64_t>(std::time(nullptr));
  h.include_usage = req.stream && req.include_usage;
  return h;
}

// Each prompt's tokens into `out`, in order, or a 400 at the first that comes out empty.
ApiError tokenize_prompts(const ApiRequest& req, const ServeContext& ctx, std::vector<std::vector<int32_t>>* out) {
  const bool chat = req.endpoint == Endpoint::kChatCompletions;
  for (const Prompt& pr : req.prompts) {
    std::vector<int32_t> t = pr.is_tokens           ? pr.tokens
                             : !pr.segments.empty() ? ctx.encode_segments(pr.segments)
                                                    : ctx.encode(pr.text, pr.add_bos);
    if (t.empty()) return invalid_request("the prompt is empty", chat ? "messages" : "prompt");
    out->push_back(std::move(t));
  }
  return {};
}

// Choice j of prompt p (tokenized as `tokens`): what its output needs, the echoed prompt too
// for a completion with echo.
ChoiceConfig choice_config(const ApiRequest& req, size_t p, int j, const std::vector<int32_t>& tokens,
                           const ServeContext& ctx) {
  ChoiceConfig cc;
  cc.index = static_cast<int>(p) * req.n + j;
  cc.stream = req.stream;
  cc.logprobs = req.logprobs;
  cc.top_logprobs = req.top_logprobs;
  cc.tools = req.tools;
  cc.tool_names = req.tool_names;
  if (req.echo && req.endpoint != Endpoint::kChatCompletions) {
    const Prompt& pr = req.prompts[p];
    const bool bos_added = !pr.is_tokens && pr.add_bos && !tokens.empty() && tokens[0] == ctx.bos_id();
    cc.echo_tokens.assign(tokens.begin() + (bos_added ? 1 : 0), tokens.end());
    cc.echo_text = pr.is_tokens ? ctx.decode(tokens) : pr.text;
    cc.echo_scored = req.logprobs;
    cc.echo_first = bos_added ? 1 : 0;
  }
  return cc;
}

// A completion that echoes its prompt with logprobs: the engine scores the prompt too.
bool scores_prompt(const ApiRequest& req) {
  return req.echo && req.logprobs && req.endpoint == Endpoint::kCompletions;
}

// The engine request of choice j of a prompt, but for its callbacks: with a seed, choice j
// samples with seed + j, so n choices from one seed differ, and repeat.
Request engine_request(const ApiRequest& req, const std::vector<int32_t>& tokens, int j) {
  Request r = req.base;
  r.tokens = tokens;
  if (req.seeded && j > 0) {
    r.sampling.seed += static_cast<uint64_t>(j);
    if (r.sampling.seed == kRandomSeed) r.sampling.seed = 0;
  }
  if (scores_prompt(req)) r.prompt_logprobs = req.top_logprobs;
  return r;
}

// The stream's headers and its first events.
void open_stream(HttpExchange& ex, const ServeContext& ctx, std::string first) {
  Headers h = ctx.common_headers(ex.request());
  h.emplace_back("Cache-Control", "no-cache");
  h.emplace_back("X-Accel-Buffering", "no");  // proxies: do not buffer the stream
  ex.start_stream(200, "text/event-stream", std::move(h));
  ex.write(std::move(first));
}

}  // namespace

ApiError submit_error(const Status& st, Endpoint endpoint, bool shutting_down) {
  ApiError e;
  e.message = st.message();
  switch (st.code()) {
    case StatusCode::kInvalid:
      e.status = 400;
      e.type = "invalid_request_error";
      e.param = api_param(st.field(), endpoint);
      break;
    case StatusCode::kTooLong:
      e.status = 400;
      e.type = "invalid_request_error";
      e.code = "context_length_exceeded";
      e.param = api_param(st.field(), endpoint);
      break;
    case StatusCode::kUnavailable:
      if (shutting_down) {
        e.status = 503;
        e.type = "server_error";
        e.code = "shutting_down";
      } else {
        e.status = 429;
        e.type = "rate_limit_error";
        e.code = "queue_full";
      }
      break;
    case StatusCode::kNotFound:
    case StatusCode::kConflict:
      return lora_error(st);  // an adapter unloaded since the request was read
    default:
      e.status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

GenerateCall::GenerateCall(ServeContext& ctx, std::shared_ptr<HttpExchange> ex, ApiRequest req,
                           std::unique_ptr<OutputDialect> dialect)
    : ctx_(ctx), ex_(std::move(ex)), req_(std::move(req)), dialect_(std::move(dialect)) {}

GenerateCall::~GenerateCall() {
  if (started_ && !completed_) ctx_.call_finished();
}

void GenerateCall::start() {
  header_ = response_header(req_, ctx_);
  if (ApiError e = resolve_loras(ctx_, req_, &req_.base.loras, &header_.model); !e.ok()) {
    return ex_->respond(ctx_.error_response(e, ex_->request()));
  }
  if (!req_.base.loras.empty()) ex_->log_field("lora", header_.model);
  if (dialect_) header_.id = make_id(dialect_->id_prefix());
  if (ApiError e = tokenize_prompts(req_, ctx_, &prompt_tokens_); !e.ok()) {
    return ex_->respond(ctx_.error_response(e, ex_->request()));
  }
  for (size_t p = 0; p < req_.prompts.size(); ++p) {
    for (int j = 0; j < req_.n; ++j) {
      ChoiceConfig cc = choice_config(req_, p, j, prompt_tokens_[p], ctx_);
      if (dialect_) cc.stream = false;  // the dialect streams from the output's state
      outs_.emplace_back(&header_, std::move(cc), [&ctx = ctx_](int32_t id) { return ctx.piece(id); });
      Choice c;
      c.prompt = p;
      choices_.push_back(c);
    }
  }

  ctx_.call_started();
  started_ = true;
  auto self = shared_from_this();
  ex_->on_close([self] { self->client_gone(); });
  for (size_t i = 0; i < choices_.size(); ++i) {
    const int j = static_cast<int>(i % static_cast<size_t>(req_.n));
    Request r = engine_request(req_, prompt_tokens_[choices_[i].prompt], j);
    // On the engine's thread: hand over and return at once.
    r.on_token = [self, i](const TokenEvent& ev) {
      self->ctx_.from_engine(self->ex_, [self, i, ev] { self->on_token(i, ev); });
      return true;
    };
    r.on_finish = [self, i](const FinishInfo& f) { self->ctx_.from_engine(self->ex_, [self, i, f] { self->on_finish(i, f); }); };
    if (scores_prompt(req_)) {
      r.on_prompt = [self, i](const std::vector<PromptTokenLogprob>& lps) {
        self->ctx_.from_engine(self->ex_, [self, i, lps] { self->on_prompt(i, lps); });
      };
    }
    Result<RequestId> id = ctx_.submit(std::move(r));
    if (!id.ok()) {
      fail(submit_error(id.status(), req_.endpoint, ctx_.shutting_down()));
      break;
    }
    choices_[i].id = id.value();
    choices_[i].live = true;
    ++live_;
  }
  if (live_ == 0) return complete();
  if (!error_.ok()) return;  // complete() answers once the submitted choices have ended
  if (req_.stream) {
    // Only now that every choice is queued: a refusal before this point is a plain error
    // response with its status.
    streaming_ = true;
    std::string first;
    if (dialect_) first = dialect_->start(header_, static_cast<int64_t>(prompt_tokens_[0].size()));
    for (ChoiceOutput& o : outs_) first += o.start();
    open_stream(*ex_, ctx_, std::move(first));
  }
}

void GenerateCall::on_prompt(size_t i, const std::vector<PromptTokenLogprob>& lps) {
  if (gone_ || !error_.ok()) return;
  std::string chunk = outs_[i].prompt(lps);
  if (streaming_ && !chunk.empty()) ex_->write(std::move(chunk));
}

void GenerateCall::on_token(size_t i, const TokenEvent& ev) {
  if (gone_ || !error_.ok()) return;
  Choice& c = choices_[i];
  if (c.last_token_s >= 0) ctx_.metrics().itl.observe(ev.seconds - c.last_token_s);
  c.last_token_s = ev.seconds;
  std::string chunk = outs_[i].token(ev);
  if (dialect_ && streaming_) chunk = dialect_->token(outs_[i]);
  if (streaming_ && !chunk.empty()) ex_->write(std::move(chunk));
}

void GenerateCall::on_finish(size_t i, const FinishInfo& f) {
  Choice& c = choices_[i];
  c.live = false;
  c.fin = f;
  --live_;
  if (f.completion_tokens > 0) ctx_.metrics().ttft.observe(f.first_token_seconds);
  if (!gone_ && error_.ok()) {
    if (f.reason == FinishReason::kError) {
      ApiError e;
      e.status = 500;
      e.type = "server_error";
      e.message = "generation failed: " + f.error;
      fail(e);
    } else if (f.reason == FinishReason::kCancelled) {
      // Neither the client (gone_) nor an error of ours (error_) asked for it: the engine is
      // stopping.
      ApiError e;
      e.status = 503;
      e.type = "server_error";
      e.code = "shutting_down";
      e.message = "the server is shutting down; the request was cancelled";
      fail(e);
    } else {
      std::string chunk = outs_[i].finish(f);
      if (dialect_ && streaming_) chunk = dialect_->finish(outs_[i], f);
      if (streaming_ && !chunk.empty()) ex_->write(std::move(chunk));
    }
  }
  if (live_ == 0) complete();
}

void GenerateCall::fail(ApiError e) {
  if (!error_.ok()) return;
  error_ = std::move(e);
  for (Choice& c : choices_) {
    if (c.live) ctx_.cancel(c.id);
  }
}

void GenerateCall::client_gone() {
  if (gone_ || completed_) return;
  gone_ = true;
  for (Choice& c : choices_) {
    if (c.live) ctx_.cancel(c.id);
  }
}

void GenerateCall::complete() {
  if (completed_) return;
  completed_ = true;
  Usage u;
  std::string finish;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const FinishInfo& f = choices_[i].fin;
    u.completion_tokens += f.completion_tokens;
    if (i % static_cast<size_t>(req_.n) == 0) {  // the prompt counts once, as OpenAI counts it
      u.prompt_tokens += f.prompt_tokens > 0 ? f.prompt_tokens : static_cast<int64_t>(prompt_tokens_[choices_[i].prompt].size());
      u.cached_tokens += f.cached_tokens;
    }
    if (i == 0) finish = outs_[0].finish_reason();
  }
  ex_->log_field("id", header_.id);
  ex_->log_field("stream", streaming_);
  ex_->log_field("choices", static_cast<int64_t>(choices_.size()));
  ex_->log_field("prompt_tokens", u.prompt_tokens);
  ex_->log_field("cached_tokens", u.cached_tokens);
  ex_->log_field("completion_tokens", u.completion_tokens);
  if (!choices_.empty()) ex_->log_field("ttft_ms", std::round(choices_[0].fin.first_token_seconds * 1e4) / 10);
  if (!error_.ok()) {
    ex_->log_field("error", error_.message);
  } else if (!gone_) {
    ex_->log_field("finish_reason", finish);
  }
  if (started_) ctx_.call_finished();
  if (gone_) return;
  if (dialect_) return complete_dialect(u);
  if (streaming_ && error_.ok()) {
    std::string tail;
    if (req_.include_usage) tail += usage_chunk(header_, u);
    tail += kSseDone;
    ex_->write(std::move(tail));
    ex_->end();
    return;
  }
  if (streaming_) {
    // The stream had begun when the error came (the engine stopping): OpenAI's clients raise
    // an `error` event as an exception.
    ex_->write(sse_event(error_json(error_)) + std::string(kSseDone));
    ex_->end();
    return;
  }
  if (!error_.ok()) return ex_->respond(ctx_.error_response(error_, ex_->request()));
  ojson choices = ojson::array();
  for (const ChoiceOutput& o : outs_) choices.push_back(o.choice());
  HttpResponse r;
  r.body = dump_json(response_json(header_, false, std::move(choices), &u));
  r.headers = ctx_.common_headers(ex_->request());
  ex_->respond(std::move(r));
}

void GenerateCall::complete_dialect(const Usage& u) {
  if (streaming_) {
    ex_->write(error_.ok() ? dialect_->end(u) : dialect_->error(error_));
    ex_->end();
    return;
  }
  if (!error_.ok()) return ex_->respond(ctx_.error_response(error_, ex_->request()));
  HttpResponse r;
  r.body = dialect_->response(header_, outs_.at(0), choices_.at(0).fin, u);
  r.headers = ctx_.common_headers(ex_->request());
  ex_->respond(std::move(r));
}

}  // namespace ll3::server
