// ll3 chat: an interactive conversation in the terminal using the model's chat template. Each
// turn re-renders the whole conversation; the session keeps the KV of the common prefix, so
// only the new user message (and the template's framing) is evaluated.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <limits>

#include "cli_common.h"
#include "commands.h"
#include "tokenizer/chat_template.h"

namespace ll3::cli {

namespace {

int cmd_chat(int argc, char** argv) {
  std::string model_path, system;
  bool quiet = false;
  GenerationFlags gf;
  gf.max_tokens = -1;  // until end of turn
  ArgParser ap("chat", "ll3 chat [-m MODEL] [--system TEXT] [sampling flags]",
               "Chat with a model in the terminal (one message per line; /reset starts over, /exit or EOF quits).");
  ap.add_string({"-m", "--model"}, "MODEL", "GGUF file or Hugging Face directory", &model_path);
  ap.add_string({"--system"}, "TEXT", "system prompt", &system);
  ap.add_flag({"-q", "--quiet"}, "print no statistics on stderr", &quiet);
  add_generation_flags(ap, &gf);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  EngineOptions eo;
  if (std::string err = finish_generation_flags(&gf, &eo); !err.empty()) return ap.usage_error(err);

  Result<LoadedModel> lm = load_model_cli(model_path, true, gf.engine.load);
  if (!lm.ok()) return fail("chat", lm.message());
  if (eo.ctx == 0 && eo.kv_memory == 0) eo.ctx = std::min<int64_t>(lm->model->config.context_length, 4096);
  eo.max_seqs = 1;
  eo.batch_wait_ms = 0;
  // The conversation is a session: its KV stays pinned between turns, so each turn computes
  // only the new message (and the template's framing).
  eo.session_memory = std::numeric_limits<int64_t>::max() / 4;
  const Tokenizer* tkp = lm->tokenizer.get();
  Result<std::unique_ptr<Engine>> engine = make_engine(std::move(lm.value()), eo);
  if (!engine.ok()) return fail("chat", engine.message());
  const Tokenizer& tk = *tkp;
  const int64_t max_len = (*engine)->stats().max_seq_tokens;

  ChatTemplateOptions topt;
  if (tk.bos_id() >= 0) topt.bos_token = std::string(tk.piece(tk.bos_id()));
  if (tk.eos_id() >= 0) topt.eos_token = std::string(tk.piece(tk.eos_id()));
  std::vector<ChatMessage> messages;
  auto reset = [&] {
    messages.clear();
    if (!system.empty()) messages.push_back({"system", system, ""});
  };
  reset();
  const bool interactive = isatty(STDIN_FILENO) != 0;
  bool warned = false;
  std::string line;
  for (;;) {
    if (interactive) {
      std::printf("> ");
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      reset();
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({"user", line, ""});
    std::string warning;
    Result<std::string> prompt = render_chat(tk.vocab().chat_template, messages, topt, &warning);
    if (!prompt.ok()) return fail("chat", prompt.message());
    if (!warning.empty() && !warned) {
      std::fprintf(stderr, "ll3 chat: %s\n", warning.c_str());
      warned = true;
    }
    // The template writes <|begin_of_text|> itself; its special tokens are parsed as such.
    Request req = gf.req;
    req.tokens = tk.encode(prompt.value(), false, true);
    req.session_id = "chat";
    if (static_cast<int64_t>(req.tokens.size()) >= max_len) {
      std::fprintf(stderr, "ll3 chat: the conversation (%zu tokens) no longer fits the context of %lld; /reset to start over\n",
                   req.tokens.size(), static_cast<long long>(max_len));
      messages.pop_back();
      continue;
    }
    std::string reply;
    req.on_token = [&](const TokenEvent& ev) {
      reply.append(ev.text);
      std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
      std::fflush(stdout);
      return true;
    };
    Result<Engine::Completion> done = (*engine)->generate(std::move(req));
    if (!done.ok()) return fail("chat", done.message());
    const FinishInfo& f = done->finish;
    reply.append(f.text);
    std::fwrite(f.text.data(), 1, f.text.size(), stdout);
    std::printf("\n");
    if (f.reason == FinishReason::kError) return fail("chat", f.error);
    messages.push_back({"assistant", reply, ""});
    if (!quiet) {
      const double gen_s = f.total_seconds - f.first_token_seconds;
      std::fprintf(stderr, "[%lld prompt tokens (%lld reused), %lld generated, %.1f t/s, %s]\n",
                   static_cast<long long>(f.prompt_tokens - f.cached_tokens), static_cast<long long>(f.cached_tokens),
                   static_cast<long long>(f.completion_tokens),
                   f.completion_tokens > 1 && gen_s > 0 ? (f.completion_tokens - 1) / gen_s : 0.0,
                   finish_reason_name(f.reason));
    }
  }
  return 0;
}

}  // namespace

LL3_COMMAND("chat", "chat with a model in the terminal using its chat template", cmd_chat);

}  // namespace ll3::cli
