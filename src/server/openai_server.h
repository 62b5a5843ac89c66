// The OpenAI-compatible server: routes (/v1/chat/completions, /v1/completions, /v1/models,
// /tokenize, /detokenize, /health, /metrics), API key, CORS, access log, and the lifecycle:
// bind first and answer /health with 503 while the model loads, serve once an engine is set,
// and on SIGINT / SIGTERM stop accepting, let running requests finish within a grace period,
// cancel the rest, and destroy the engine (which saves sessions).
#pragma once

#include <memory>
#include <string>

#include "ll3/engine.h"
#include "server/http_server.h"

namespace ll3::server {

struct ServerOptions {
  HttpServerOptions http;
  std::string api_key;        // empty: no key required
  std::string cors_origin;    // "*", or comma-separated origins allowed; empty: no CORS
  std::string alias;          // the model id in responses (default: general.name or the file name)
  std::string chat_template;  // Jinja source overriding the model's (empty: the model's own)
  bool log_json = false;      // access log lines as JSON objects
  bool access_log = true;
  Pooling pooling = Pooling::kMean;  // /v1/embeddings when the body names none (--pooling)
  bool webui = true;          // the chat page at / (src/server/webui.h); false: / is 404
  // --lora-dir: adapters loaded at run time must lie under it (empty: anywhere the server can read).
  std::string lora_root;
};

class OpenAiServer {
 public:
  // Binds the address and starts answering (503 until set_engine).
  static Result<std::unique_ptr<OpenAiServer>> start(const ServerOptions& options);
  ~OpenAiServer();  // shutdown(0) if not done

  int port() const;
  const std::string& host() const;

  // The engine to serve with (over `model`), once the model is loaded. Warnings about the chat
  // template go to stderr.
  void set_engine(std::shared_ptr<const Model> model, std::unique_ptr<Engine> engine);
  // Blocks until SIGINT or SIGTERM arrives (or request_shutdown()); returns the signal (0).
  int wait_for_shutdown();
  void request_shutdown();
  bool shutdown_requested() const;
  // Stops accepting, waits up to `grace_s` for running requests, cancels what remains,
  // destroys the engine and closes every connection. A second signal during the wait cuts it
  // short.
  void shutdown(double grace_s);

  struct Impl;

 private:
  explicit OpenAiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ll3::server
