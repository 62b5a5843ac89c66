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

// The conversation so far and what rendering it needs.
struct Conversation {
  const Tokenizer& tk;
  std::string system;
  ChatTemplateOptions topt;
  std::vector<ChatMessage> messages;
  bool warned = false;  // the template's warning is printed once

  Conversation(const Tokenizer& t, std::string sys) : tk(t), system(std::move(sys)) {
    if (tk.bos_id() >= 0) topt.bos_token = std::string(tk.piece(tk.bos_id()));
    if (tk.eos_id() >= 0) topt.eos_token = std::string(tk.piece(tk.eos_id()));
    reset();
  }
  void reset() {
    messages.clear();
    if (!system.empty()) messages.push_back({"system", system, ""});
  }
  // The whole conversation through the model's chat template.
  Result<std::string> render() {
    std::string warning;
    Result<std::string> prompt = render_chat(tk.vocab().chat_template, messages, topt, &warning);
    if (prompt.ok() && !warning.empty() && !warned) {
      std::fprintf(stderr, "ll3 chat: %s\n", warning.c_str());
      warned = true;
    }
    return prompt;
  }
};

void print_turn_stats(const FinishInfo& f) {
  const double gen_s = f.total_seconds - f.first_token_seconds;
  std::fprintf(stderr, "[%lld prompt tokens (%lld reused), %lld generated, %.1f t/s, %s]\n",
               static_cast<long long>(f.prompt_tokens - f.cached_tokens), static_cast<long long>(f.cached_tokens),
               static_cast<long long>(f.completion_tokens),
               f.completion_tokens > 1 && gen_s > 0 ? (f.completion_tokens - 1) / gen_s : 0.0,
               finish_reason_name(f.reason));
}

// One turn: the user's line in, the reply streamed to stdout. A conversation that no longer fits
// `max_len` tokens drops the line. Returns -1 to go on, else the exit code.
int chat_turn(Engine& engine, Conversation& c, const Request& base, int64_t max_len, bool quiet,
              const std::string& line) {
  c.messages.push_back({"user", line, ""});
  Result<std::string> prompt = c.render();
  if (!prompt.ok()) return fail("chat", prompt.message());
  // The template writes <|begin_of_text|> itself; its special tokens are parsed as such.
  Request req = base;
  req.tokens = c.tk.encode(prompt.value(), false, true);
  req.session_id = "chat";
  if (static_cast<int64_t>(req.tokens.size()) >= max_len) {
    std::fprintf(stderr, "ll3 chat: the conversation (%zu tokens) no longer fits the context of %lld; /reset to start over\n",
                 req.tokens.size(), static_cast<long long>(max_len));
    c.messages.pop_back();
    return -1;
  }
  std::string reply;
  req.on_token = [&](const TokenEvent& ev) {
    reply.append(ev.text);
    std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  Result<Engine::Completion> done = engine.generate(std::move(req));
  if (!done.ok()) return fail("chat", done.message());
  const FinishInfo& f = done->finish;
  reply.append(f.text);
  std::fwrite(f.text.data(), 1, f.text.size(), stdout);
  std::printf("\n");
  if (f.reason == FinishReason::kError) return fail("chat", f.error);
  c.messages.push_back({"assistant", reply, ""});
  if (!quiet) print_turn_stats(f);
  return -1;
}

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
  const int64_t max_len = (*engine)->stats().max_seq_tokens;

  Conversation c(*tkp, system);
  const bool interactive = isatty(STDIN_FILENO) != 0;
  std::string line;
  for (;;) {
    if (interactive) {
      std::printf("> ");
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      c.reset();
      continue;
    }
    if (line.empty()) continue;
    if (int rc = chat_turn(**engine, c, gf.req, max_len, quiet, line); rc >= 0) return rc;
  }
  return 0;
}

}  // namespace

LL3_COMMAND("chat", "chat with a model in the terminal using its chat template", cmd_chat);

}  // namespace ll3::cli
