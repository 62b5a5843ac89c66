// The server as an HTTP peer, against real clients: every error status with OpenAI's error shape,
// the API key, CORS, keep-alive across streamed and plain responses, hostile and malformed
// input, clients that hang up mid-stream or while queued (their KV freed), a full queue (429),
// /health while loading, the access log, /metrics, and SIGTERM (running requests finish, exit 0).
#include <signal.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <atomic>
// clang-format off: <utility> first, Boost 1.74's asio/awaitable.hpp uses std::exchange without it (GCC 12)
#include <utility>
#include <boost/asio.hpp>
// clang-format on
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <sstream>
#include <thread>

#include "server/http_server.h"
#include "server_harness.h"
#include "test_support.h"

namespace ll3::test {
namespace {

#define REQUIRE_SERVER()     \
  LL3_REQUIRE_SHARED();      \
  ASSERT_NE(main_server(), nullptr) << "ll3 serve did not start"

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

json chat_body(int max_tokens = 4) {
  return {{"messages", {{{"role", "user"}, {"content", "Hi there"}}}}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

void expect_error(const Reply& r, int status, const std::string& param = "", const std::string& code = "") {
  EXPECT_EQ(r.status, status) << r.body;
  json j = r.body_json();
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  const json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r.body;
  EXPECT_TRUE(e["type"].is_string()) << r.body;
  EXPECT_TRUE(e.contains("param") && e.contains("code")) << r.body;
  if (!param.empty()) {
    EXPECT_EQ(e["param"], param) << r.body;
  }
  if (!code.empty()) {
    EXPECT_EQ(e["code"], code) << r.body;
  }
}

// Polls /metrics until `pred` holds (or the timeout).
bool wait_metrics(HttpClient& c, double timeout_s, const std::function<bool(const std::string&)>& pred, std::string* last = nullptr) {
  const double deadline = now_s() + timeout_s;
  std::string body;
  while (now_s() < deadline) {
    body = c.request("GET", "/metrics").body;
    if (pred(body)) {
      if (last) *last = body;
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (last) *last = body;
  return false;
}

TEST(ServerHttp, ErrorsAreOpenAiShaped) {
  REQUIRE_SERVER();
  HttpClient c = main_client();
  expect_error(c.request("POST", "/v1/chat/completions", "{\"messages\": [}"), 400);
  expect_error(c.request("POST", "/v1/chat/completions", "[]"), 400);
  json b = chat_body();
  b["temperature"] = "warm";
  expect_error(post(c, "/v1/chat/completions", b), 400, "temperature");
  b = chat_body();
  b["top_p"] = 7;
  expect_error(post(c, "/v1/chat/completions", b), 400, "top_p");
  b = chat_body();
  b["messages"][0]["role"] = "narrator";
  expect_error(post(c, "/v1/chat/completions", b), 400, "messages[0].role");
  b["messages"] = json::array();
  expect_error(post(c, "/v1/chat/completions", b), 400, "messages");
  b = chat_body();
  b["n"] = 0;
  expect_error(post(c, "/v1/chat/completions", b), 400, "n");
  expect_error(post(c, "/v1/completions", {{"prompt", {1, -4}}}), 400, "prompt[1]");
  // Prompt plus max_tokens beyond the 4096 tokens a sequence can hold, and a prompt alone.
  expect_error(post(c, "/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 5000}}), 400, "max_tokens", "context_length_exceeded");
  std::vector<int32_t> huge(4200, 1000);
  expect_error(post(c, "/v1/completions", {{"prompt", huge}, {"max_tokens", 1}}), 400, "prompt", "context_length_exceeded");
  // Streaming requests that fail get the status too, not a stream.
  b = chat_body();
  b["stream"] = true;
  b["max_tokens"] = 9000;
  Reply s = c.stream("/v1/chat/completions", b.dump());
  expect_error(s, 400, "max_tokens", "context_length_exceeded");
  // Routes and methods.
  expect_error(c.request("GET", "/v2/nothing"), 404, "", "not_found");
  Reply m = c.request("GET", "/v1/chat/completions");
  expect_error(m, 405, "", "method_not_allowed");
  EXPECT_EQ(m.headers["allow"], "POST");
  expect_error(c.request("DELETE", "/v1/models"), 405);
  expect_error(c.request("POST", "/health"), 405);
  EXPECT_TRUE(c.connected()) << "errors keep the connection";
}

TEST(ServerHttp, ApiKey) {
  REQUIRE_SERVER();
  HttpClient none(main_server()->port());
  expect_error(none.request("GET", "/v1/models"), 401, "", "invalid_api_key");
  expect_error(post(none, "/v1/chat/completions", chat_body()), 401);
  for (const char* bad : {"Bearer wrong", "Bearer test-ke", "Bearer test-keyy", "Bearer ", "test-key", "Basic dGVzdC1rZXk="}) {
    Reply r = none.request("GET", "/metrics", "", {{"Authorization", bad}});
    expect_error(r, 401);
    EXPECT_EQ(r.headers["www-authenticate"], "Bearer");
  }
  // /health answers without a key (load balancers probe it).
  EXPECT_EQ(none.request("GET", "/health").status, 200);
  EXPECT_EQ(none.request("GET", "/v1/models", "", {{"Authorization", "Bearer test-key"}}).status, 200);
}

TEST(ServerHttp, BodyLimit413) {
  REQUIRE_SERVER();
  HttpClient c = main_client();
  json b = chat_body();
  b["messages"][0]["content"] = std::string(300000, 'a');  // over the 256 KiB limit
  Reply r = post(c, "/v1/chat/completions", b);
  expect_error(r, 413, "", "request_too_large");
  // curl sends Expect: 100-continue for a body this size: answered before the body is sent.
  const std::string file = temp_dir() + "/big.json";
  write_file(file, b.dump());
  CommandResult cr = run_command("curl -sS -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer test-key' -H 'Content-Type: application/json' "
                                 "--data-binary @" + file + " " + main_server()->url() + "/v1/chat/completions");
  EXPECT_EQ(cr.output, "413");
  // Under the limit: fine (and Expect: 100-continue is honoured).
  b = chat_body(1);
  b["user"] = std::string(100000, 'a');  // a field the server ignores; the prompt stays short
  write_file(file, b.dump());
  cr = run_command("curl -sS -o /dev/null -w '%{http_code}' -H 'Expect: 100-continue' -H 'Authorization: Bearer test-key' "
                   "-H 'Content-Type: application/json' --data-binary @" + file + " " + main_server()->url() + "/v1/chat/completions");
  EXPECT_EQ(cr.output, "200");
  HttpClient again = main_client();
  EXPECT_EQ(again.request("GET", "/v1/models").status, 200);
}

TEST(ServerHttp, CorsPreflightAndHeaders) {
  REQUIRE_SERVER();
  HttpClient c(main_server()->port());
  Reply p = c.request("OPTIONS", "/v1/chat/completions", "",
                      {{"Origin", "http://example.test"}, {"Access-Control-Request-Method", "POST"},
                       {"Access-Control-Request-Headers", "authorization, content-type"}});
  EXPECT_EQ(p.status, 204);
  EXPECT_EQ(p.headers["access-control-allow-origin"], "http://example.test");
  EXPECT_NE(p.headers["access-control-allow-methods"].find("POST"), std::string::npos);
  EXPECT_EQ(p.headers["access-control-allow-headers"], "authorization, content-type");
  c.set_key(kKey);
  Reply r = c.request("GET", "/v1/models", "", {{"Origin", "http://example.test"}});
  EXPECT_EQ(r.headers["access-control-allow-origin"], "http://example.test");
  r = c.request("GET", "/v1/models", "", {{"Origin", "http://evil.test"}});
  EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u);
}

// One connection: a stream, then a plain response, then another stream and a plain one. A
// server that loses the connection's framing after a stream fails the second request.
TEST(ServerHttp, KeepAliveAcrossStreamedAndPlainResponses) {
  REQUIRE_SERVER();
  HttpClient probe = main_client();
  const double before = metric(probe.request("GET", "/metrics").body, "ll3_http_connections_total");
  HttpClient c = main_client();
  json b = chat_body(3);
  for (int i = 0; i < 2; ++i) {
    b["stream"] = true;
    Reply s = c.stream("/v1/chat/completions", b.dump());
    ASSERT_EQ(s.status, 200) << s.error_message;
    ASSERT_FALSE(s.events.empty());
    EXPECT_EQ(s.events.back(), "[DONE]");
    EXPECT_TRUE(c.connected());
    b["stream"] = false;
    Reply r = post(c, "/v1/chat/completions", b);
    ASSERT_EQ(r.status, 200) << r.error_message;
    EXPECT_TRUE(c.connected());
  }
  const double after = metric(probe.request("GET", "/metrics").body, "ll3_http_connections_total");
  EXPECT_EQ(after - before, 1) << "the four requests shared one connection";
}

// Hostile input: garbage, half requests, a slow trickle, oversized headers, random damage to
// valid bodies. Nothing is answered with a 5xx, and the server keeps serving.
TEST(ServerHttp, HostileClientsGetCleanAnswers) {
  REQUIRE_SERVER();
  namespace net = boost::asio;
  net::io_context ioc;
  auto raw = [&](const std::string& bytes, bool half_close) {
    net::ip::tcp::socket s(ioc);
    s.connect({net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(main_server()->port())});
    timeval tv{10, 0};
    setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    boost::system::error_code ec;
    net::write(s, net::buffer(bytes), ec);
    if (half_close) s.shutdown(net::ip::tcp::socket::shutdown_send, ec);
    std::string out;
    char buf[4096];
    for (;;) {
      const size_t n = s.read_some(net::buffer(buf), ec);
      out.append(buf, n);
      if (ec) break;
    }
    return out;
  };
  EXPECT_EQ(raw("GARBAGE\r\n\r\n", false).rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(raw("POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", true), "") << "a cut-off body: closed, no answer";
  EXPECT_EQ(raw("GET / HTTP/1.1\r\nX: " + std::string(100000, 'x') + "\r\n\r\n", false).rfind("HTTP/1.1 431", 0), 0u);
  EXPECT_EQ(raw("POST /v1/completions HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", false).rfind("HTTP/1.1 413", 0), 0u);
  {
    // A client that sends all of an oversized body before it reads (as Python's http.client
    // does) can send it all, then reads its 413: the server drains what follows its answer
    // instead of resetting the connection under the client's write.
    net::ip::tcp::socket s(ioc);
    s.connect({net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(main_server()->port())});
    boost::system::error_code ec;
    net::write(s, net::buffer("POST /v1/completions HTTP/1.1\r\nContent-Length: 16777216\r\n\r\n" + std::string(16777216, 'x')), ec);
    EXPECT_FALSE(ec) << ec.message();
    char buf[64] = {};
    s.read_some(net::buffer(buf, sizeof buf - 1), ec);
    EXPECT_EQ(std::string(buf).rfind("HTTP/1.1 413", 0), 0u) << buf;
  }
  EXPECT_EQ(raw("POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false).rfind("HTTP/1.1 400", 0), 0u);
  const std::string pipelined = raw("GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false);
  size_t oks = 0;
  for (size_t at = 0; (at = pipelined.find("HTTP/1.1 200", at)) != std::string::npos; ++at) ++oks;
  EXPECT_EQ(oks, 2u) << "pipelined requests are answered in order";
  EXPECT_NE(raw("GET /health HTTP/1.0\r\n\r\n", false).find("HTTP/1.0 200"), std::string::npos);

  std::mt19937 rng(5);
  HttpClient c = main_client();
  c.reconnect = true;
  const std::string valid = chat_body(2).dump();
  const std::string completion = json({{"prompt", "hi"}, {"max_tokens", 2}}).dump();
  for (int i = 0; i < 150; ++i) {
    std::string body = i % 2 ? valid : completion;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      const size_t at = rng() % body.size();
      switch (rng() % 3) {
        case 0: body[at] = static_cast<char>(rng()); break;
        case 1: body.erase(at, 1 + rng() % 8); break;
        default: body.insert(at, std::string(1 + rng() % 4, "{}[]\",:0e-\\"[rng() % 11])); break;
      }
      if (body.empty()) body = "{";
    }
    Reply r = c.request("POST", i % 2 ? "/v1/chat/completions" : "/v1/completions", body);
    ASSERT_FALSE(r.error) << r.error_message << " on " << body;
    ASSERT_TRUE(r.status == 200 || r.status == 400) << r.status << " " << r.body << " on " << body;
  }
  HttpClient after = main_client();
  EXPECT_EQ(after.request("GET", "/health").status, 200);
}

// A client that hangs up mid-stream: its request is cancelled and its KV freed within a step.
TEST(ServerHttp, DisconnectMidStreamFreesKv) {
  REQUIRE_SERVER();
  HttpClient probe = main_client();
  std::string m;
  ASSERT_TRUE(wait_metrics(probe, 10, [](const std::string& b) { return metric(b, "ll3_requests_running") == 0; }, &m));
  const double used_before = metric(m, "ll3_kv_cache_blocks_used");
  const double generated_before = metric(m, "ll3_generation_tokens_total");
  HttpClient c = main_client();
  json b = {{"prompt", "Tell me everything"}, {"max_tokens", 3000}, {"ignore_eos", true}, {"stream", true}};
  int seen = 0;
  Reply s = c.stream("/v1/completions", b.dump(), [&](const std::string&) { return ++seen < 5; });
  EXPECT_EQ(seen, 5);
  EXPECT_FALSE(c.connected());
  const double t0 = now_s();
  // The connection's handler leaves the in-flight count a moment after the engine has dropped
  // the request (one run of 825 saw the metrics in between), so all three are waited for.
  ASSERT_TRUE(wait_metrics(probe, 5, [&](const std::string& body) {
    return metric(body, "ll3_requests_running") == 0 && metric(body, "ll3_kv_cache_blocks_used") == used_before &&
           metric(body, "ll3_http_requests_in_flight") == 0;
  }, &m)) << m;
  EXPECT_LT(now_s() - t0, 2.0);
  EXPECT_LT(metric(m, "ll3_generation_tokens_total") - generated_before, 1000) << "stopped long before max_tokens";
}

// Connections closed by their clients are gone from the server too (nothing holds them): after
// plain, streamed and abandoned requests, only the probe's connection is open.
TEST(ServerHttp, ClosedConnectionsAreReleased) {
  REQUIRE_SERVER();
  for (int i = 0; i < 3; ++i) {
    HttpClient c = main_client();
    ASSERT_EQ(post(c, "/v1/chat/completions", chat_body(2)).status, 200);
    json b = chat_body(2);
    b["stream"] = true;
    ASSERT_EQ(c.stream("/v1/chat/completions", b.dump()).status, 200);
    HttpClient gone = main_client();
    b["max_tokens"] = 500;
    gone.stream("/v1/chat/completions", b.dump(), [](const std::string&) { return false; });
  }
  HttpClient probe = main_client();
  std::string m;
  EXPECT_TRUE(wait_metrics(probe, 5, [](const std::string& body) { return metric(body, "ll3_http_connections_open") == 1; }, &m))
      << metric(m, "ll3_http_connections_open") << " open";
}

// A server with one sequence and a queue of one: a running request, a queued one, and the next
// is refused with 429 and Retry-After. The queued one's client leaves: it is dropped from the
// queue at once.
TEST(ServerHttp, QueueFull429AndDisconnectWhileQueued) {
  LL3_REQUIRE_SHARED();
  ServeProcess srv({"-m", small_model_path(), "-t", "1", "--ctx", "4096", "--max-seqs", "1", "--max-queue", "1", "--no-access-log"});
  ASSERT_TRUE(srv.ok()) << srv.log();
  HttpClient probe(srv.port());
  const json long_run = {{"prompt", "Go on"}, {"max_tokens", 3000}, {"ignore_eos", true}, {"stream", true}};
  std::atomic<bool> hang_up_a{false};
  std::thread a([&] {
    HttpClient c(srv.port());
    c.stream("/v1/completions", long_run.dump(), [&](const std::string&) { return !hang_up_a.load(); });
  });
  ASSERT_TRUE(wait_metrics(probe, 10, [](const std::string& b) { return metric(b, "ll3_requests_running") == 1; }));
  // B: queued behind A, then its client leaves.
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket b_sock(ioc);
  b_sock.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(srv.port())});
  const std::string body = json({{"prompt", "queued"}, {"max_tokens", 5}}).dump();
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  boost::asio::write(b_sock, boost::asio::buffer(req));
  ASSERT_TRUE(wait_metrics(probe, 10, [](const std::string& b) { return metric(b, "ll3_requests_waiting") == 1; }));
  // C: the queue is full.
  HttpClient c(srv.port());
  Reply r = post(c, "/v1/completions", {{"prompt", "one more"}, {"max_tokens", 5}});
  expect_error(r, 429, "", "queue_full");
  EXPECT_EQ(r.headers["retry-after"], "1");
  b_sock.close();
  std::string m;
  EXPECT_TRUE(wait_metrics(probe, 3, [](const std::string& b) { return metric(b, "ll3_requests_waiting") == 0; }, &m)) << m;
  EXPECT_EQ(metric(m, "ll3_requests_running"), 1) << "A still runs";
  hang_up_a = true;
  a.join();
  EXPECT_TRUE(wait_metrics(probe, 5, [](const std::string& b) {
    return metric(b, "ll3_requests_running") == 0 && metric(b, "ll3_kv_cache_blocks_used") == 0;
  }, &m)) << m;
  EXPECT_EQ(metric(m, "ll3_requests_total{status=\"429\"}"), 1);
  EXPECT_EQ(metric(m, "ll3_requests_rejected_total"), 1);
}

TEST(ServerHttp, HealthIs503WhileTheModelLoads) {
  LL3_REQUIRE_SHARED();
  // A FIFO as the model: loading blocks until something opens its other end.
  const std::string fifo = temp_dir() + "/model.gguf";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ServeProcess srv({"-m", fifo}, /*wait_ready=*/false);
  ASSERT_GT(srv.port(), 0) << srv.log();
  HttpClient c(srv.port());
  Reply h = c.request("GET", "/health");
  EXPECT_EQ(h.status, 503);
  EXPECT_EQ(h.body_json()["status"], "loading");
  EXPECT_EQ(h.headers["retry-after"], "5");
  expect_error(post(c, "/v1/chat/completions", chat_body()), 503, "", "model_loading");
  Reply m = c.request("GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(metric(m.body, "ll3_model_loaded"), 0);
  // Unblock the loader (it fails on the empty FIFO, which ends the process).
  FILE* f = std::fopen(fifo.c_str(), "w");
  if (f) std::fclose(f);
  EXPECT_EQ(srv.wait(30), 1);
}

// A SIGTERM caught after start() but before on_signal() gave the handler (ll3 serve's first
// instants) reaches the handler when it comes, instead of being dropped.
TEST(ServerHttp, ASignalBeforeTheHandlerIsSetIsDeliveredToIt) {
  server::HttpServerOptions o;
  o.port = 0;
  auto srv = server::HttpServer::start(
      o, [](std::shared_ptr<server::HttpExchange> ex) { ex->respond({}); }, [](const server::AccessRecord&) {},
      [](int status, const std::string&) { return server::HttpResponse{status}; });
  ASSERT_TRUE(srv.ok()) << srv.message();
  ASSERT_EQ(raise(SIGTERM), 0);  // the server's signal set catches it; its thread takes it soon
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::atomic<int> got{0};
  (*srv)->on_signal([&](int sig) { got = sig; });
  for (int i = 0; i < 500 && got == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(got.load(), SIGTERM);
}

// A supervisor that stops a server while it loads gets its exit at once, not after the load.
TEST(ServerHttp, SigtermWhileTheModelLoadsExitsAtOnce) {
  LL3_REQUIRE_SHARED();
  const std::string fifo = temp_dir() + "/model.gguf";  // the load blocks until a writer opens it
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ServeProcess srv({"-m", fifo}, /*wait_ready=*/false);
  ASSERT_GT(srv.port(), 0) << srv.log();
  srv.signal(SIGTERM);
  EXPECT_EQ(srv.wait(10), 0) << srv.log();
  EXPECT_NE(srv.log().find("SIGTERM received while the model loads; exiting"), std::string::npos) << srv.log();
}

TEST(ServerHttp, MetricsAndAccessLog) {
  REQUIRE_SERVER();
  HttpClient c = main_client();
  ASSERT_EQ(post(c, "/v1/chat/completions", chat_body(3)).status, 200);
  Reply r = c.request("GET", "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  const std::string& m = r.body;
  for (const char* name : {"ll3_requests_total", "ll3_prompt_tokens_total", "ll3_generation_tokens_total", "ll3_prefix_cache_hits_total",
                           "ll3_prefix_cache_queries_total", "ll3_preemptions_total", "ll3_time_to_first_token_seconds",
                           "ll3_inter_token_latency_seconds", "ll3_request_duration_seconds", "ll3_batch_tokens",
                           "ll3_requests_running", "ll3_requests_waiting", "ll3_kv_cache_usage_ratio"}) {
    EXPECT_NE(m.find(std::string("# TYPE ") + name + " "), std::string::npos) << name;
  }
  EXPECT_GE(metric(m, "ll3_requests_total{status=\"200\"}"), 1);
  EXPECT_GE(metric(m, "ll3_generation_tokens_total"), 3);
  for (const char* h : {"ll3_time_to_first_token_seconds", "ll3_inter_token_latency_seconds", "ll3_request_duration_seconds", "ll3_batch_tokens"}) {
    const double count = metric(m, std::string(h) + "_count");
    EXPECT_GE(count, 1) << h;
    EXPECT_EQ(metric(m, std::string(h) + "_bucket{le=\"+Inf\"}"), count) << h;
    EXPECT_GT(metric(m, std::string(h) + "_sum"), 0) << h;
  }
  const double ratio = metric(m, "ll3_kv_cache_usage_ratio");
  EXPECT_TRUE(ratio >= 0 && ratio <= 1) << ratio;
  // One JSON access log line per request, with the tokens.
  bool found = false;
  std::istringstream log(main_server()->log());
  std::string line;
  while (std::getline(log, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || j.value("path", "") != "/v1/chat/completions" || j.value("status", 0) != 200) continue;
    EXPECT_EQ(j["method"], "POST");
    EXPECT_TRUE(j["latency_ms"].is_number());
    EXPECT_TRUE(j["prompt_tokens"].is_number());
    EXPECT_TRUE(j["completion_tokens"].is_number());
    EXPECT_TRUE(j["time"].is_string());
    found = true;
  }
  EXPECT_TRUE(found) << main_server()->log();
}

// SIGTERM: no new connections, the running stream finishes whole, sessions are saved, exit 0.
TEST(ServerHttp, SigtermFinishesRunningRequestsAndExitsZero) {
  LL3_REQUIRE_SHARED();
  const std::string sessions = temp_dir();
  ServeProcess srv({"-m", small_model_path(), "-t", "2", "--ctx", "2048", "--session-dir", sessions, "--shutdown-grace", "60"});
  ASSERT_TRUE(srv.ok()) << srv.log();
  HttpClient c(srv.port());
  ASSERT_EQ(post(c, "/v1/completions", {{"prompt", "remember me"}, {"max_tokens", 3}, {"session_id", "kept"}}).status, 200);
  HttpClient s(srv.port());
  bool signalled = false;
  Reply r = s.stream("/v1/completions", json({{"prompt", "long"}, {"max_tokens", 120}, {"ignore_eos", true}, {"stream", true}}).dump(),
                     [&](const std::string&) {
                       if (!signalled) srv.signal(SIGTERM);
                       signalled = true;
                       return true;
                     });
  ASSERT_EQ(r.status, 200);
  ASSERT_GE(r.events.size(), 3u);
  EXPECT_EQ(r.events.back(), "[DONE]");
  json last = json::parse(r.events[r.events.size() - 2]);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length") << "the stream ran to its end";
  EXPECT_EQ(srv.wait(30), 0) << srv.log();
  EXPECT_NE(srv.log().find("SIGTERM received"), std::string::npos);
  bool saved = false;
  for (const auto& e : std::filesystem::directory_iterator(sessions)) saved = saved || e.is_regular_file();
  EXPECT_TRUE(saved) << "the session was saved at shutdown";
  HttpClient late(srv.port());
  EXPECT_TRUE(late.request("GET", "/health").error) << "nothing listens any more";
}

}  // namespace
}  // namespace ll3::test
