#include "server/openai_server.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "core/sha256.h"
#include "engine/model_impl.h"
#include "server/anthropic_output.h"
#include "server/anthropic_request.h"
#include "server/embeddings.h"
#include "server/generate_call.h"
#include "server/lora_routes.h"
#include "server/metrics.h"
#include "server/openai_output.h"
#include "server/webui.h"
#include "tokenizer/jinja.h"

namespace ll3::server {

namespace {

double steady_now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Equal in time independent of where they differ (and of their lengths): the digests are.
bool same_secret(const std::string& a, const std::string& b) {
  const std::string x = sha256_hex(a), y = sha256_hex(b);
  unsigned diff = 0;
  for (size_t i = 0; i < x.size(); ++i) diff |= static_cast<unsigned>(x[i] ^ y[i]);
  return diff == 0;
}

std::string utc_now() {
  const auto t = std::chrono::system_clock::now();
  const std::time_t s = std::chrono::system_clock::to_time_t(t);
  const long ms = static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                tm.tm_min, tm.tm_sec, ms);
  return buf;
}

ApiError api_error(int status, std::string type, std::string message, std::string code = "") {
  ApiError e;
  e.status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

}  // namespace

struct OpenAiServer::Impl final : ServeContext {
  ServerOptions opt;
  Metrics metrics_;
  std::unique_ptr<HttpServer> http;

  // The engine, set once the model is loaded and reset at shutdown; submit and cancel take the
  // lock shared, so an engine is never destroyed under them.
  mutable std::shared_mutex engine_mu;
  std::unique_ptr<Engine> engine;
  std::shared_ptr<const Model> model_ref;  // outlives the engine: late events still read pieces
  std::atomic<bool> ready{false}, stopping{false};
  ModelInfo info;  // written once before `ready`
  const Tokenizer* tok = nullptr;
  int64_t max_seq_tokens = 0;
  int64_t created = static_cast<int64_t>(std::time(nullptr));

  // Engine events on their way to the connections' strands (from_engine).
  std::mutex outbox_mu;
  std::vector<std::pair<std::shared_ptr<HttpExchange>, std::function<void()>>> outbox;
  bool outbox_scheduled = false;

  std::mutex mu;  // in-flight count and the shutdown signal
  std::condition_variable cv;
  int64_t in_flight = 0;
  int signals = 0;
  bool shutdown_done = false;

  // ServeContext
  Result<RequestId> submit(Request r) override {
    std::shared_lock<std::shared_mutex> lk(engine_mu);
    if (!engine) return Status::error("the server is shutting down", StatusCode::kUnavailable);
    return engine->submit(std::move(r));
  }
  void cancel(RequestId id) override {
    std::shared_lock<std::shared_mutex> lk(engine_mu);
    if (engine) engine->cancel(id);
  }
  void from_engine(const std::shared_ptr<HttpExchange>& ex, std::function<void()> fn) override {
    bool schedule = false;
    {
      std::lock_guard<std::mutex> lk(outbox_mu);
      outbox.emplace_back(ex, std::move(fn));
      schedule = !outbox_scheduled;
      outbox_scheduled = true;
    }
    if (schedule) http->post([this] { drain_outbox(); });
  }
  void drain_outbox() {
    std::vector<std::pair<std::shared_ptr<HttpExchange>, std::function<void()>>> batch;
    {
      std::lock_guard<std::mutex> lk(outbox_mu);
      batch.swap(outbox);
      outbox_scheduled = false;
    }
    for (auto& [ex, fn] : batch) ex->post(std::move(fn));
  }
  std::vector<int32_t> encode(const std::string& text, bool add_bos) const override { return tok->encode(text, add_bos, true); }
  std::vector<int32_t> encode_segments(const std::vector<std::pair<std::string, bool>>& segments) const override {
    std::vector<int32_t> out;
    for (const auto& [text, special] : segments) tok->encode_into(text, false, special, out);
    return out;
  }
  std::string decode(const std::vector<int32_t>& t) const override { return tok->decode(t); }
  std::string_view piece(int32_t id) const override { return tok->piece(id); }
  int32_t bos_id() const override { return tok->bos_id(); }
  const ModelInfo& model() const override { return info; }
  Metrics& metrics() override { return metrics_; }
  bool shutting_down() const override { return stopping.load(); }
  void call_started() override {
    std::lock_guard<std::mutex> lk(mu);
    ++in_flight;
  }
  void call_finished() override {
    std::lock_guard<std::mutex> lk(mu);
    --in_flight;
    cv.notify_all();
  }
  Headers common_headers(const HttpRequest& req) const override;
  HttpResponse error_response(const ApiError& e, const HttpRequest& req) const override;
  std::vector<LoraInfo> loras() const override {
    std::shared_lock<std::shared_mutex> lk(engine_mu);
    return engine ? engine->loras() : std::vector<LoraInfo>();
  }
  Status load_lora(const LoraSpec& spec) override {
    std::shared_lock<std::shared_mutex> lk(engine_mu);
    if (!engine) return Status::error("the server is shutting down", StatusCode::kUnavailable);
    return engine->load_lora(spec);
  }
  Status unload_lora(const std::string& name) override {
    std::shared_lock<std::shared_mutex> lk(engine_mu);
    if (!engine) return Status::error("the server is shutting down", StatusCode::kUnavailable);
    return engine->unload_lora(name);
  }
  const std::string& lora_root() const override { return opt.lora_root; }
  bool runtime_lora() const override {
    std::shared_lock<std::shared_mutex> lk(engine_mu);
    return engine && engine->options().lora_runtime;
  }

  void handle(const std::shared_ptr<HttpExchange>& ex);
  void respond_json(HttpExchange& ex, int status, const ojson& body);
  void access_log(const AccessRecord& r);
  void on_signal(int sig);

  // Routes.
  void generate(const std::shared_ptr<HttpExchange>& ex, Endpoint endpoint);
  void models(HttpExchange& ex);
  void tokenize(HttpExchange& ex);
  void detokenize(HttpExchange& ex);
  void health(HttpExchange& ex);
  void metrics_route(HttpExchange& ex);
};

Headers OpenAiServer::Impl::common_headers(const HttpRequest& req) const {
  Headers h;
  if (opt.cors_origin.empty()) return h;
  if (opt.cors_origin == "*") {
    h.emplace_back("Access-Control-Allow-Origin", "*");
    return h;
  }
  const std::string origin = req.header("origin");
  size_t b = 0;
  while (b <= opt.cors_origin.size()) {
    size_t e = opt.cors_origin.find(',', b);
    if (e == std::string::npos) e = opt.cors_origin.size();
    if (!origin.empty() && opt.cors_origin.compare(b, e - b, origin) == 0 && e - b == origin.size()) {
      h.emplace_back("Access-Control-Allow-Origin", origin);
      break;
    }
    b = e + 1;
  }
  h.emplace_back("Vary", "Origin");
  return h;
}

HttpResponse OpenAiServer::Impl::error_response(const ApiError& e, const HttpRequest& req) const {
  HttpResponse r;
  r.status = e.status;
  r.body = dump_json(is_anthropic_path(req.path) ? anthropic_error_json(e) : error_json(e));
  r.headers = common_headers(req);
  if (e.status == 429) r.headers.emplace_back("Retry-After", "1");
  if (e.status == 503) r.headers.emplace_back("Retry-After", "5");
  if (e.status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

void OpenAiServer::Impl::respond_json(HttpExchange& ex, int status, const ojson& body) {
  HttpResponse r;
  r.status = status;
  r.body = dump_json(body);
  r.headers = common_headers(ex.request());
  ex.respond(std::move(r));
}

void OpenAiServer::Impl::access_log(const AccessRecord& r) {
  metrics_.count_request(r.status);
  if (r.path == "/v1/chat/completions" || r.path == "/v1/completions" || r.path == "/v1/messages" || r.path == "/v1/embeddings") {
    metrics_.duration.observe(r.seconds);
  }
  if (!opt.access_log) return;
  std::string line;
  if (opt.log_json) {
    ojson j = ojson::object();
    j["time"] = utc_now();
    j["remote"] = r.remote;
    j["method"] = r.method;
    j["path"] = r.path;
    j["status"] = r.status;
    j["latency_ms"] = std::round(r.seconds * 1e6) / 1e3;
    j["bytes"] = r.bytes_sent;
    if (r.client_closed) j["client_closed"] = true;
    for (auto it = r.fields.begin(); it != r.fields.end(); ++it) j[it.key()] = it.value();
    line = dump_json(j) + "\n";
  } else {
    line = strprintf("%s ll3 serve: %s %s %s %d %.1fms %llu bytes", utc_now().c_str(), r.remote.c_str(), r.method.c_str(),
                     r.path.c_str(), r.status, r.seconds * 1e3, static_cast<unsigned long long>(r.bytes_sent));
    if (r.client_closed) line += " client_closed";
    for (auto it = r.fields.begin(); it != r.fields.end(); ++it) {
      line += " " + it.key() + "=" + (it.value().is_string() ? it.value().get<std::string>() : dump_json(it.value()));
    }
    line += "\n";
  }
  // One write per line, so lines of different threads never interleave.
  std::fwrite(line.data(), 1, line.size(), stderr);
}

void OpenAiServer::Impl::on_signal(int sig) {
  // Nothing runs and nothing is to be saved before the model is loaded: stop at once rather
  // than after a load that may take minutes (the supervisor's grace period would run out).
  if (!ready) {
    std::fprintf(stderr, "ll3 serve: %s received while the model loads; exiting\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    std::fflush(stderr);
    std::_Exit(0);
  }
  std::lock_guard<std::mutex> lk(mu);
  ++signals;
  std::fprintf(stderr, "ll3 serve: %s received%s\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
               signals > 1 ? "; cancelling what is still running" : "; finishing running requests");
  cv.notify_all();
}

void OpenAiServer::Impl::handle(const std::shared_ptr<HttpExchange>& ex) {
  const HttpRequest& req = ex->request();
  const std::string& m = req.method;
  struct Route {
    const char* path;
    const char* method;
  };
  static const Route routes[] = {{"/v1/chat/completions", "POST"}, {"/v1/completions", "POST"}, {"/v1/models", "GET"},
                                 {"/tokenize", "POST"},            {"/detokenize", "POST"},     {"/health", "GET"},
                                 {"/metrics", "GET"},            {"/v1/embeddings", "POST"},
                                 {"/v1/messages", "POST"},         {"/v1/messages/count_tokens", "POST"},
                                 {"/v1/load_lora_adapter", "POST"}, {"/v1/unload_lora_adapter", "POST"},
                                 {"/lora-adapters", "GET"}};
  std::string path = req.path;
  // The chat page needs no key (it asks for one); its API calls are checked like any other.
  if (opt.webui && is_webui_path(path)) return ex->respond(webui_response(req));
  const bool model_path = path.rfind("/v1/models/", 0) == 0 && path.size() > 11;
  const Route* route = nullptr;
  for (const Route& r : routes) {
    if (path == r.path || (model_path && std::string_view(r.path) == "/v1/models")) route = &r;
  }
  if (!route) return ex->respond(error_response(api_error(404, "invalid_request_error", "no route for " + path, "not_found"), req));
  if (m == "OPTIONS" && !opt.cors_origin.empty()) {
    // A CORS preflight.
    HttpResponse r;
    r.status = 204;
    r.content_type = "text/plain";
    r.headers = common_headers(req);
    r.headers.emplace_back("Access-Control-Allow-Methods", std::string(route->method) + ", OPTIONS");
    const std::string asked = req.header("access-control-request-headers");
    r.headers.emplace_back("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked);
    r.headers.emplace_back("Access-Control-Max-Age", "86400");
    return ex->respond(std::move(r));
  }
  if (m != route->method) {
    HttpResponse r = error_response(
        api_error(405, "invalid_request_error", "method " + m + " is not allowed on " + path + " (use " + route->method + ")",
                  "method_not_allowed"),
        req);
    r.headers.emplace_back("Allow", route->method);
    return ex->respond(std::move(r));
  }
  if (path == "/health") return health(*ex);
  if (!opt.api_key.empty()) {
    const std::string auth = req.header("authorization");
    const std::string prefix = "Bearer ";
    // Anthropic's clients send the key as X-Api-Key.
    const std::string x_key = req.header("x-api-key");
    const bool has_bearer = auth.size() > prefix.size() && auth.compare(0, prefix.size(), prefix) == 0;
    const bool has = has_bearer || !x_key.empty();
    const bool good = (has_bearer && same_secret(auth.substr(prefix.size()), opt.api_key)) ||
                      (!x_key.empty() && same_secret(x_key, opt.api_key));
    if (!good) {
      return ex->respond(error_response(
          api_error(401, "invalid_request_error",
                    has ? "incorrect API key provided"
                        : "missing API key (send an Authorization: Bearer KEY or an X-Api-Key: KEY header)",
                    "invalid_api_key"),
          req));
    }
  }
  if (path == "/metrics") return metrics_route(*ex);
  if (stopping) return ex->respond(error_response(api_error(503, "server_error", "the server is shutting down", "shutting_down"), req));
  if (!ready) return ex->respond(error_response(api_error(503, "server_error", "the model is loading", "model_loading"), req));
  if (path == "/v1/chat/completions") return generate(ex, Endpoint::kChatCompletions);
  if (path == "/v1/completions") return generate(ex, Endpoint::kCompletions);
  if (path == "/v1/messages") return serve_messages(*this, ex);
  if (path == "/v1/messages/count_tokens") return serve_count_tokens(*this, *ex);
  if (path == "/v1/embeddings") return serve_embeddings(*this, ex, model_ref->n_embd(), opt.pooling);
  if (path == "/tokenize") return tokenize(*ex);
  if (path == "/detokenize") return detokenize(*ex);
  if (path == "/v1/load_lora_adapter") return serve_load_lora(*this, *ex);
  if (path == "/v1/unload_lora_adapter") return serve_unload_lora(*this, *ex);
  if (path == "/lora-adapters") return serve_lora_adapters(*this, *ex);
  return models(*ex);
}

void OpenAiServer::Impl::generate(const std::shared_ptr<HttpExchange>& ex, Endpoint endpoint) {
  ApiRequest r;
  const std::string& body = ex->request().body;
  ApiError e = endpoint == Endpoint::kChatCompletions ? parse_chat_request(body, info, &r) : parse_completion_request(body, info, &r);
  if (e.ok()) e = apply_session_header(ex->request().header("x-session-id"), &r);
  if (!e.ok()) {
    ex->log_field("error", e.message);
    return ex->respond(error_response(e, ex->request()));
  }
  auto call = std::make_shared<GenerateCall>(*this, ex, std::move(r));
  call->start();
}

// The base model, then each LoRA adapter as a model of its own (vLLM's shape: root is its path,
// parent the base's id).
void OpenAiServer::Impl::models(HttpExchange& ex) {
  auto entry = [&](const std::string& id) {
    ojson m = ojson::object();
    m["id"] = id;
    m["object"] = "model";
    m["created"] = created;
    m["owned_by"] = "ll3";
    m["max_model_len"] = max_seq_tokens;
    return m;
  };
  ojson data = ojson::array({entry(info.id)});
  for (const LoraInfo& l : loras()) {
    ojson m = entry(l.name);
    m["root"] = l.path;
    m["parent"] = info.id;
    data.push_back(std::move(m));
  }
  const std::string& path = ex.request().path;
  if (path != "/v1/models") {
    const std::string id = path.substr(11);
    for (const ojson& m : data) {
      if (m["id"] == id) return respond_json(ex, 200, m);
    }
    return ex.respond(
        error_response(api_error(404, "invalid_request_error", "the model '" + id + "' does not exist", "model_not_found"), ex.request()));
  }
  ojson list = ojson::object();
  list["object"] = "list";
  list["data"] = std::move(data);
  respond_json(ex, 200, list);
}

void OpenAiServer::Impl::tokenize(HttpExchange& ex) {
  TokenizeRequest t;
  ApiError e = parse_tokenize_request(ex.request().body, info, &t);
  if (!e.ok()) return ex.respond(error_response(e, ex.request()));
  std::vector<int32_t> ids;
  if (!t.segments.empty()) {
    if (t.add_bos && tok->bos_id() >= 0) ids.push_back(tok->bos_id());
    for (const auto& [text, special] : t.segments) tok->encode_into(text, false, special && t.parse_special, ids);
  } else {
    ids = tok->encode(t.text, t.add_bos, t.parse_special);
  }
  ojson tokens = ojson::array();
  for (int32_t id : ids) {
    if (t.with_pieces) {
      ojson p = ojson::object();
      p["id"] = id;
      p["piece"] = std::string(tok->piece(id));
      tokens.push_back(std::move(p));
    } else {
      tokens.push_back(id);
    }
  }
  ojson out = ojson::object();
  out["tokens"] = std::move(tokens);
  out["count"] = ids.size();
  out["max_model_len"] = max_seq_tokens;
  respond_json(ex, 200, out);
}

void OpenAiServer::Impl::detokenize(HttpExchange& ex) {
  std::vector<int32_t> ids;
  ApiError e = parse_detokenize_request(ex.request().body, info, &ids);
  if (!e.ok()) return ex.respond(error_response(e, ex.request()));
  const std::string text = tok->decode(ids);
  ojson out = ojson::object();
  out["content"] = text;  // llama.cpp's name
  out["prompt"] = text;   // vLLM's
  respond_json(ex, 200, out);
}

void OpenAiServer::Impl::health(HttpExchange& ex) {
  ojson out = ojson::object();
  if (stopping || !ready) {
    out["status"] = stopping ? "shutting_down" : "loading";
    HttpResponse r;
    r.status = 503;
    r.body = dump_json(out);
    r.headers = common_headers(ex.request());
    r.headers.emplace_back("Retry-After", "5");
    return ex.respond(std::move(r));
  }
  out["status"] = "ok";
  respond_json(ex, 200, out);
}

void OpenAiServer::Impl::metrics_route(HttpExchange& ex) {
  ServerGauges g;
  g.model_loaded = ready.load();
  g.loras = loras();
  {
    std::shared_lock<std::shared_mutex> lk(engine_mu);
    if (engine) g.max_loras = engine->options().max_loras;
  }
  g.connections_open = http->connections_open();
  g.connections_total = http->connections_total();
  {
    std::lock_guard<std::mutex> lk(mu);
    g.requests_in_flight = in_flight;
  }
  EngineStats st;
  bool have = false;
  {
    std::shared_lock<std::shared_mutex> lk(engine_mu);
    if (engine) {
      st = engine->stats();
      have = true;
    }
  }
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics_.render(have ? &st : nullptr, g);
  r.headers = common_headers(ex.request());
  ex.respond(std::move(r));
}

OpenAiServer::OpenAiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

OpenAiServer::~OpenAiServer() { shutdown(0); }

Result<std::unique_ptr<OpenAiServer>> OpenAiServer::start(const ServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->opt = options;
  Impl* p = impl.get();
  auto error_body = [](int status, const std::string& message) {
    const char* type = status >= 500 ? "server_error" : "invalid_request_error";
    HttpResponse r;
    r.status = status;
    r.body = dump_json(error_json(api_error(status, type, message, status == 413 ? "request_too_large" : "")));
    return r;
  };
  Result<std::unique_ptr<HttpServer>> http = HttpServer::start(
      options.http, [p](std::shared_ptr<HttpExchange> ex) { p->handle(ex); }, [p](const AccessRecord& r) { p->access_log(r); },
      error_body);
  if (!http.ok()) return http.status();
  impl->http = std::move(http.value());
  impl->http->on_signal([p](int sig) { p->on_signal(sig); });
  return std::unique_ptr<OpenAiServer>(new OpenAiServer(std::move(impl)));
}

int OpenAiServer::port() const { return impl_->http->port(); }
const std::string& OpenAiServer::host() const { return impl_->http->host(); }

void OpenAiServer::set_engine(std::shared_ptr<const Model> model_ptr, std::unique_ptr<Engine> engine) {
  Impl& s = *impl_;
  const Model& model = *model_ptr;
  const Tokenizer& tok = *model_impl(model).tokenizer;
  ModelInfo info;
  info.id = s.opt.alias.empty() ? model.name() : s.opt.alias;
  info.chat_template = s.opt.chat_template.empty() ? tok.vocab().chat_template : s.opt.chat_template;
  if (!info.chat_template.empty()) {
    Result<jinja::TemplatePtr> t = jinja::parse(info.chat_template);
    info.template_usable = t.ok();
    if (!t.ok()) std::fprintf(stderr, "ll3 serve: the chat template does not parse (%s); using the built-in Llama 3 format\n", t.message().c_str());
  } else {
    std::fprintf(stderr, "ll3 serve: the model has no chat template; using the built-in Llama 3 format\n");
  }
  info.template_supports_tools = info.template_usable && info.chat_template.find("tools") != std::string::npos;
  if (tok.bos_id() >= 0) info.bos_token = std::string(tok.piece(tok.bos_id()));
  if (tok.eos_id() >= 0) info.eos_token = std::string(tok.piece(tok.eos_id()));
  info.n_vocab = model.n_vocab();
  std::unique_lock<std::shared_mutex> lk(s.engine_mu);
  s.info = std::move(info);
  s.tok = &tok;
  s.model_ref = std::move(model_ptr);
  s.max_seq_tokens = engine->stats().max_seq_tokens;
  s.engine = std::move(engine);
  s.ready = true;
}

int OpenAiServer::wait_for_shutdown() {
  std::unique_lock<std::mutex> lk(impl_->mu);
  impl_->cv.wait(lk, [&] { return impl_->signals > 0; });
  return 0;
}

void OpenAiServer::request_shutdown() {
  std::lock_guard<std::mutex> lk(impl_->mu);
  ++impl_->signals;
  impl_->cv.notify_all();
}

bool OpenAiServer::shutdown_requested() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->signals > 0;
}

void OpenAiServer::shutdown(double grace_s) {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.shutdown_done) return;
    s.shutdown_done = true;
  }
  s.stopping = true;
  s.http->stop_accepting();
  const int signals_before = [&] {
    std::lock_guard<std::mutex> lk(s.mu);
    return s.signals;
  }();
  {
    // Running requests finish, unless the grace period ends or another signal comes.
    std::unique_lock<std::mutex> lk(s.mu);
    const double deadline = steady_now() + grace_s;
    while (s.in_flight > 0 && s.signals <= signals_before && steady_now() < deadline) {
      s.cv.wait_for(lk, std::chrono::milliseconds(50));
    }
  }
  {
    // Cancels what still runs (their on_finish posts the responses) and saves sessions.
    std::unique_lock<std::shared_mutex> lk(s.engine_mu);
    s.engine.reset();
  }
  {
    // The cancelled requests' last words reach their clients.
    std::unique_lock<std::mutex> lk(s.mu);
    s.cv.wait_for(lk, std::chrono::seconds(2), [&] { return s.in_flight == 0; });
  }
  // Their last bytes leave before the connections are cut (each closes after its response).
  for (const double until = steady_now() + 2; s.http->connections_open() > 0 && steady_now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  s.http->stop();
}

}  // namespace ll3::server
