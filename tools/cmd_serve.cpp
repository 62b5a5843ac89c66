// ll3 serve: the OpenAI-compatible HTTP server (src/server). Binds first, so /health answers 503
// while the model loads; exits 0 after a SIGINT or SIGTERM once running requests are done.
#include <cstdio>
#include <cstdlib>

#include "cli_common.h"
#include "commands.h"
#include "engine/model_impl.h"
#include "server/embeddings.h"
#include "server/openai_server.h"

namespace ll3::cli {

namespace {

int cmd_serve(int argc, char** argv) {
  std::string model_path, log_format = "text", template_file;
  server::ServerOptions so;
  long long port = 8080, body_limit = static_cast<long long>(so.http.body_limit), max_connections = 4096;
  int http_threads = 1;
  double timeout_s = 60, grace_s = 30;
  bool no_access_log = false, no_webui = false;
  EngineFlags ef;
  ArgParser ap("serve", "ll3 serve [-m MODEL] [--host 127.0.0.1] [--port 8080] [--api-key KEY] [engine flags]",
               "Serve the model over an OpenAI-compatible HTTP API: /v1/chat/completions, /v1/completions, "
               "/v1/models, /tokenize, /detokenize, /health, /metrics; and a chat page at /.");
  ap.add_string({"-m", "--model"}, "MODEL", "GGUF file or Hugging Face directory", &model_path);
  ap.add_string({"--host"}, "ADDR", "address to listen on (default 127.0.0.1)", &so.http.host);
  ap.add_int({"--port"}, "N", "port to listen on; 0 picks a free one (default 8080)", &port);
  ap.add_string({"--api-key"}, "KEY", "require Authorization: Bearer KEY (default: $LL3_API_KEY, else none)", &so.api_key);
  ap.add_string({"--cors-origin"}, "ORIGIN", "allow browsers from ORIGIN (\"*\" or a comma-separated list)", &so.cors_origin);
  ap.add_string({"--alias"}, "NAME", "the model id clients see (default: general.name or the file name)", &so.alias);
  ap.add_string({"--chat-template"}, "FILE", "a Jinja chat template to use instead of the model's", &template_file);
  ap.add_string({"--log-format"}, "FORMAT", "access log on stderr: text or json (default text)", &log_format);
  ap.add_flag({"--no-access-log"}, "write no access log lines", &no_access_log);
  std::string pooling = "mean";
  ap.add_string({"--pooling"}, "MODE", "how /v1/embeddings pools a request that names none: mean or last (default mean)",
                &pooling);
  ap.add_flag({"--no-webui"}, "do not serve the chat page at / (then / is 404)", &no_webui);
  ap.add_int({"--max-body"}, "BYTES", "largest request body; larger ones get 413 (default 8 MiB)", &body_limit);
  ap.add_int({"--max-connections"}, "N", "open connections beyond this are closed at once (default 4096)", &max_connections);
  ap.add_int({"--http-threads"}, "N", "threads for the network I/O (default 1)", &http_threads);
  ap.add_float({"--timeout"}, "S", "idle keep-alive, request read and stalled write timeout in seconds (default 60)", &timeout_s);
  ap.add_float({"--shutdown-grace"}, "S", "on SIGTERM, seconds running requests get to finish (default 30)", &grace_s);
  add_engine_flags(ap, &ef, true);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  if (port < 0 || port > 65535) return ap.usage_error("--port must be in 0..65535");
  if (body_limit < 1) return ap.usage_error("--max-body must be positive");
  if (max_connections < 1) return ap.usage_error("--max-connections must be positive");
  if (http_threads < 1 || http_threads > 64) return ap.usage_error("--http-threads must be in 1..64");
  if (!(timeout_s > 0) || timeout_s > 86400) return ap.usage_error("--timeout must be in (0, 86400]");
  if (!(grace_s >= 0) || grace_s > 86400) return ap.usage_error("--shutdown-grace must be in [0, 86400]");
  if (log_format != "text" && log_format != "json") return ap.usage_error("--log-format must be text or json");
  EngineOptions eo;
  if (std::string err = finish_engine_flags(ef, &eo); !err.empty()) return ap.usage_error(err);
  if (so.api_key.empty()) {
    if (const char* k = std::getenv("LL3_API_KEY")) so.api_key = k;
  }
  if (!template_file.empty()) {
    Result<std::string> t = read_text_file(template_file);
    if (!t.ok()) return ap.usage_error(t.message());
    so.chat_template = std::move(t.value());
  }
  so.http.port = static_cast<int>(port);
  so.http.body_limit = static_cast<size_t>(body_limit);
  so.http.max_connections = static_cast<size_t>(max_connections);
  so.http.threads = http_threads;
  so.http.idle_timeout_s = so.http.read_timeout_s = so.http.write_timeout_s = timeout_s;
  so.log_json = log_format == "json";
  so.access_log = !no_access_log;
  if (!server::parse_pooling(pooling, &so.pooling)) return ap.usage_error("--pooling must be mean or last");
  so.webui = !no_webui;
  so.lora_root = ef.lora_dir;

  // Bind before loading: a client (or a test) learns the port at once and sees /health 503.
  Result<std::unique_ptr<server::OpenAiServer>> srv = server::OpenAiServer::start(so);
  if (!srv.ok()) return fail("serve", srv.message());
  std::fprintf(stderr, "ll3 serve: listening on http://%s:%d\n", (*srv)->host().c_str(), (*srv)->port());
  std::fflush(stderr);

  Result<LoadedModel> lm = load_model_cli(model_path, true, ef.load);
  if (!lm.ok()) return fail("serve", lm.message());
  std::shared_ptr<const Model> model = make_model(std::move(lm->model), std::move(lm->tokenizer));
  Result<std::unique_ptr<Engine>> engine = Engine::create(model, eo);
  if (!engine.ok()) return fail("serve", engine.message());
  const EngineStats st = (*engine)->stats();
  (*srv)->set_engine(model, std::move(engine.value()));
  std::fprintf(stderr, "ll3 serve: serving %s (KV cache %lld tokens, up to %lld per sequence, %lld sequences at once)%s\n",
               so.alias.empty() ? model->name().c_str() : so.alias.c_str(),
               static_cast<long long>(st.kv_blocks * st.block_size), static_cast<long long>(st.max_seq_tokens),
               static_cast<long long>(eo.max_seqs), so.api_key.empty() ? "" : "; API key required");
  std::fflush(stderr);

  (*srv)->wait_for_shutdown();
  (*srv)->shutdown(grace_s);
  std::fprintf(stderr, "ll3 serve: stopped\n");
  return 0;
}

}  // namespace

LL3_COMMAND("serve", "serve the model over an OpenAI-compatible HTTP API", cmd_serve);

}  // namespace ll3::cli
