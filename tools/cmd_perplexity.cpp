// ll3 perplexity: perplexity of a model over a text (llama-perplexity's chunking and scoring),
// optionally saving the base log-probabilities or comparing with them (KL divergence).
#include <unistd.h>

#include <cstdio>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "eval/perplexity.h"
#include "eval/sequence_evaluator.h"

namespace ll3::cli {

namespace {

std::string eta_string(double s) {
  const int t = static_cast<int>(s + 0.5);
  return t >= 60 ? strprintf("%dm%02ds", t / 60, t % 60) : strprintf("%ds", t);
}

void print_progress(const PerplexityProgress& p, bool tty) {
  const double eta = p.seconds / p.chunk * (p.n_chunk - p.chunk);
  std::string kl;
  if (p.kl != nullptr) {
    // Once per chunk: the summary sorts copies of the per-token values, cheap next to a chunk.
    KlSummary k = p.kl->summary();
    kl = strprintf("  KLD %.6f  same top %.2f%%", k.kld.mean, 100 * k.same_top.mean);
  }
  if (tty) {
    const int width = 24;
    const int filled = static_cast<int>(width * p.chunk / p.n_chunk);
    std::fprintf(stderr, "\r[%s%s] %lld/%lld  PPL %.4f +/- %.4f%s  %.1f s/chunk  ETA %s   ",
                 std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
                 static_cast<long long>(p.chunk), static_cast<long long>(p.n_chunk), p.ppl->ppl(), p.ppl->ppl_error(),
                 kl.c_str(), p.seconds / p.chunk, eta_string(eta).c_str());
    if (p.chunk == p.n_chunk) std::fputc('\n', stderr);
  } else {
    std::fprintf(stderr, "chunk %lld/%lld: PPL = %.4f +/- %.4f%s (%.1f s, ETA %s)\n", static_cast<long long>(p.chunk),
                 static_cast<long long>(p.n_chunk), p.ppl->ppl(), p.ppl->ppl_error(), kl.c_str(), p.seconds,
                 eta_string(eta).c_str());
  }
  std::fflush(stderr);
}

void print_kl(const KlSummary& k) {
  std::printf("\n====== Perplexity statistics ======\n");
  std::printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", k.ppl.mean, k.ppl.err);
  std::printf("Mean PPL(base)                : %10.6f ± %10.6f\n", k.ppl_base.mean, k.ppl_base.err);
  std::printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100 * k.ln_ppl_correlation);
  std::printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", k.ln_ppl_ratio.mean, k.ln_ppl_ratio.err);
  std::printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", k.ppl_ratio.mean, k.ppl_ratio.err);
  std::printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", k.ppl_diff.mean, k.ppl_diff.err);
  std::printf("\n====== KL divergence statistics ======\n");
  std::printf("Mean    KLD: %10.6f ± %10.6f\n", k.kld.mean, k.kld.err);
  std::printf("Maximum KLD: %10.6f\n", k.kld_max);
  std::printf("99.9%%   KLD: %10.6f\n", k.kld_p999);
  std::printf("99.0%%   KLD: %10.6f\n", k.kld_p99);
  std::printf("Median  KLD: %10.6f\n", k.kld_median);
  std::printf("10.0%%   KLD: %10.6f\n", k.kld_p10);
  std::printf(" 5.0%%   KLD: %10.6f\n", k.kld_p5);
  std::printf(" 1.0%%   KLD: %10.6f\n", k.kld_p1);
  std::printf("Minimum KLD: %10.6f\n", k.kld_min);
  std::printf("\n====== Token probability statistics ======\n");
  std::printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100 * k.p_diff.mean, 100 * k.p_diff.err);
  std::printf("Maximum Δp: %6.3f%%\n", 100 * k.p_diff_max);
  std::printf("99.0%%   Δp: %6.3f%%\n", 100 * k.p_diff_p99);
  std::printf("Median  Δp: %6.3f%%\n", 100 * k.p_diff_median);
  std::printf(" 1.0%%   Δp: %6.3f%%\n", 100 * k.p_diff_p1);
  std::printf("Minimum Δp: %6.3f%%\n", 100 * k.p_diff_min);
  std::printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100 * k.p_diff_rms.mean, 100 * k.p_diff_rms.err);
  std::printf("Same top p: %6.3f ± %5.3f %%\n", 100 * k.same_top.mean, 100 * k.same_top.err);
}

struct PerplexityFlags {
  std::string model_path, text_path, save_path, base_path, kv_type = "f16";
  long long ctx = 0, chunks = -1, batch = 512;
  int threads = 0;
  bool float_act = false, amx_bf16 = false;
  LoadFlags load_flags;
  DType kv = DType::F16;  // kv_type, parsed
  std::string text;       // the file at text_path
};

// Parses and checks the flags and reads the text. Returns -1 to go on, else the exit code.
int parse_perplexity_flags(int argc, char** argv, PerplexityFlags& f) {
  ArgParser ap("perplexity",
               "ll3 perplexity -m MODEL -f TEXT [--ctx 512] [--chunks N] [-t N] [--save-logits FILE | --kl-base FILE] "
               "[--float-act]",
               "Perplexity over non-overlapping chunks of a text (second half of each scored, as llama-perplexity "
               "does); KL divergence against a saved base run.");
  ap.add_string({"-m", "--model"}, "MODEL", "GGUF file or Hugging Face directory (default: the default model)",
                &f.model_path);
  ap.add_string({"-f", "--file"}, "TEXT", "text file to score (bytes as they are)", &f.text_path);
  ap.add_int({"-c", "--ctx"}, "N", "tokens per chunk (default 512, or the base file's)", &f.ctx);
  ap.add_int({"--chunks"}, "N", "score at most N chunks (default: all)", &f.chunks);
  ap.add_int({"-b", "--batch"}, "N", "tokens per forward step (default 512)", &f.batch);
  ap.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", &f.threads);
  ap.add_string({"--save-logits"}, "FILE",
                "save the log-probabilities of every scored position (llama.cpp's --kl-divergence-base format)",
                &f.save_path);
  ap.add_string({"--kl-base"}, "FILE", "compare with a base run saved by --save-logits on the same text: KL divergence",
                &f.base_path);
  ap.add_string({"--kv-type"}, "TYPE", "KV cache type: f32, f16, q8_0 or q4_0 (default f16)", &f.kv_type);
  add_load_flags(ap, &f.load_flags);
  ap.add_flag({"--float-act"}, "keep activations in float for quantized weights (default: 8-bit, as llama.cpp)",
              &f.float_act);
  add_amx_flag(ap, &f.amx_bf16);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  if (f.text_path.empty()) return ap.usage_error("-f TEXT is required");
  if (!f.save_path.empty() && !f.base_path.empty()) return ap.usage_error("give --save-logits or --kl-base, not both");
  if (f.ctx < 0 || (f.ctx > 0 && f.ctx < 4)) return ap.usage_error("--ctx must be at least 4");
  if (f.chunks == 0 || f.chunks < -1) return ap.usage_error("--chunks must be positive");
  if (f.batch <= 0) return ap.usage_error("--batch must be positive");
  Result<DType> kvt = parse_kv_type(f.kv_type);
  if (!kvt.ok()) return ap.usage_error(kvt.message());
  f.kv = kvt.value();
  Result<std::string> text = read_text_file(f.text_path);
  if (!text.ok()) return ap.usage_error(text.message());
  f.text = std::move(text.value());
  return -1;
}

void print_result(const PerplexityResult& r, long long ctx, const std::string& save_path) {
  std::printf("%lld chunks of %lld tokens, %lld positions scored\n", static_cast<long long>(r.n_chunk), ctx,
              static_cast<long long>(r.ppl.count));
  if (!save_path.empty()) std::printf("saved log-probabilities to %s\n", save_path.c_str());
  std::printf("Final estimate: PPL = %.4f +/- %.5f\n", r.ppl.ppl(), r.ppl.ppl_error());
  if (r.has_kl) print_kl(r.kl);
}

int cmd_perplexity(int argc, char** argv) {
  PerplexityFlags f;
  if (int rc = parse_perplexity_flags(argc, argv, f); rc >= 0) return rc;
  std::unique_ptr<LogProbReader> base;
  if (!f.base_path.empty()) {
    Result<std::unique_ptr<LogProbReader>> r = LogProbReader::open(f.base_path);
    if (!r.ok()) return fail("perplexity", r.message());
    base = std::move(r.value());
    if (f.ctx == 0) f.ctx = base->n_ctx();
  }
  if (f.ctx == 0) f.ctx = 512;

  Result<LoadedModel> loaded = load_model_cli(f.model_path, true, f.load_flags);
  if (!loaded.ok()) return fail("perplexity", loaded.message());
  const LlamaModel& model = *loaded->model;
  const Tokenizer& tok = *loaded->tokenizer;
  const double t_tok = now_seconds();
  // As llama-perplexity: one BOS at the start, no special-token parsing in the text.
  std::vector<int32_t> tokens = tok.encode(f.text, true, false);
  std::fprintf(stderr, "ll3 perplexity: %s: %zu tokens (%.2f s); chunks of %lld, scoring the last %lld of each\n",
               f.text_path.c_str(), tokens.size(), now_seconds() - t_tok, f.ctx, f.ctx - 1 - f.ctx / 2);

  EvaluatorOptions so;
  so.context = f.ctx;
  so.batch = f.batch;
  so.threads = f.threads;
  so.kv_type = f.kv;
  so.int8_activations = !f.float_act;
  so.amx_prompts = f.amx_bf16;
  Result<std::unique_ptr<SequenceEvaluator>> evaluator = SequenceEvaluator::create(model, so);
  if (!evaluator.ok()) return fail("perplexity", evaluator.message());

  PerplexityOptions opt;
  opt.n_ctx = f.ctx;
  opt.max_chunks = f.chunks;
  opt.save_path = f.save_path;
  opt.kl_base = base.get();
  const bool tty = isatty(STDERR_FILENO) != 0;
  Result<PerplexityResult> res = compute_perplexity(**evaluator, tokens, tok.bos_id(), opt,
                                                    [tty](const PerplexityProgress& p) { print_progress(p, tty); });
  if (!res.ok()) return fail("perplexity", res.message());
  print_result(*res, f.ctx, f.save_path);
  return 0;
}

}  // namespace

LL3_COMMAND("perplexity", "perplexity of a model over a text; KL divergence against a saved base", cmd_perplexity);

}  // namespace ll3::cli
