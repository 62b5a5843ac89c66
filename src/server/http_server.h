// An event-driven HTTP/1.1 server on Boost.Beast/Asio: asynchronous accept, read and write on a
// few threads, so an idle, slow or streaming connection costs a socket and some memory, never a
// thread. Keep-alive (also after a chunked stream), a body size limit (413), header, body and
// idle timeouts, Expect: 100-continue, and detection of clients that go away while their request
// is still being worked on. Beast stays inside http_server.cpp; the routes see plain structs.
//
// A handler receives an HttpExchange and answers it at once or later, from any thread: with one
// whole response, or with a chunked stream of writes (Server-Sent Events). Everything an
// exchange does runs on its connection's strand.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ll3/status.h"

namespace ll3::server {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: "/v1/models?x=1"
  std::string path;    // without the query: "/v1/models"
  Headers headers;     // names lower-cased
  std::string body;
  std::string remote;  // "127.0.0.1:51234"
  uint64_t connection = 0;  // the connection's serial number
  double start_seconds = 0; // steady clock, when the request's headers had arrived
  std::string header(std::string_view lower_name) const;  // "" when absent
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  Headers headers;
};

// One request and its response. Every method may be called from any thread; they post to the
// connection's strand and return.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  virtual const HttpRequest& request() const = 0;
  // A whole response.
  virtual void respond(HttpResponse r) = 0;
  // A chunked response: the status and headers now, then any number of writes (each flushed as
  // soon as the socket takes it; writes that pile up behind a slow reader are sent together),
  // then end(). `headers` beside Content-Type.
  virtual void start_stream(int status, std::string content_type, Headers headers) = 0;
  virtual void write(std::string data) = 0;
  virtual void end() = 0;
  // `fn` runs (on the strand, at most once) if the client goes away, or stops reading for the
  // write timeout, before the response has ended.
  virtual void on_close(std::function<void()> fn) = 0;
  // Runs `fn` on the connection's strand.
  virtual void post(std::function<void()> fn) = 0;
  // A field for the access log line of this request ("prompt_tokens": 12, ...).
  virtual void log_field(const std::string& key, nlohmann::ordered_json value) = 0;
};

// One access log record: written once per request, when its response ended or its client left.
struct AccessRecord {
  std::string method, path, remote;
  int status = 0;
  uint64_t bytes_sent = 0;
  double seconds = 0;
  bool client_closed = false;  // the client left before the response ended
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
  int threads = 1;
  size_t body_limit = 8u << 20;
  size_t header_limit = 64u << 10;
  double idle_timeout_s = 60;    // a kept-alive connection with no new request; a header read
  double read_timeout_s = 60;    // a request's body
  double write_timeout_s = 60;   // a write the client does not take (a reader that stopped)
  size_t max_buffered_bytes = 16u << 20;  // output piled up behind a slow reader: it is cut off
  size_t max_connections = 4096;          // beyond: accepted and closed at once
};

class HttpServer {
 public:
  using Handler = std::function<void(std::shared_ptr<HttpExchange>)>;
  using LogHook = std::function<void(const AccessRecord&)>;
  // The body of an error the HTTP layer answers itself (400 malformed, 413, 431, 500).
  using ErrorBody = std::function<HttpResponse(int status, const std::string& message)>;

  // Binds and listens, then serves on `threads` threads. Fails (with the reason) when the
  // address cannot be bound.
  static Result<std::unique_ptr<HttpServer>> start(const HttpServerOptions& options, Handler handler, LogHook log,
                                                   ErrorBody error_body);
  ~HttpServer();  // stop()

  int port() const;
  const std::string& host() const;
  int64_t connections_open() const;
  int64_t connections_total() const;

  // Runs `fn` on one of the server's threads (not on any connection's strand).
  void post(std::function<void()> fn);
  // Calls `fn` (on a server thread) on SIGINT or SIGTERM.
  void on_signal(std::function<void(int)> fn);
  // Closes the listener and connections waiting for a request; the others close after their
  // response (which says Connection: close).
  void stop_accepting();
  // Closes every connection and joins the threads. Pending exchanges' responses are dropped.
  void stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ll3::server
