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
  EngineOptions eo;
  if (std::string err = finish_generation_flags(&gf, &eo); !err.empty()) return ap.usage_error(err);

  Result<LoadedModel> lm = load_model_cli(model_path, true, gf.engine.load);
  if (!lm.ok()) return fail("run", lm.message());
  const int64_t model_ctx = lm->model->config.context_length;
  gf.req.tokens = lm->tokenizer->encode(prompt, !no_bos, parse_special);
  const int64_t n_prompt = static_cast<int64_t>(gf.req.tokens.size());
  if (eo.ctx == 0 && eo.kv_memory == 0) {
    // Room for the prompt and the generation, within the model's context.
    const int64_t want = n_prompt + (gf.req.max_tokens < 0 ? 4096 : gf.req.max_tokens) + 1;
    eo.ctx = std::min<int64_t>(model_ctx, std::max<int64_t>(want, 512));
  }
  eo.max_seqs = 1;
  eo.batch_wait_ms = 0;
  Result<std::unique_ptr<Engine>> engine = make_engine(std::move(lm.value()), eo);
  if (!engine.ok()) return fail("run", engine.message());
  gf.req.on_token = [](const TokenEvent& ev) {
    std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  Result<Engine::Completion> done = (*engine)->generate(std::move(gf.req));
  if (!done.ok()) return fail("run", done.message());
  const FinishInfo& f = done->finish;
  std::fwrite(f.text.data(), 1, f.text.size(), stdout);
  std::printf("\n");
  if (f.reason == FinishReason::kError) return fail("run", f.error);
  if (!quiet) {
    const int64_t computed = f.prompt_tokens - f.cached_tokens;
    const double gen_s = f.completion_tokens > 0 ? f.total_seconds - f.first_token_seconds : 0;
    // Tokens after the first, over the time after the first: the decode rate.
    const double gen_rate = f.completion_tokens > 1 && gen_s > 0 ? (f.completion_tokens - 1) / gen_s : 0;
    std::fprintf(stderr, "ll3: prompt %lld tokens in %.2f s (%.1f t/s); generated %lld tokens in %.2f s (%.1f t/s); %s\n",
                 static_cast<long long>(computed), f.first_token_seconds,
                 f.first_token_seconds > 0 ? computed / f.first_token_seconds : 0.0,
                 static_cast<long long>(f.completion_tokens), gen_s, gen_rate, finish_reason_name(f.reason));
    const EngineStats st = (*engine)->stats();
    if (st.spec_guessed > 0) {
      std::fprintf(stderr, "ll3: speculation: %lld tokens guessed, %lld accepted (%.0f%%), %lld steps\n",
                   static_cast<long long>(st.spec_guessed), static_cast<long long>(st.spec_accepted),
                   100.0 * static_cast<double>(st.spec_accepted) / static_cast<double>(st.spec_guessed),
                   static_cast<long long>(st.steps));
    }
  }
  return 0;
}

}  // namespace

LL3_COMMAND("run", "generate text from a prompt", cmd_run);

}  // namespace ll3::cli
