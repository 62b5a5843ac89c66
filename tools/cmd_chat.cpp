// ll3 chat: an interactive conversation in the terminal using the model's chat template. Each
// turn re-renders the whole conversation; the session keeps the KV of the common prefix, so
// only the new user message (and the template's framing) is evaluated.
#include <unistd.h>

#include <cstdio>
#include <iostream>

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
  SessionOptions so;
  if (std::string err = finish_generation_flags(&gf, &so); !err.empty()) return ap.usage_error(err);

  Result<LoadedModel> lm = load_model_cli(model_path, true, gf.load);
  if (!lm.ok()) return fail("chat", lm.message());
  const Tokenizer& tk = *lm->tokenizer;
  Result<std::unique_ptr<Session>> session = Session::create(*lm->model, so);
  if (!session.ok()) return fail("chat", session.message());
  Session& s = **session;

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
    std::vector<int32_t> tokens = tk.encode(prompt.value(), false, true);
    if (static_cast<int64_t>(tokens.size()) >= s.context()) {
      std::fprintf(stderr, "ll3 chat: the conversation (%zu tokens) no longer fits the context of %lld; /reset to start over\n",
                   tokens.size(), static_cast<long long>(s.context()));
      messages.pop_back();
      continue;
    }
    std::string reply;
    auto print = [&](std::string_view text) {
      reply.append(text);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return true;
    };
    Result<GenerateStats> st = generate(s, tk, tokens, gf.gen, print);
    std::printf("\n");
    if (!st.ok()) return fail("chat", st.message());
    messages.push_back({"assistant", reply, ""});
    if (!quiet) {
      std::fprintf(stderr, "[%lld prompt tokens (%lld reused), %lld generated, %.1f t/s, %s]\n",
                   static_cast<long long>(st->n_prompt), static_cast<long long>(st->n_reused),
                   static_cast<long long>(st->n_generated),
                   st->gen_seconds > 0 ? st->n_generated / st->gen_seconds : 0.0, st->finish_reason.c_str());
    }
  }
  return 0;
}

}  // namespace

LL3_COMMAND("chat", "chat with a model in the terminal using its chat template", cmd_chat);

}  // namespace ll3::cli
