// ll3 bench-serve: a load generator for a running `ll3 serve` (like `vllm bench serve`), on the
// loopback interface only. N concurrent streaming clients (asynchronous Beast connections on one
// thread, each with its own kept-alive connection) send a number of greedy /v1/completions
// requests each, within a time bound, for every N of --clients. It reports throughput, time to
// first token and inter-token latency (P50/P99), and counts errors, lost and duplicated tokens:
// each stream's token chunks against its usage.completion_tokens, and its text against a
// non-streamed run of the same prompt.
//
// --fairness instead: N streams decode, their inter-token times are taken for a baseline, then
// one long prompt arrives; the streams' inter-token times while it is prefilled against the
// baseline's, and its time to first token against the idle server's.
#include <sys/resource.h>

#include <algorithm>
// clang-format off: <utility> first, Boost 1.74's asio/awaitable.hpp uses std::exchange without it (GCC 12)
#include <utility>
#include <boost/asio.hpp>
// clang-format on
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "cli_common.h"
#include "commands.h"

namespace ll3::cli {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using json = nlohmann::json;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Target {
  std::string host;
  int port = 0;
  std::string key;
};

// "http://127.0.0.1:8080" -> host and port; loopback addresses only.
std::string parse_url(const std::string& url, Target* t) {
  const std::string prefix = "http://";
  if (url.rfind(prefix, 0) != 0) return "--url must start with http://";
  std::string rest = url.substr(prefix.size());
  rest = rest.substr(0, rest.find('/'));
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return "--url needs a port (http://127.0.0.1:8080)";
  t->host = rest.substr(0, colon);
  t->port = std::atoi(rest.c_str() + colon + 1);
  if (t->host == "localhost") t->host = "127.0.0.1";
  if (!t->host.empty() && t->host.front() == '[') t->host = t->host.substr(1, t->host.size() - 2);
  boost::system::error_code ec;
  const net::ip::address a = net::ip::make_address(t->host, ec);
  if (ec) return "--url: '" + t->host + "' is not an IP address";
  if (!a.is_loopback()) return "bench-serve only loads loopback servers (127.0.0.0/8, ::1)";
  if (t->port <= 0 || t->port > 65535) return "--url: bad port";
  return "";
}

struct Config {
  int requests = 4;         // per client
  double duration_s = 300;  // per level: no new request after this
  int max_tokens = 32;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> reference;  // non-streamed greedy text of each prompt ("" unchecked)
};

struct StreamResult {
  bool ok = false;
  std::string error;
  double ttft = 0;
  std::vector<double> itl;
  std::vector<double> times;  // when each token's chunk came (now_s)
  int64_t chunks = 0, usage_tokens = -1;
  std::string text;
  size_t prompt = 0;
};

json request_body(const Config& c, size_t prompt, bool stream) {
  json b = {{"prompt", c.prompts[prompt]}, {"max_tokens", c.max_tokens}, {"temperature", 0}, {"ignore_eos", true}};
  if (stream) {
    b["stream"] = true;
    b["stream_options"] = {{"include_usage", true}};
  }
  return b;
}

http::request<http::string_body> make_request(const Target& t, const std::string& body) {
  http::request<http::string_body> req{http::verb::post, "/v1/completions", 11};
  req.set(http::field::host, t.host);
  req.set(http::field::content_type, "application/json");
  if (!t.key.empty()) req.set(http::field::authorization, "Bearer " + t.key);
  req.body() = body;
  req.prepare_payload();
  return req;
}

// One client: a connection, requests one after another on it, each response's SSE events
// timed as they arrive.
class Client : public std::enable_shared_from_this<Client> {
 public:
  Client(net::io_context& ioc, const Target& t, const Config& c, int id, double deadline, std::vector<StreamResult>* out)
      : ioc_(ioc), t_(t), c_(c), id_(id), deadline_(deadline), out_(out) {}

  void start() {
    stream_.emplace(ioc_);
    connect();
  }
  // The request in flight (its tokens so far), on the io thread.
  const StreamResult& current() const { return cur_; }
  // Ends the request in flight (the server cancels it) and sends no more.
  void close() {
    sent_ = c_.requests;
    beast::error_code ec;
    if (stream_) stream_->socket().close(ec);
  }

 private:
  void connect() {
    stream_->expires_after(std::chrono::seconds(30));
    stream_->async_connect(tcp::endpoint(net::ip::make_address(t_.host), static_cast<unsigned short>(t_.port)),
                          [self = shared_from_this()](beast::error_code ec) {
                            if (ec) return self->fail("connect: " + ec.message(), true);
                            beast::error_code ignored;
                            self->stream_->socket().set_option(tcp::no_delay(true), ignored);
                            self->next();
                          });
  }

  void next() {
    if (sent_ >= c_.requests || now_s() > deadline_) return;
    cur_ = StreamResult();
    cur_.prompt = static_cast<size_t>(id_ * c_.requests + sent_) % c_.prompts.size();
    ++sent_;
    req_ = make_request(t_, request_body(c_, cur_.prompt, true).dump());
    pending_.clear();
    done_ = false;
    last_ = 0;
    t_send_ = now_s();
    // A stream may run as long as the level (--fairness: the whole test).
    stream_->expires_after(std::chrono::seconds(static_cast<long>(std::max(120.0, c_.duration_s))));
    http::async_write(*stream_, req_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->fail("write: " + ec.message(), true);
      self->read();
    });
  }

  void read() {
    parser_.emplace();
    parser_->body_limit(1u << 30);
    on_chunk_ = [this](std::uint64_t, beast::string_view data, beast::error_code&) -> std::size_t {
      feed(std::string_view(data.data(), data.size()));
      return data.size();
    };
    parser_->on_chunk_body(on_chunk_);
    http::async_read(*stream_, buf_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->fail("read: " + ec.message(), true);
      const int status = self->parser_->get().result_int();
      if (status != 200) return self->fail("HTTP " + std::to_string(status) + ": " + self->parser_->get().body(), !self->parser_->get().keep_alive());
      if (!self->done_) return self->fail("the stream ended without data: [DONE]", false);
      if (self->cur_.usage_tokens < 0) return self->fail("no usage chunk", false);
      self->cur_.ok = self->cur_.error.empty();
      self->out_->push_back(std::move(self->cur_));
      if (!self->parser_->get().keep_alive()) return self->fail_reconnect();
      self->next();
    });
  }

  // SSE: "data: {...}\n\n" events.
  void feed(std::string_view data) {
    const double t = now_s();
    pending_.append(data.data(), data.size());
    size_t end;
    while ((end = pending_.find("\n\n")) != std::string::npos) {
      std::string ev = pending_.substr(0, end);
      pending_.erase(0, end + 2);
      if (ev.rfind("data: ", 0) != 0) continue;
      ev.erase(0, 6);
      if (ev == "[DONE]") {
        done_ = true;
        continue;
      }
      json j = json::parse(ev, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        cur_.error = "malformed event";
        continue;
      }
      if (j.contains("error")) {
        cur_.error = "error event: " + j["error"].value("message", "");
        continue;
      }
      if (j["choices"].empty()) {
        if (j["usage"].is_object()) cur_.usage_tokens = j["usage"].value("completion_tokens", int64_t{-1});
        continue;
      }
      const json& c = j["choices"][0];
      if (c["text"].is_string()) cur_.text += c["text"].get<std::string>();
      if (!c["finish_reason"].is_null()) continue;
      // One chunk per generated token.
      ++cur_.chunks;
      cur_.times.push_back(t);
      if (last_ == 0) {
        cur_.ttft = t - t_send_;
      } else {
        cur_.itl.push_back(t - last_);
      }
      last_ = t;
    }
  }

  void fail(const std::string& why, bool reconnect) {
    cur_.ok = false;
    cur_.error = why;
    out_->push_back(std::move(cur_));
    if (reconnect) return fail_reconnect();
    next();
  }

  void fail_reconnect() {
    beast::error_code ec;
    stream_->socket().close(ec);
    buf_.clear();
    if (sent_ >= c_.requests || now_s() > deadline_) return;
    stream_.emplace(ioc_);
    connect();
  }

  net::io_context& ioc_;
  std::optional<beast::tcp_stream> stream_;
  beast::flat_buffer buf_;
  const Target& t_;
  const Config& c_;
  int id_;
  double deadline_;
  std::vector<StreamResult>* out_;
  int sent_ = 0;
  StreamResult cur_;
  http::request<http::string_body> req_;
  std::optional<http::response_parser<http::string_body>> parser_;
  std::function<std::size_t(std::uint64_t, beast::string_view, beast::error_code&)> on_chunk_;
  std::string pending_;
  bool done_ = false;
  double t_send_ = 0, last_ = 0;
};

// A blocking request, for the reference outputs and the readiness check.
Result<json> request_sync(const Target& t, const std::string& method, const std::string& target, const std::string& body) {
  net::io_context ioc;
  beast::tcp_stream s(ioc);
  beast::error_code ec;
  s.connect(tcp::endpoint(net::ip::make_address(t.host), static_cast<unsigned short>(t.port)), ec);
  if (ec) return Status::errorf("cannot connect to %s:%d: %s", t.host.c_str(), t.port, ec.message().c_str());
  http::request<http::string_body> req = make_request(t, body);
  req.method_string(method);
  req.target(target);
  http::write(s, req, ec);
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  if (!ec) http::read(s, buf, res, ec);
  if (ec) return Status::errorf("%s %s: %s", method.c_str(), target.c_str(), ec.message().c_str());
  if (res.result_int() != 200) return Status::errorf("%s %s: HTTP %d %s", method.c_str(), target.c_str(), res.result_int(), res.body().c_str());
  json j = json::parse(res.body(), nullptr, false);
  if (j.is_discarded()) return Status::errorf("%s %s: not JSON", method.c_str(), target.c_str());
  return j;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1)))];
}

struct LevelReport {
  int clients = 0;
  int64_t requests = 0, errors = 0, lost = 0, duplicated = 0, mismatched = 0, tokens = 0;
  double wall_s = 0, ttft_p50 = 0, ttft_p99 = 0, itl_p50 = 0, itl_p99 = 0;
  std::string first_error;
  double tokens_per_s() const { return wall_s > 0 ? static_cast<double>(tokens) / wall_s : 0; }
};

LevelReport run_level(const Target& t, const Config& c, int clients) {
  net::io_context ioc;
  std::vector<StreamResult> results;
  results.reserve(static_cast<size_t>(clients * c.requests));
  const double t0 = now_s();
  for (int i = 0; i < clients; ++i) std::make_shared<Client>(ioc, t, c, i, t0 + c.duration_s, &results)->start();
  ioc.run();
  LevelReport r;
  r.clients = clients;
  r.wall_s = now_s() - t0;
  std::vector<double> ttft, itl;
  for (const StreamResult& s : results) {
    ++r.requests;
    if (!s.ok) {
      ++r.errors;
      if (r.first_error.empty()) r.first_error = s.error;
      continue;
    }
    r.tokens += s.chunks;
    if (s.chunks < s.usage_tokens) r.lost += s.usage_tokens - s.chunks;
    if (s.chunks > s.usage_tokens) r.duplicated += s.chunks - s.usage_tokens;
    if (!c.reference.empty() && s.text != c.reference[s.prompt]) ++r.mismatched;
    if (s.chunks > 0) ttft.push_back(s.ttft);
    itl.insert(itl.end(), s.itl.begin(), s.itl.end());
  }
  r.ttft_p50 = percentile(ttft, 0.5);
  r.ttft_p99 = percentile(ttft, 0.99);
  r.itl_p50 = percentile(itl, 0.5);
  r.itl_p99 = percentile(itl, 0.99);
  return r;
}

// The flags of ll3 bench-serve, parsed and checked.
struct ServeBenchFlags {
  std::string url = "http://127.0.0.1:8080";
  Target target;
  std::vector<int> levels;  // --clients
  long long requests = 4, max_tokens = 32, prompt_tokens = 32, n_prompts = 8, seed = 1;
  double duration = 300;
  bool no_check = false, as_json = false;
  bool fairness = false;
  long long fair_streams = 8, fair_prompt = 4096, fair_baseline = 48;
};

// "1,16,256" -> its comma-separated parts (empty ones included).
std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> parts;
  size_t b = 0;
  while (b <= list.size()) {
    size_t e = list.find(',', b);
    if (e == std::string::npos) e = list.size();
    parts.push_back(list.substr(b, e - b));
    b = e + 1;
  }
  return parts;
}

// Returns -1 to go on, else the exit code (after --help or a usage error).
int parse_bench_serve_flags(int argc, char** argv, ServeBenchFlags& f) {
  std::string clients_list = "1,16,256", key;
  ArgParser ap("bench-serve", "ll3 bench-serve [--url http://127.0.0.1:8080] [--clients 1,16,256] [--requests 4] [--max-tokens 32]",
               "Load a running ll3 serve (loopback only) with concurrent streaming clients; report throughput, TTFT, "
               "inter-token latency, errors, lost and duplicated tokens. Exits 1 if any request failed or any stream "
               "lost, duplicated or changed a token.");
  ap.add_string({"--url"}, "URL", "the server (default http://127.0.0.1:8080)", &f.url);
  ap.add_string({"--clients"}, "LIST", "concurrent clients, one run per entry (default 1,16,256)", &clients_list);
  ap.add_int({"--requests"}, "N", "requests per client (default 4)", &f.requests);
  ap.add_float({"--duration"}, "S", "per run, no new request after S seconds (default 300)", &f.duration);
  ap.add_int({"--max-tokens"}, "N", "tokens per request (greedy, ignore_eos; default 32)", &f.max_tokens);
  ap.add_int({"--prompt-tokens"}, "N", "random prompt length in tokens (default 32)", &f.prompt_tokens);
  ap.add_int({"--prompts"}, "N", "distinct prompts, used in turn (default 8)", &f.n_prompts);
  ap.add_int({"--seed"}, "S", "seed of the random prompts (default 1)", &f.seed);
  ap.add_string({"--api-key"}, "KEY", "bearer key (default: $LL3_API_KEY)", &key);
  ap.add_flag({"--no-check"}, "skip the non-streamed reference runs (no text comparison)", &f.no_check);
  ap.add_flag({"--json"}, "one JSON object per run instead of the table", &f.as_json);
  ap.add_flag({"--fairness"}, "instead: streams decode, then a long prompt arrives; their inter-token times during its "
              "prefill against before it, and its time to first token against the idle server's", &f.fairness);
  ap.add_int({"--fair-streams"}, "N", "--fairness: streams decoding (default 8)", &f.fair_streams);
  ap.add_int({"--fair-prompt"}, "N", "--fairness: tokens of the long prompt (default 4096)", &f.fair_prompt);
  ap.add_int({"--fair-baseline"}, "N", "--fairness: tokens of each stream timed before it arrives (default 48)",
             &f.fair_baseline);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  if (std::string err = parse_url(f.url, &f.target); !err.empty()) return ap.usage_error(err);
  f.target.key = key;
  if (f.target.key.empty()) {
    if (const char* k = std::getenv("LL3_API_KEY")) f.target.key = k;
  }
  for (const std::string& s : split_commas(clients_list)) {
    const int n = std::atoi(s.c_str());
    if (n < 1 || n > 4096) return ap.usage_error("--clients: each entry must be in 1..4096");
    f.levels.push_back(n);
  }
  if (f.requests < 1 || f.max_tokens < 1 || f.prompt_tokens < 1 || f.n_prompts < 1 || !(f.duration > 0)) {
    return ap.usage_error("--requests, --max-tokens, --prompt-tokens, --prompts and --duration must be positive");
  }
  if (f.fair_streams < 1 || f.fair_streams > 1024 || f.fair_prompt < 2 || f.fair_baseline < 2) {
    return ap.usage_error("--fair-streams must be in 1..1024, --fair-prompt and --fair-baseline at least 2");
  }
  return -1;
}

// Every client holds a connection: as many open files as the hard limit allows.
void raise_open_file_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// The run's settings and its seeded random prompts (each starts with <|begin_of_text|>).
Config make_config(const ServeBenchFlags& f) {
  Config c;
  c.requests = static_cast<int>(f.requests);
  c.duration_s = f.duration;
  c.max_tokens = static_cast<int>(f.max_tokens);
  std::mt19937 rng(static_cast<uint32_t>(f.seed));
  for (long long p = 0; p < f.n_prompts; ++p) {
    std::vector<int32_t> toks = {128000};
    while (static_cast<long long>(toks.size()) < f.prompt_tokens) toks.push_back(static_cast<int32_t>(rng() % 120000));
    c.prompts.push_back(std::move(toks));
  }
  return c;
}

// The non-streamed greedy text of every prompt, which each stream's text must match.
Status fetch_references(const Target& t, Config& c) {
  for (size_t p = 0; p < c.prompts.size(); ++p) {
    Result<json> r = request_sync(t, "POST", "/v1/completions", request_body(c, p, false).dump());
    if (!r.ok()) return r.status();
    c.reference.push_back((*r)["choices"][0]["text"].get<std::string>());
  }
  return ok_status();
}

void print_table_header(const ServeBenchFlags& f, const std::string& model) {
  std::printf("ll3 bench-serve: %s (%s), /v1/completions streamed, prompts of %lld tokens (%lld distinct), %lld tokens "
              "per request (greedy, ignore_eos), %lld requests per client\n",
              f.url.c_str(), model.c_str(), f.prompt_tokens, f.n_prompts, f.max_tokens, f.requests);
  std::printf("%7s %8s %6s %5s %5s %8s %8s %9s %7s %9s %9s %8s %8s\n", "clients", "requests", "errors", "lost", "dup",
              "mismatch", "wall_s", "tok/s", "req/s", "ttft_p50", "ttft_p99", "itl_p50", "itl_p99");
}

void print_level(const LevelReport& r, bool as_json) {
  if (as_json) {
    json j = {{"clients", r.clients},       {"requests", r.requests},   {"errors", r.errors},
              {"lost_tokens", r.lost},      {"duplicated_tokens", r.duplicated}, {"mismatched_streams", r.mismatched},
              {"tokens", r.tokens},         {"wall_s", r.wall_s},       {"tokens_per_s", r.tokens_per_s()},
              {"requests_per_s", r.wall_s > 0 ? static_cast<double>(r.requests) / r.wall_s : 0},
              {"ttft_p50_ms", r.ttft_p50 * 1e3}, {"ttft_p99_ms", r.ttft_p99 * 1e3},
              {"itl_p50_ms", r.itl_p50 * 1e3},   {"itl_p99_ms", r.itl_p99 * 1e3}};
    if (!r.first_error.empty()) j["first_error"] = r.first_error;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%7d %8lld %6lld %5lld %5lld %8lld %8.2f %9.1f %7.2f %7.1fms %7.1fms %6.1fms %6.1fms\n", r.clients,
                static_cast<long long>(r.requests), static_cast<long long>(r.errors), static_cast<long long>(r.lost),
                static_cast<long long>(r.duplicated), static_cast<long long>(r.mismatched), r.wall_s, r.tokens_per_s(),
                r.wall_s > 0 ? static_cast<double>(r.requests) / r.wall_s : 0.0, r.ttft_p50 * 1e3, r.ttft_p99 * 1e3,
                r.itl_p50 * 1e3, r.itl_p99 * 1e3);
    if (!r.first_error.empty()) std::printf("        first error: %s\n", r.first_error.c_str());
  }
  std::fflush(stdout);
}

// Each run's tokens/s against the one-client run's, when there is one.
void print_scaling(const std::vector<LevelReport>& reports) {
  const LevelReport* one = nullptr;
  for (const LevelReport& r : reports) {
    if (r.clients == 1) one = &r;
  }
  if (one && one->tokens_per_s() > 0) {
    for (const LevelReport& r : reports) {
      if (r.clients > 1) std::printf("%d clients: %.1fx the tokens/s of 1 client\n", r.clients, r.tokens_per_s() / one->tokens_per_s());
    }
  }
}

struct FairnessReport {
  double before_p50 = 0, before_p99 = 0, during_p50 = 0, during_p99 = 0;  // the streams' inter-token times
  size_t before_n = 0, during_n = 0;
  double ttft = 0, ttft_idle = 0;  // the long prompt's, beside the streams and on the idle server
};

// Intervals between consecutive tokens of the streams whose later token came in (from, to].
std::vector<double> gaps_in(const std::vector<std::shared_ptr<Client>>& streams, double from, double to) {
  std::vector<double> g;
  for (const auto& c : streams) {
    const std::vector<double>& t = c->current().times;
    for (size_t k = 1; k < t.size(); ++k) {
      if (t[k] > from && t[k] <= to) g.push_back(t[k] - t[k - 1]);
    }
  }
  return g;
}

// The fairness scenario, all on one io thread: a timer polls the streams every 5 ms and moves
// the phases on (every stream decoding -> baseline taken -> the long prompt sent -> its first
// token); --duration bounds the whole.
Result<FairnessReport> run_fairness(const ServeBenchFlags& f, int64_t max_model_len) {
  if (f.fair_prompt >= max_model_len || f.prompt_tokens + 16 >= max_model_len) {
    return Status::error(strprintf("--fair-prompt %lld and --prompt-tokens %lld must fit the server's %lld-token sequences",
                                     f.fair_prompt, f.prompt_tokens, static_cast<long long>(max_model_len)));
  }
  std::mt19937 rng(static_cast<uint32_t>(f.seed));
  auto prompt = [&](long long n) {
    std::vector<int32_t> toks = {128000};
    while (static_cast<long long>(toks.size()) < n) toks.push_back(static_cast<int32_t>(rng() % 120000));
    return toks;
  };
  FairnessReport rep;
  Config alone;  // the idle server's time to first token, with a prompt of its own (nothing cached)
  alone.requests = 1;
  alone.max_tokens = 1;
  alone.duration_s = f.duration;
  alone.prompts = {prompt(f.fair_prompt)};
  const LevelReport idle = run_level(f.target, alone, 1);
  if (idle.errors > 0) return Status::error("the long prompt on the idle server: " + idle.first_error);
  rep.ttft_idle = idle.ttft_p50;
  Config streams = alone;
  // Until cancelled, or the server's longest sequence.
  streams.max_tokens = static_cast<int>(max_model_len - f.prompt_tokens - 1);
  streams.prompts.clear();
  for (long long i = 0; i < f.fair_streams; ++i) streams.prompts.push_back(prompt(f.prompt_tokens));
  Config big = alone;
  big.prompts = {prompt(f.fair_prompt)};

  net::io_context ioc;
  std::vector<StreamResult> ended, big_out;
  std::vector<std::shared_ptr<Client>> clients;
  const double deadline = now_s() + f.duration;
  for (int i = 0; i < static_cast<int>(f.fair_streams); ++i) {
    clients.push_back(std::make_shared<Client>(ioc, f.target, streams, i, deadline, &ended));
    clients.back()->start();
  }
  std::shared_ptr<Client> long_prompt;
  enum class Phase { kStarting, kBaseline, kPrefill, kSettle, kDone } phase = Phase::kStarting;
  double t_base = 0, t_submit = 0, t_end = 0;
  std::string error;
  auto all_have = [&](size_t n) {
    return std::all_of(clients.begin(), clients.end(), [&](const auto& c) { return c->current().times.size() >= n; });
  };
  auto finish = [&](const std::string& why) {
    error = why;
    phase = Phase::kDone;
    for (auto& c : clients) c->close();
    if (long_prompt) long_prompt->close();
  };
  net::steady_timer timer(ioc);
  std::function<void()> poll = [&] {
    if (!ended.empty()) return finish("a stream ended early: " + ended.front().error);
    if (now_s() > deadline) return finish("--duration passed before the test ended");
    if (phase == Phase::kStarting && all_have(4)) {
      phase = Phase::kBaseline;
      t_base = now_s();
    } else if (phase == Phase::kBaseline && all_have(4 + static_cast<size_t>(f.fair_baseline))) {
      phase = Phase::kPrefill;
      t_submit = now_s();
      long_prompt = std::make_shared<Client>(ioc, f.target, big, 0, deadline, &big_out);
      long_prompt->start();
    } else if (phase == Phase::kPrefill && !big_out.empty()) {
      if (!big_out.front().ok) return finish("the long prompt: " + big_out.front().error);
      rep.ttft = big_out.front().ttft;
      const std::vector<double> before = gaps_in(clients, t_base, t_submit);
      rep.before_p50 = percentile(before, 0.5);
      // Until half an interval after its first token: the streams' tokens of that same step too.
      t_end = t_submit + rep.ttft + rep.before_p50 / 2;
      phase = Phase::kSettle;
    } else if (phase == Phase::kSettle && now_s() > t_end) {
      const std::vector<double> before = gaps_in(clients, t_base, t_submit);
      const std::vector<double> during = gaps_in(clients, t_submit, t_end);
      rep.before_p99 = percentile(before, 0.99);
      rep.during_p50 = percentile(during, 0.5);
      rep.during_p99 = percentile(during, 0.99);
      rep.before_n = before.size();
      rep.during_n = during.size();
      return finish("");
    }
    timer.expires_after(std::chrono::milliseconds(5));
    timer.async_wait([&](beast::error_code) { poll(); });
  };
  poll();
  ioc.run();
  if (!error.empty()) return Status::error(error);
  return rep;
}

int bench_fairness(const ServeBenchFlags& f, const std::string& model, int64_t max_model_len) {
  Result<FairnessReport> r = run_fairness(f, max_model_len);
  if (!r.ok()) return fail("bench-serve", r.message());
  const FairnessReport& x = r.value();
  const double itl_ratio = x.before_p50 > 0 ? x.during_p99 / x.before_p50 : 0;
  const double ttft_ratio = x.ttft_idle > 0 ? x.ttft / x.ttft_idle : 0;
  if (f.as_json) {
    json j = {{"streams", f.fair_streams},         {"prompt", f.fair_prompt},
              {"itl_before_p50_ms", x.before_p50 * 1e3}, {"itl_before_p99_ms", x.before_p99 * 1e3},
              {"itl_during_p50_ms", x.during_p50 * 1e3}, {"itl_during_p99_ms", x.during_p99 * 1e3},
              {"p99_during_over_p50_before", itl_ratio}, {"intervals_before", x.before_n},
              {"intervals_during", x.during_n},          {"ttft_s", x.ttft},
              {"ttft_idle_s", x.ttft_idle},              {"ttft_over_idle", ttft_ratio}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("ll3 bench-serve --fairness: %s (%s), %lld streams (%lld-token prompts), then a %lld-token prompt\n",
              f.url.c_str(), model.c_str(), f.fair_streams, f.prompt_tokens, f.fair_prompt);
  std::printf("streams' inter-token time: before P50 %.1f ms, P99 %.1f ms (%zu intervals); during the prefill P50 %.1f ms, "
              "P99 %.1f ms (%zu intervals); P99 during / P50 before %.2f\n",
              x.before_p50 * 1e3, x.before_p99 * 1e3, x.before_n, x.during_p50 * 1e3, x.during_p99 * 1e3, x.during_n,
              itl_ratio);
  std::printf("the long prompt's time to first token: %.2f s, %.2f s on the idle server (%.2fx)\n", x.ttft, x.ttft_idle,
              ttft_ratio);
  return 0;
}

int cmd_bench_serve(int argc, char** argv) {
  ServeBenchFlags f;
  if (int rc = parse_bench_serve_flags(argc, argv, f); rc >= 0) return rc;
  raise_open_file_limit();
  Config c = make_config(f);
  Result<json> models = request_sync(f.target, "GET", "/v1/models", "");
  if (!models.ok()) return fail("bench-serve", models.message());
  const std::string model = (*models)["data"][0].value("id", "?");
  if (f.fairness) return bench_fairness(f, model, (*models)["data"][0].value("max_model_len", int64_t{4096}));
  if (!f.no_check) {
    if (Status st = fetch_references(f.target, c); !st.ok()) return fail("bench-serve", st.message());
  }
  if (!f.as_json) print_table_header(f, model);
  std::vector<LevelReport> reports;
  bool bad = false;
  for (int n : f.levels) {
    LevelReport r = run_level(f.target, c, n);
    reports.push_back(r);
    bad = bad || r.errors > 0 || r.lost > 0 || r.duplicated > 0 || r.mismatched > 0;
    print_level(r, f.as_json);
  }
  if (!f.as_json) print_scaling(reports);
  return bad ? 1 : 0;
}

}  // namespace

LL3_COMMAND("bench-serve", "load a running ll3 serve with concurrent streaming clients", cmd_bench_serve);

}  // namespace ll3::cli
