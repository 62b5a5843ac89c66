// ll3 run: generate text from a prompt, streamed to stdout as it is produced.
#include <cstdio>

#include "cli_common.h"
#include "commands.h"

namespace ll3::cli {

namespace {

int cmd_run(int argc, char** argv) {
  std::string model_path, prompt, prompt_file;
  bool parse_special = false, no_bos = false, quiet = false;
  GenerationFlags gf;
  ArgParser ap("run", "ll3 run [-m MODEL] -p PROMPT [-n N] [sampling flags] [-t THREADS]",
               "Generate text from a prompt. Without -m, uses the default model (made on first use).");
  ap.add_string({"-m", "--model"}, "MODEL", "GGUF file or Hugging Face directory", &model_path);
  ap.add_string({"-p", "--prompt"}, "TEXT", "the prompt", &prompt);
  ap.add_string({"-f", "--file"}, "FILE", "read the prompt from FILE", &prompt_file);
  ap.add_flag({"--parse-special"}, "recognise special tokens like <|eot_id|> in the prompt", &parse_special);
  ap.add_flag({"--no-bos"}, "do not add <|begin_of_text|>", &no_bos);
  ap.add_flag({"-q", "--quiet"}, "print no statistics on stderr", &quiet);
  add_generation_flags(ap, &gf);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  if (!prompt_file.empty()) {
    if (!prompt.empty()) return ap.usage_error("give -p or -f, not both");
    Result<std::string> text = read_text_file(prompt_file);
    if (!text.ok()) return ap.usage_error(text.message());
    prompt = std::move(text.value());
  }
  if (prompt.empty()) return ap.usage_error("a prompt is required (-p TEXT or -f FILE)");
  SessionOptions so;
  if (std::string err = finish_generation_flags(&gf, &so); !err.empty()) return ap.usage_error(err);

  Result<LoadedModel> lm = load_model_cli(model_path, true, gf.load);
  if (!lm.ok()) return fail("run", lm.message());
  const LlamaModel& model = *lm->model;
  const Tokenizer& tok = *lm->tokenizer;
  std::vector<int32_t> tokens = tok.encode(prompt, !no_bos, parse_special);
  if (so.context == 0) {
    // Room for the prompt and the generation, within the model's context.
    int64_t want = static_cast<int64_t>(tokens.size()) + (gf.gen.max_tokens < 0 ? 4096 : gf.gen.max_tokens);
    so.context = std::min<int64_t>(model.config.context_length, std::max<int64_t>(want, 512));
  }
  if (static_cast<int64_t>(tokens.size()) >= so.context) {
    std::fprintf(stderr, "ll3 run: the prompt has %zu tokens, more than the context of %lld allows\n",
                 tokens.size(), static_cast<long long>(so.context));
    return 1;
  }
  Result<std::unique_ptr<Session>> session = Session::create(model, so);
  if (!session.ok()) return fail("run", session.message());
  auto print = [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  Result<GenerateStats> st = generate(**session, tok, tokens, gf.gen, print);
  std::printf("\n");
  if (!st.ok()) return fail("run", st.message());
  if (!quiet) {
    const GenerateStats& s = st.value();
    std::fprintf(stderr, "ll3: prompt %lld tokens in %.2f s (%.1f t/s); generated %lld tokens in %.2f s (%.1f t/s); %s\n",
                 static_cast<long long>(s.n_prompt), s.prompt_seconds,
                 s.prompt_seconds > 0 ? s.n_prompt / s.prompt_seconds : 0.0, static_cast<long long>(s.n_generated),
                 s.gen_seconds, s.gen_seconds > 0 ? s.n_generated / s.gen_seconds : 0.0, s.finish_reason.c_str());
  }
  return 0;
}

}  // namespace

LL3_COMMAND("run", "generate text from a prompt", cmd_run);

}  // namespace ll3::cli
