#include "server_harness.h"

#include "ll3/engine.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

// clang-format off: <utility> first, Boost 1.74's asio/awaitable.hpp uses std::exchange without it (GCC 12)
#include <utility>
#include <boost/asio.hpp>
// clang-format on
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "test_support.h"

namespace ll3::test {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

ServeProcess::ServeProcess(const std::vector<std::string>& args, bool wait_ready) {
  log_path_ = temp_dir() + "/serve.log";
  std::vector<std::string> argv = {ll3_binary(), "serve", "--port", "0", "--host", "127.0.0.1"};
  argv.insert(argv.end(), args.begin(), args.end());
  write_file(log_path_, "");  // before the fork: the log exists whenever it is read
  pid_ = fork();
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives a test binary that was killed
    const int out = open("/dev/null", O_WRONLY);
    const int err = open(log_path_.c_str(), O_WRONLY | O_APPEND);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  const double deadline = now_s() + 60;
  const std::string marker = "listening on http://127.0.0.1:";
  while (port_ == 0 && !exited()) {
    const std::string l = log();
    const size_t at = l.find(marker);
    if (at != std::string::npos && l.find('\n', at) != std::string::npos) {
      port_ = std::atoi(l.c_str() + at + marker.size());
      break;
    }
    if (now_s() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (port_ == 0) {
    report(exited() ? "exited before it said its port" : "did not say its port within 60 s");
    return;
  }
  if (!wait_ready) return;
  const double ready_deadline = now_s() + 120;
  while (!exited()) {
    HttpClient c(port_);
    if (c.request("GET", "/health").status == 200) return;
    if (now_s() > ready_deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  port_ = 0;
  report("did not answer /health with 200 within 120 s");
}

// Reaps the process if it has exited (keeping its status); true once it has.
bool ServeProcess::exited() {
  if (pid_ <= 0) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
  pid_ = -1;
  status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

// Says on stderr why the server is not (or no longer) usable, with the end of its log, so that
// the failing test shows it whatever it asserts.
void ServeProcess::report(const std::string& what) {
  if (reported_) return;
  reported_ = true;
  std::string l = log();
  if (l.size() > 6000) l = "...\n" + l.substr(l.size() - 6000);
  std::string state = status_ >= 0 ? "exited with status " + std::to_string(status_) : "pid " + std::to_string(pid_);
  std::fprintf(stderr, "ll3 serve (%s) %s; its log (%s):\n%s\n", state.c_str(), what.c_str(), log_path_.c_str(), l.c_str());
}

ServeProcess::~ServeProcess() {
  if (!stopped_ && exited()) {
    report("exited before the test ended");
  } else if (::testing::Test::HasFailure()) {
    report("ran while the test failed");
  }
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

std::string ServeProcess::log() const {
  try {
    return read_file(log_path_);
  } catch (...) {
    return "";
  }
}

void ServeProcess::signal(int sig) {
  stopped_ = true;
  if (pid_ > 0) kill(pid_, sig);
}

int ServeProcess::wait(double timeout_s) {
  stopped_ = true;
  const double deadline = now_s() + timeout_s;
  while (!exited()) {
    if (now_s() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status_;
}

json Reply::body_json() const { return json::parse(body, nullptr, false); }

struct HttpClient::Impl {
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buf;
  bool open = false;
};

HttpClient::HttpClient(int port) : impl_(std::make_unique<Impl>()), port_(port) {}
HttpClient::~HttpClient() { close(); }

bool HttpClient::connected() const { return impl_ && impl_->open; }

void HttpClient::close() {
  if (!impl_ || !impl_->open) return;
  beast::error_code ec;
  impl_->stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  impl_->stream.close();
  impl_->open = false;
  impl_->buf.clear();
}

namespace {

// Splits SSE input into events and hands each `data:` payload on.
struct SseSplitter {
  std::string pending;
  std::vector<std::string>* events;
  std::function<bool(const std::string&)> on_event;
  bool feed(std::string_view data) {
    pending.append(data.data(), data.size());
    size_t end;
    while ((end = pending.find("\n\n")) != std::string::npos) {
      std::string ev = pending.substr(0, end);
      pending.erase(0, end + 2);
      std::istringstream lines(ev);
      std::string line, payload;
      while (std::getline(lines, line)) {
        if (line.rfind("data: ", 0) == 0) payload += line.substr(6);
      }
      events->push_back(payload);
      if (on_event && !on_event(payload)) return false;
    }
    return true;
  }
};

}  // namespace

// Opens the connection unless one is open and kept (reconnect off); false with r->error set
// when it cannot connect.
bool HttpClient::connect_if_needed(Reply* r) {
  Impl& s = *impl_;
  if (s.open && !reconnect) return true;
  close();
  beast::error_code ec;
  s.stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)), ec);
  if (ec) {
    r->error = true;
    r->error_message = ec.message();
    return false;
  }
  timeval tv{120, 0};
  setsockopt(s.stream.socket().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  s.open = true;
  return true;
}

Reply HttpClient::stream(const std::string& target, const std::string& body, const std::function<bool(const std::string&)>& on_event) {
  Reply r;
  Impl& s = *impl_;
  beast::error_code ec;
  if (!connect_if_needed(&r)) return r;
  http::request<http::string_body> req{http::verb::post, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  if (!key_.empty()) req.set(http::field::authorization, "Bearer " + key_);
  req.body() = body;
  req.prepare_payload();
  http::write(s.stream, req, ec);
  if (ec) {
    r.error = true;
    r.error_message = "write: " + ec.message();
    close();
    return r;
  }
  http::response_parser<http::string_body> p;
  p.body_limit(1u << 30);
  SseSplitter sse{"", &r.events, on_event};
  bool hung_up = false;
  auto on_chunk = [&](std::uint64_t, beast::string_view data, beast::error_code& cec) -> std::size_t {
    if (!sse.feed(std::string_view(data.data(), data.size()))) {
      hung_up = true;
      cec = net::error::operation_aborted;
    }
    r.body.append(data.data(), data.size());
    return data.size();
  };
  p.on_chunk_body(on_chunk);  // the parser keeps a reference
  http::read(s.stream, s.buf, p, ec);
  if (hung_up) {
    close();
    return r;
  }
  if (ec) {
    r.error = true;
    r.error_message = "read: " + ec.message();
    close();
    return r;
  }
  auto& res = p.get();
  r.status = res.result_int();
  for (const auto& f : res) {
    std::string k(f.name_string());
    for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[k] = std::string(f.value());
  }
  if (!res.chunked()) {
    r.body = res.body();
    sse.feed(r.body);
  }
  if (!res.keep_alive()) close();
  return r;
}

Reply HttpClient::request(const std::string& method, const std::string& target, const std::string& body,
                          const std::map<std::string, std::string>& headers) {
  Reply r;
  Impl& s = *impl_;
  beast::error_code ec;
  if (!connect_if_needed(&r)) return r;
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  if (req.method() == http::verb::unknown) req.method_string(method);
  req.set(http::field::host, "127.0.0.1");
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  if (!key_.empty()) req.set(http::field::authorization, "Bearer " + key_);
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  http::write(s.stream, req, ec);
  if (ec) {
    r.error = true;
    r.error_message = "write: " + ec.message();
    close();
    return r;
  }
  http::response_parser<http::string_body> p;
  p.body_limit(1u << 30);
  http::read(s.stream, s.buf, p, ec);
  if (ec) {
    r.error = true;
    r.error_message = "read: " + ec.message();
    close();
    return r;
  }
  auto& res = p.get();
  r.status = res.result_int();
  for (const auto& f : res) {
    std::string k(f.name_string());
    for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[k] = std::string(f.value());
  }
  r.body = res.body();
  if (!res.keep_alive()) close();
  return r;
}

std::string small_model_path() { return shared_dir() + "/models/small-llama31-q4_k_m.gguf"; }
std::string llama31_template_path() { return source_dir() + "/tests/fixtures/tokenizer/chat_templates/llama31.jinja"; }

ServeProcess* main_server() {
  static std::unique_ptr<ServeProcess> p = [] {
    if (shared_dir().empty()) return std::unique_ptr<ServeProcess>();
    const std::string sessions = temp_dir();
    return std::make_unique<ServeProcess>(std::vector<std::string>{
        "-m", small_model_path(), "-t", "2", "--ctx", "4096", "--max-seqs", "16", "--api-key", kKey, "--max-body", "262144",
        "--cors-origin", "http://example.test", "--chat-template", llama31_template_path(), "--log-format", "json",
        "--session-dir", sessions});
  }();
  return p && p->ok() ? p.get() : nullptr;
}

Engine& reference_engine() {
  static std::unique_ptr<Engine> e = [] {
    EngineOptions o;
    o.threads = 1;
    o.ctx = 4096;
    Result<std::unique_ptr<Engine>> r = Engine::create(small_model_path(), o);
    if (!r.ok()) std::fprintf(stderr, "reference engine: %s\n", r.message().c_str());
    return r.ok() ? std::move(r.value()) : nullptr;
  }();
  return *e;
}

HttpClient main_client() {
  HttpClient c(main_server() ? main_server()->port() : 1);
  c.set_key(kKey);
  return c;
}

Reply post(HttpClient& c, const std::string& path, const json& body) { return c.request("POST", path, body.dump()); }

double metric(const std::string& exposition, const std::string& sample) {
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > sample.size() && line.compare(0, sample.size(), sample) == 0 && line[sample.size()] == ' ') {
      return std::strtod(line.c_str() + sample.size() + 1, nullptr);
    }
  }
  return NAN;
}

}  // namespace ll3::test
