// What the server tests drive a real `ll3 serve` with: the process (started on a free loopback
// port, which it reports on stderr; stopped with a signal) and a small blocking HTTP/1.1 client
// on Boost.Beast that keeps its connection (keep-alive), streams Server-Sent Events, and can
// hang up in the middle of a response.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ll3 {
class Engine;
}

namespace ll3::test {

using json = nlohmann::json;

class ServeProcess {
 public:
  // Starts `ll3 serve --port 0 <args>`; waits for the port, and (wait_ready) for /health 200,
  // each with a deadline, and no longer than the process lives. ok() tells whether it came up;
  // log() is its stderr. When it does not come up, exits before the end without signal() or
  // wait(), or runs while the test fails, its log goes to stderr.
  ServeProcess(const std::vector<std::string>& args, bool wait_ready = true);
  ~ServeProcess();  // SIGKILL if still running
  bool ok() const { return port_ > 0; }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const;
  void signal(int sig);
  // Waits for the exit; the exit status (128 + signal when killed), -1 on timeout.
  int wait(double timeout_s);
  pid_t pid() const { return pid_; }

 private:
  bool exited();
  void report(const std::string& what);
  pid_t pid_ = -1;
  int port_ = 0;
  int status_ = -1;       // the exit status, once reaped
  bool stopped_ = false;  // signal() or wait() called: an exit is expected
  bool reported_ = false;
  std::string log_path_;
};

struct Reply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::vector<std::string> events;  // SSE data payloads, in order
  bool error = false;               // the connection failed
  std::string error_message;
  json body_json() const;
};

class HttpClient {
 public:
  explicit HttpClient(int port);
  HttpClient(HttpClient&&) = default;
  ~HttpClient();
  // One request on this client's connection (opened on first use, reopened only if reconnect
  // is true). `auth`: the bearer key to send ("" for none).
  Reply request(const std::string& method, const std::string& target, const std::string& body = "",
                const std::map<std::string, std::string>& headers = {});
  // A streaming request: on_event gets each SSE data payload; returning false hangs up (closes
  // the socket without reading further).
  Reply stream(const std::string& target, const std::string& body, const std::function<bool(const std::string&)>& on_event = {});
  void set_key(std::string key) { key_ = std::move(key); }
  bool connected() const;
  void close();
  bool reconnect = false;

 private:
  bool connect_if_needed(Reply* r);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_;
  std::string key_;
};

// The server most tests share, started once: the shared small model (Llama 3 tokenizer) with the
// Llama 3.1 chat template (tools), an API key, a 4096-token KV cache, a 256 KiB body limit,
// CORS for http://example.test, JSON access logs, a session directory. Null (and the test
// skipped or failed by LL3_REQUIRE_SHARED) without the shared data.
ServeProcess* main_server();
inline constexpr const char* kKey = "test-key";
std::string small_model_path();
std::string llama31_template_path();
// An engine in the test process on the shared small model (one thread, a 4096-token pool), for
// the answers the server must give. Made once.
Engine& reference_engine();
// A client of the main server with the key set.
HttpClient main_client();
// POST a JSON body; the reply (its body parsed by Reply::body_json).
Reply post(HttpClient& c, const std::string& path, const json& body);

// A sample value from a Prometheus exposition ("ll3_requests_running", or a full sample name
// with labels); NaN when absent.
double metric(const std::string& exposition, const std::string& sample);

}  // namespace ll3::test
