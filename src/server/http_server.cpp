#include "server/http_server.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <atomic>
// clang-format off: <utility> first, Boost 1.74's asio/awaitable.hpp uses std::exchange without it (GCC 12)
#include <utility>
#include <boost/asio.hpp>
// clang-format on
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

namespace ll3::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using beast::error_code;

namespace {

double steady_now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::chrono::steady_clock::duration secs(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

class Connection;

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return "";
}

struct HttpServer::Impl {
  HttpServerOptions opt;
  Handler handler;
  LogHook log;
  ErrorBody error_body;
  // Declared before the io_context so they outlive it: handlers it destroys may hold the last
  // reference to a connection, whose destructor unregisters itself here.
  std::mutex mu;
  std::unordered_map<uint64_t, std::weak_ptr<Connection>> conns;
  std::function<void(int)> signal_fn;
  std::vector<int> early_signals;  // caught before on_signal gave a handler: delivered to it then
  std::atomic<uint64_t> next_conn{1};
  std::atomic<int64_t> open{0}, total{0};
  // false once the threads are joined: exchanges outliving the server post nothing.
  std::shared_ptr<std::atomic<bool>> alive = std::make_shared<std::atomic<bool>>(true);
  std::atomic<bool> draining{false};
  int port = 0;
  bool stopped = false;

  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor;
  net::steady_timer accept_retry;
  net::signal_set signals;
  std::vector<std::thread> threads;

  explicit Impl(const HttpServerOptions& o)
      : opt(o), acceptor(net::make_strand(ioc)), accept_retry(acceptor.get_executor()), signals(ioc, SIGINT, SIGTERM) {}
  void do_accept();
  void wait_signal();
  void for_each_connection(void (Connection::*fn)());
};

namespace {

// One TCP connection: reads requests one after another, hands each to the handler as an
// exchange, writes its response, and goes on while both sides keep the connection alive.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer::Impl& srv, tcp::socket socket, uint64_t id) : srv_(srv), stream_(std::move(socket)), id_(id) {
    error_code ec;
    tcp::endpoint ep = stream_.socket().remote_endpoint(ec);
    remote_ = ec ? "?" : ep.address().to_string() + ":" + std::to_string(ep.port());
  }
  ~Connection() {
    std::lock_guard<std::mutex> lk(srv_.mu);
    srv_.conns.erase(id_);
    --srv_.open;
  }

  net::any_io_executor executor() { return stream_.get_executor(); }
  void start() { do_read_header(); }

  // Exchange calls, on the strand; `seq` names the exchange (stale ones are ignored).
  void respond(uint64_t seq, HttpResponse r);
  void start_stream(uint64_t seq, int status, std::string content_type, Headers headers);
  void write(uint64_t seq, std::string data);
  void end(uint64_t seq);
  void set_on_close(uint64_t seq, std::function<void()> fn) {
    if (seq != seq_) return;
    if (closed_ && rec_.client_closed) {
      if (fn) fn();  // the client left before the handler asked to hear of it
      return;
    }
    if (phase_ == Phase::kDone || closed_) return;
    on_close_ = std::move(fn);
  }
  void log_field(uint64_t seq, const std::string& key, nlohmann::ordered_json v) {
    if (seq == seq_ && !logged_) rec_.fields[key] = std::move(v);
  }
  void abandoned(uint64_t seq) {
    if (seq != seq_) return;
    // The handler dropped the exchange without answering (a bug): answer for it.
    if (phase_ == Phase::kHandling && !closed_) respond(seq, srv_.error_body(500, "the request was not answered"));
    // A client that left: its line is written now, with what the handler logged since.
    if (log_on_release_) {
      log_on_release_ = false;
      finish_log(rec_.status);
    }
  }

  void close_if_idle() {
    if (phase_ == Phase::kReading && !reading_body_ && parser_ && !parser_->got_some() && buf_.size() == 0) close();
  }
  void force_close() { close(); }

 private:
  enum class Phase { kReading, kHandling, kStreaming, kDone };

  void do_read_header();
  void on_header(error_code ec);
  void read_body();
  void on_body(error_code ec);
  void dispatch();
  void watch();
  void on_watch(error_code ec);
  void after_response(bool keep_alive);
  void kick();
  void reply_error(int status, const std::string& message);
  void linger_close();
  void drain();
  void finish_log(int status);
  void close();

  HttpServer::Impl& srv_;
  beast::tcp_stream stream_;
  beast::flat_buffer buf_;
  std::optional<http::request_parser<http::string_body>> parser_;
  uint64_t id_;
  std::string remote_;

  Phase phase_ = Phase::kReading;
  bool reading_body_ = false;
  bool closed_ = false;
  bool watching_ = false, resume_read_ = false;
  uint64_t seq_ = 0;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  std::function<void()> on_close_;
  AccessRecord rec_;
  double t_start_ = 0;
  bool logged_ = true;
  bool log_on_release_ = false;  // the client left; log when the handler lets go
  double t_end_ = 0;             // when the client left

  // Response writing.
  std::shared_ptr<http::response<http::string_body>> res_;
  std::unique_ptr<http::response<http::empty_body>> head_;
  std::unique_ptr<http::response_serializer<http::empty_body>> head_sr_;
  bool raw_stream_ = false;  // HTTP/1.0 client: no chunking, the end is the connection's close
  bool writing_ = false, head_sent_ = false, end_requested_ = false;
  std::string pending_, inflight_;
  std::array<char, 16384> discard_{};
  size_t discarded_ = 0;
};

// What the handler holds. Every call posts to the connection's strand.
class Exchange final : public HttpExchange {
 public:
  Exchange(std::shared_ptr<Connection> c, uint64_t seq, HttpRequest req, std::shared_ptr<std::atomic<bool>> alive)
      : conn_(std::move(c)), seq_(seq), req_(std::move(req)), alive_(std::move(alive)) {}
  ~Exchange() override {
    run([](Connection& c, uint64_t seq) { c.abandoned(seq); });
  }
  const HttpRequest& request() const override { return req_; }
  void respond(HttpResponse r) override {
    run([r = std::move(r)](Connection& c, uint64_t seq) mutable { c.respond(seq, std::move(r)); });
  }
  void start_stream(int status, std::string ct, Headers h) override {
    run([status, ct = std::move(ct), h = std::move(h)](Connection& c, uint64_t seq) mutable {
      c.start_stream(seq, status, std::move(ct), std::move(h));
    });
  }
  void write(std::string data) override {
    run([d = std::move(data)](Connection& c, uint64_t seq) mutable { c.write(seq, std::move(d)); });
  }
  void end() override {
    run([](Connection& c, uint64_t seq) { c.end(seq); });
  }
  void on_close(std::function<void()> fn) override {
    run([fn = std::move(fn)](Connection& c, uint64_t seq) mutable { c.set_on_close(seq, std::move(fn)); });
  }
  void post(std::function<void()> fn) override {
    if (alive_->load()) net::post(conn_->executor(), std::move(fn));
  }
  void log_field(const std::string& key, nlohmann::ordered_json value) override {
    run([key, v = std::move(value)](Connection& c, uint64_t seq) mutable { c.log_field(seq, key, std::move(v)); });
  }

 private:
  template <class F>
  void run(F&& f) {
    if (!alive_->load()) return;
    net::post(conn_->executor(), [c = conn_, seq = seq_, f = std::forward<F>(f)]() mutable { f(*c, seq); });
  }
  std::shared_ptr<Connection> conn_;
  uint64_t seq_;
  HttpRequest req_;
  std::shared_ptr<std::atomic<bool>> alive_;
};

void Connection::do_read_header() {
  if (closed_) return;
  if (srv_.draining && buf_.size() == 0) return linger_close();
  phase_ = Phase::kReading;
  reading_body_ = false;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(srv_.opt.header_limit));
  parser_->body_limit(srv_.opt.body_limit);
  stream_.expires_after(secs(srv_.opt.idle_timeout_s));
  http::async_read_header(stream_, buf_, *parser_, [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
}

void Connection::on_header(error_code ec) {
  if (closed_) return;
  if (ec) {
    // A client closing its kept-alive connection, or idle too long: nothing to answer.
    if (ec == http::error::end_of_stream || ec == http::error::partial_message || ec == net::error::eof ||
        ec == beast::error::timeout || ec == net::error::connection_reset || ec == net::error::operation_aborted ||
        !parser_->got_some()) {
      return close();
    }
    if (ec == http::error::body_limit) return reply_error(413, "the request body exceeds the limit of " + std::to_string(srv_.opt.body_limit) + " bytes");
    if (ec == http::error::header_limit) return reply_error(431, "the request headers are larger than " + std::to_string(srv_.opt.header_limit) + " bytes");
    return reply_error(400, "malformed HTTP request: " + ec.message());
  }
  t_start_ = steady_now();
  const auto& req = parser_->get();
  version_ = req.version();
  if (parser_->content_length() && *parser_->content_length() > srv_.opt.body_limit) {
    return reply_error(413, "the request body (" + std::to_string(*parser_->content_length()) + " bytes) exceeds the limit of " +
                                std::to_string(srv_.opt.body_limit) + " bytes");
  }
  if (beast::iequals(req[http::field::expect], "100-continue") && !parser_->is_done()) {
    auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, version_);
    return http::async_write(stream_, *cont, [self = shared_from_this(), cont](error_code ec, size_t) {
      if (ec) return self->close();
      self->read_body();
    });
  }
  read_body();
}

void Connection::read_body() {
  reading_body_ = true;
  stream_.expires_after(secs(srv_.opt.read_timeout_s));
  http::async_read(stream_, buf_, *parser_, [self = shared_from_this()](error_code ec, size_t) { self->on_body(ec); });
}

void Connection::on_body(error_code ec) {
  if (closed_) return;
  if (ec == http::error::body_limit) return reply_error(413, "the request body exceeds the limit of " + std::to_string(srv_.opt.body_limit) + " bytes");
  if (ec == beast::error::timeout) return reply_error(408, "the request body did not arrive in time");
  if (ec) {
    // The client went away in the middle of its request: nobody to answer.
    if (ec == http::error::end_of_stream || ec == http::error::partial_message || ec == net::error::eof ||
        ec == net::error::connection_reset) {
      return close();
    }
    return reply_error(400, "malformed HTTP request body: " + ec.message());
  }
  dispatch();
}

void Connection::dispatch() {
  http::request<http::string_body> req = parser_->release();
  HttpRequest r;
  r.method = std::string(req.method_string());
  r.target = std::string(req.target());
  r.path = r.target.substr(0, r.target.find('?'));
  for (const auto& f : req) {
    r.headers.emplace_back(lower(std::string_view(f.name_string().data(), f.name_string().size())), std::string(f.value()));
  }
  r.body = std::move(req.body());
  r.remote = remote_;
  r.connection = id_;
  r.start_seconds = t_start_;
  keep_alive_ = req.keep_alive();
  ++seq_;
  phase_ = Phase::kHandling;
  reading_body_ = false;
  head_sent_ = writing_ = end_requested_ = false;
  pending_.clear();
  on_close_ = nullptr;
  rec_ = AccessRecord();
  rec_.method = r.method;
  rec_.path = r.path;
  rec_.remote = remote_;
  logged_ = false;
  stream_.expires_never();
  watch();
  auto ex = std::make_shared<Exchange>(shared_from_this(), seq_, std::move(r), srv_.alive);
  srv_.handler(std::move(ex));
}

// While a request is worked on, a readable socket means the client closed it (EOF, a reset)
// or pipelined its next request; a peek tells which, without consuming anything.
void Connection::watch() {
  if (closed_ || watching_ || buf_.size() > 0) return;
  watching_ = true;
  stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) { self->on_watch(ec); });
}

void Connection::on_watch(error_code ec) {
  watching_ = false;
  if (closed_) return;
  if (resume_read_) {
    // The response is out and the next read waited for this handler, cancelled or not (the
    // next request's bytes may have completed the wait just before the cancel).
    resume_read_ = false;
    return do_read_header();
  }
  if (ec == net::error::operation_aborted) return;
  if (phase_ != Phase::kHandling && phase_ != Phase::kStreaming) return;
  if (ec) return close();
  char c;
  const ssize_t n = ::recv(stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return close();
  if (n < 0) watch();
  // n > 0: the next request is waiting; it is read once this response is out.
}

void Connection::respond(uint64_t seq, HttpResponse r) {
  if (seq != seq_ || phase_ != Phase::kHandling) return;
  if (closed_) return;
  phase_ = Phase::kDone;
  on_close_ = nullptr;  // it may hold the handler's state, which holds this connection
  const bool ka = keep_alive_ && !srv_.draining;
  res_ = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.status), version_);
  res_->set(http::field::server, "ll3");
  res_->set(http::field::content_type, r.content_type);
  for (const auto& [k, v] : r.headers) res_->set(k, v);
  res_->body() = std::move(r.body);
  res_->keep_alive(ka);
  res_->prepare_payload();
  rec_.status = r.status;
  rec_.bytes_sent = res_->body().size();
  stream_.expires_after(secs(srv_.opt.write_timeout_s));
  http::async_write(stream_, *res_, [self = shared_from_this(), res = res_, ka](error_code ec, size_t) {
    self->finish_log(res->result_int());
    if (ec) return self->close();
    self->after_response(ka);
  });
}

void Connection::start_stream(uint64_t seq, int status, std::string content_type, Headers headers) {
  if (seq != seq_ || phase_ != Phase::kHandling || closed_) return;
  phase_ = Phase::kStreaming;
  raw_stream_ = version_ < 11;
  keep_alive_ = keep_alive_ && !raw_stream_;
  head_ = std::make_unique<http::response<http::empty_body>>(static_cast<http::status>(status), version_);
  head_->set(http::field::server, "ll3");
  head_->set(http::field::content_type, content_type);
  for (const auto& [k, v] : headers) head_->set(k, v);
  head_->keep_alive(keep_alive_ && !srv_.draining);
  if (!raw_stream_) head_->chunked(true);
  head_sr_ = std::make_unique<http::response_serializer<http::empty_body>>(*head_);
  rec_.status = status;
  writing_ = true;
  stream_.expires_after(secs(srv_.opt.write_timeout_s));
  http::async_write_header(stream_, *head_sr_, [self = shared_from_this()](error_code ec, size_t) {
    self->writing_ = false;
    if (ec) return self->close();
    self->head_sent_ = true;
    self->kick();
  });
}

void Connection::write(uint64_t seq, std::string data) {
  if (seq != seq_ || phase_ != Phase::kStreaming || closed_ || end_requested_ || data.empty()) return;
  pending_ += data;
  if (pending_.size() > srv_.opt.max_buffered_bytes) return close();  // a reader that stopped reading
  kick();
}

void Connection::end(uint64_t seq) {
  if (seq != seq_ || phase_ != Phase::kStreaming || closed_) return;
  end_requested_ = true;
  kick();
}

// Sends what is pending, one write at a time: everything that arrived while the previous write
// was in flight goes out as one chunk.
void Connection::kick() {
  if (writing_ || !head_sent_ || closed_ || phase_ != Phase::kStreaming) return;
  auto self = shared_from_this();
  stream_.expires_after(secs(srv_.opt.write_timeout_s));
  if (!pending_.empty()) {
    inflight_.swap(pending_);
    pending_.clear();
    rec_.bytes_sent += inflight_.size();
    writing_ = true;
    auto done = [self](error_code ec, size_t) {
      self->writing_ = false;
      if (ec) return self->close();
      self->kick();
    };
    if (raw_stream_) {
      net::async_write(stream_, net::buffer(inflight_), done);
    } else {
      net::async_write(stream_, http::make_chunk(net::buffer(inflight_)), done);
    }
    return;
  }
  if (!end_requested_) return;
  phase_ = Phase::kDone;
  on_close_ = nullptr;
  if (raw_stream_) {
    finish_log(rec_.status);
    return linger_close();
  }
  writing_ = true;
  const bool ka = keep_alive_ && !srv_.draining;
  net::async_write(stream_, http::make_chunk_last(), [self, ka](error_code ec, size_t) {
    self->writing_ = false;
    self->finish_log(self->rec_.status);
    if (ec) return self->close();
    self->after_response(ka);
  });
}

void Connection::after_response(bool keep_alive) {
  if (closed_) return;
  if (!keep_alive) return linger_close();
  if (watching_) {
    // The watch is the only operation pending; once it is cancelled the next read starts.
    resume_read_ = true;
    error_code ec;
    stream_.socket().cancel(ec);
    return;
  }
  do_read_header();
}

void Connection::reply_error(int status, const std::string& message) {
  if (closed_) return;
  if (logged_) {
    rec_ = AccessRecord();
    rec_.method = parser_ && parser_->is_header_done() ? std::string(parser_->get().method_string()) : "-";
    rec_.path = parser_ && parser_->is_header_done() ? std::string(parser_->get().target()) : "-";
    rec_.path = rec_.path.substr(0, rec_.path.find('?'));
    rec_.remote = remote_;
    logged_ = false;
    if (t_start_ == 0) t_start_ = steady_now();
  }
  ++seq_;
  phase_ = Phase::kHandling;
  keep_alive_ = false;
  HttpResponse r = srv_.error_body(status, message);
  respond(seq_, std::move(r));
}

// Ends a connection the polite way: our FIN first, then whatever the client still sends is
// read and dropped for a moment, so the kernel does not answer unread input with a reset that
// could destroy the response (a 413 sent before the body was read).
void Connection::linger_close() {
  if (closed_) return;
  error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return close();
  phase_ = Phase::kDone;
  stream_.expires_after(std::chrono::seconds(2));
  drain();
}

void Connection::drain() {
  stream_.async_read_some(net::buffer(discard_), [self = shared_from_this()](error_code ec, size_t n) {
    self->discarded_ += n;
    // Up to 64 MiB within the 2 s: enough for a client that sends its whole oversized body before
    // it reads (the 413 of a 9 MiB body was lost to a reset with a 1 MiB cap), bounded in time.
    if (ec || self->discarded_ > (64u << 20)) return self->close();
    self->drain();
  });
}

void Connection::finish_log(int status) {
  if (logged_) return;
  logged_ = true;
  rec_.status = status;
  rec_.seconds = (t_end_ > 0 ? t_end_ : steady_now()) - t_start_;
  t_end_ = 0;
  if (srv_.log) srv_.log(rec_);
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.close();
  pending_.clear();
  if (phase_ == Phase::kHandling || phase_ == Phase::kStreaming) {
    rec_.client_closed = true;
    // 499 (nginx's "client closed request") when nothing was sent yet.
    if (rec_.status == 0) rec_.status = 499;
    t_end_ = steady_now();
    log_on_release_ = !logged_;
    phase_ = Phase::kDone;
    if (auto fn = std::move(on_close_)) fn();
  }
  on_close_ = nullptr;
}

}  // namespace

void HttpServer::Impl::do_accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // Out of file descriptors and the like: try again shortly rather than spin.
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](error_code e) {
        if (!e) do_accept();
      });
      return;
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);  // one token, one packet, now
    const uint64_t id = next_conn++;
    ++total;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (static_cast<size_t>(open.load()) >= opt.max_connections) {
        socket.close(ignored);
      } else {
        ++open;
        auto c = std::make_shared<Connection>(*this, std::move(socket), id);
        conns.emplace(id, c);
        net::post(c->executor(), [c] { c->start(); });
      }
    }
    do_accept();
  });
}

void HttpServer::Impl::wait_signal() {
  signals.async_wait([this](error_code ec, int sig) {
    if (ec) return;
    std::function<void(int)> fn;
    {
      std::lock_guard<std::mutex> lk(mu);
      fn = signal_fn;
      if (!fn) early_signals.push_back(sig);
    }
    if (fn) fn(sig);
    wait_signal();
  });
}

void HttpServer::Impl::for_each_connection(void (Connection::*fn)()) {
  std::vector<std::shared_ptr<Connection>> live;
  {
    std::lock_guard<std::mutex> lk(mu);
    for (auto& [id, w] : conns) {
      if (auto c = w.lock()) live.push_back(std::move(c));
    }
  }
  for (auto& c : live) net::post(c->executor(), [c, fn] { ((*c).*fn)(); });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::start(const HttpServerOptions& options, Handler handler, LogHook log,
                                                      ErrorBody error_body) {
  if (options.port < 0 || options.port > 65535) return Status::errorf("port %d is out of range", options.port);
  // Hundreds of clients need as many descriptors: raise the soft limit to the hard one.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  auto impl = std::make_unique<Impl>(options);
  impl->handler = std::move(handler);
  impl->log = std::move(log);
  impl->error_body = std::move(error_body);
  error_code ec;
  const net::ip::address addr = net::ip::make_address(options.host, ec);
  if (ec) return Status::errorf("--host %s is not an IP address (%s)", options.host.c_str(), ec.message().c_str());
  const tcp::endpoint ep(addr, static_cast<unsigned short>(options.port));
  tcp::acceptor& a = impl->acceptor;
  if (a.open(ep.protocol(), ec); ec) return Status::errorf("socket: %s", ec.message().c_str());
  a.set_option(net::socket_base::reuse_address(true), ec);
  if (a.bind(ep, ec); ec) return Status::errorf("cannot bind %s:%d: %s", options.host.c_str(), options.port, ec.message().c_str());
  if (a.listen(net::socket_base::max_listen_connections, ec); ec) return Status::errorf("listen: %s", ec.message().c_str());
  impl->port = a.local_endpoint(ec).port();
  impl->work.emplace(impl->ioc.get_executor());
  Impl* p = impl.get();
  net::post(a.get_executor(), [p] { p->do_accept(); });
  p->wait_signal();
  const int n = std::max(1, options.threads);
  for (int i = 0; i < n; ++i) p->threads.emplace_back([p] { p->ioc.run(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return impl_->port; }
const std::string& HttpServer::host() const { return impl_->opt.host; }
int64_t HttpServer::connections_open() const { return impl_->open.load(); }
int64_t HttpServer::connections_total() const { return impl_->total.load(); }

void HttpServer::post(std::function<void()> fn) {
  if (impl_->alive->load()) net::post(impl_->ioc, std::move(fn));
}

void HttpServer::on_signal(std::function<void(int)> fn) {
  // A SIGTERM that came between start() and now (a process stopped while it starts) still
  // counts: lost, it would leave a server running that its supervisor asked to stop.
  std::vector<int> early;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->signal_fn = fn;
    early.swap(impl_->early_signals);
  }
  for (int sig : early) fn(sig);
}

void HttpServer::stop_accepting() {
  Impl* p = impl_.get();
  if (p->draining.exchange(true)) return;
  net::post(p->acceptor.get_executor(), [p] {
    error_code ec;
    p->acceptor.close(ec);
    p->accept_retry.cancel();
  });
  p->for_each_connection(&Connection::close_if_idle);
}

void HttpServer::stop() {
  Impl* p = impl_.get();
  if (p->stopped) return;
  p->stopped = true;
  stop_accepting();
  p->for_each_connection(&Connection::force_close);
  net::post(p->ioc, [p] {
    error_code ec;
    p->signals.cancel(ec);
  });
  p->work.reset();
  // Closed sockets end their operations and the threads run out of work; a straggler is cut
  // off after a moment (what still waits is dropped with the io_context).
  std::mutex m;
  std::condition_variable cv;
  bool joined = false;
  std::thread stopper([&] {
    std::unique_lock<std::mutex> lk(m);
    if (!cv.wait_for(lk, std::chrono::seconds(2), [&] { return joined; })) p->ioc.stop();
  });
  for (std::thread& t : p->threads) t.join();
  {
    std::lock_guard<std::mutex> lk(m);
    joined = true;
  }
  cv.notify_all();
  stopper.join();
  p->alive->store(false);
}

}  // namespace ll3::server
