// ll3 imatrix: the importance matrix of a model over a calibration text, with llama-imatrix's
// conventions so that the two tools' files and numbers agree: the text is tokenized once (BOS
// first), cut into chunks of -c tokens, each chunk's first token replaced by BOS and evaluated
// from an empty cache; every blk.* matrix product's float input rows are summed (x^2, x, and
// the token count), batches under 16 rows left out as llama.cpp leaves them; the running
// perplexity scores the second half of each chunk. Files: GGUF or legacy .dat
// (src/quant/imatrix.h), read back with --in-file to combine.
#include <unistd.h>

#include <cstdio>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "eval/perplexity.h"
#include "eval/sequence_evaluator.h"
#include "io/gguf.h"
#include "quant/imatrix.h"

namespace ll3::cli {

namespace {

// llama-imatrix ignores matrix products over fewer rows ("why are small batches ignored?" in
// its source): kept, so that counts agree for any batch split.
constexpr int64_t kMinRows = 16;

struct ImatrixFlags {
  std::string model_path, text_path, out_path = "imatrix.gguf", format, kv_type = "f16";
  std::vector<std::string> in_files;
  long long ctx = 0, chunks = -1, batch = 0;  // ctx 0: 512, or the inputs' when combining
  int threads = 0;
  bool parse_special = false, process_output = false, no_ppl = false, float_act = false;
  LoadFlags load_flags;
  DType kv = DType::F16;
};

int parse_imatrix_flags(int argc, char** argv, ImatrixFlags& f) {
  ArgParser ap("imatrix",
               "ll3 imatrix -m MODEL -f TEXT [-c 512] [--chunks N] [--parse-special] [-o imatrix.gguf] [-t N] "
               "[--output-format gguf|dat] [--in-file FILE ...]",
               "Importance matrix (per input column sums of x^2 of every blk.* weight) over a calibration text, "
               "as llama-imatrix computes it; GGUF or legacy .dat files that both tools read.");
  ap.add_string({"-m", "--model"}, "MODEL", "GGUF file or Hugging Face directory (default: the default model)",
                &f.model_path);
  ap.add_string({"-f", "--file"}, "TEXT", "calibration text (bytes as they are)", &f.text_path);
  ap.add_int({"-c", "--ctx"}, "N", "tokens per chunk (default 512; when only combining, the first GGUF input's)", &f.ctx);
  ap.add_int({"--chunks"}, "N", "process at most N chunks (default: all)", &f.chunks);
  ap.add_int({"-b", "--batch"}, "N", "tokens per forward step (default min(ctx, 512))", &f.batch);
  ap.add_int({"-t", "--threads"}, "N", "threads (default: all cores)", &f.threads);
  ap.add_string({"-o", "--output"}, "FILE", "output file (default imatrix.gguf)", &f.out_path);
  ap.add_string({"--output-format"}, "FMT", "gguf or dat (default: dat for a .dat name, else gguf)", &f.format);
  ap.add({"--in-file"}, "FILE", "an imatrix to start from (repeatable: files are combined)",
         [&f](const std::string& v) {
           f.in_files.push_back(v);
           return std::string();
         });
  ap.add_flag({"--parse-special"}, "parse special tokens written in the text (<|eot_id|>...)", &f.parse_special);
  ap.add_flag({"--process-output"}, "collect output.weight too (llama-imatrix leaves it out by default)",
              &f.process_output);
  ap.add_flag({"--no-ppl"}, "do not compute the perplexity", &f.no_ppl);
  ap.add_string({"--kv-type"}, "TYPE", "KV cache type: f32, f16, q8_0 or q4_0 (default f16)", &f.kv_type);
  add_load_flags(ap, &f.load_flags);
  ap.add_flag({"--float-act"}, "keep activations in float for quantized weights (default: 8-bit, as llama.cpp)",
              &f.float_act);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  if (f.text_path.empty() && f.in_files.empty()) return ap.usage_error("give -f TEXT, or --in-file files to combine");
  if (f.ctx != 0 && f.ctx < kMinRows) return ap.usage_error("--ctx must be at least 16");
  if (f.chunks == 0 || f.chunks < -1) return ap.usage_error("--chunks must be positive");
  if (f.batch < 0) return ap.usage_error("--batch must be positive");
  if (!f.format.empty() && f.format != "gguf" && f.format != "dat") {
    return ap.usage_error("--output-format must be gguf or dat");
  }
  Result<DType> kvt = parse_kv_type(f.kv_type);
  if (!kvt.ok()) return ap.usage_error(kvt.message());
  f.kv = kvt.value();
  return -1;
}

void print_progress(int64_t chunk, int64_t n_chunk, const PplAccum* ppl, double seconds, bool tty) {
  const double eta = seconds / chunk * (n_chunk - chunk);
  const std::string p = ppl != nullptr ? strprintf("  PPL %.4f", ppl->ppl()) : std::string();
  if (tty) {
    std::fprintf(stderr, "\rchunk %lld/%lld%s  %.2f s/chunk  ETA %.0f s   ", static_cast<long long>(chunk),
                 static_cast<long long>(n_chunk), p.c_str(), seconds / chunk, eta);
    if (chunk == n_chunk) std::fputc('\n', stderr);
  } else {
    std::fprintf(stderr, "chunk %lld/%lld:%s (%.1f s, ETA %.0f s)\n", static_cast<long long>(chunk),
                 static_cast<long long>(n_chunk), p.c_str(), seconds, eta);
  }
  std::fflush(stderr);
}

// Evaluates the chunks, adding every matrix input into `im`. Returns the perplexity sums.
Result<PplAccum> collect(const LlamaModel& model, const std::vector<int32_t>& tokens, int32_t bos,
                         const ImatrixFlags& f, Imatrix& im) {
  const int64_t ctx = f.ctx;
  const int64_t n_chunk_max = static_cast<int64_t>(tokens.size()) / ctx;
  const int64_t n_chunk = f.chunks < 0 ? n_chunk_max : std::min<int64_t>(f.chunks, n_chunk_max);
  // The separate output matrix only (a tied one is token_embd, which llama-imatrix skips too).
  const bool want_output = f.process_output && model.is_gguf() && model.gguf()->find_tensor("output.weight") != nullptr;

  EvaluatorOptions so;
  so.context = ctx;
  so.batch = f.batch > 0 ? f.batch : std::min<long long>(ctx, 512);
  so.threads = f.threads;
  so.kv_type = f.kv;
  so.int8_activations = !f.float_act;
  // The tap sees each matrix product's input before any 8-bit quantization of it, as llama.cpp's
  // callback sees the float src1.
  so.tap = [&im, want_output](const char* name, int64_t layer, const float* x, int64_t rows, int64_t cols) {
    if (rows < kMinRows || (layer < 0 && !want_output)) return;
    for (const std::string& w : imatrix_weights_for_tap(name, layer)) im.add_rows(w, x, rows, cols);
  };
  Result<std::unique_ptr<SequenceEvaluator>> ev = SequenceEvaluator::create(model, so);
  if (!ev.ok()) return ev.status();

  std::fprintf(stderr, "ll3 imatrix: %lld chunks of %lld tokens, batch %lld\n", static_cast<long long>(n_chunk),
               static_cast<long long>(ctx), static_cast<long long>(so.batch));
  const bool tty = isatty(STDERR_FILENO) != 0;
  const int64_t V = model.config.n_vocab, first = ctx / 2;
  std::vector<int32_t> chunk(static_cast<size_t>(ctx));
  PplAccum ppl;
  const double t0 = now_seconds();
  for (int64_t c = 0; c < n_chunk; ++c) {
    const int32_t* src = tokens.data() + c * ctx;
    chunk.assign(src, src + ctx);
    if (bos >= 0) chunk[0] = bos;
    (*ev)->truncate(0);
    LL3_RETURN_IF_ERROR((*ev)->eval(chunk, true));
    if (!f.no_ppl) {
      const float* logits = (*ev)->logits().data();
      for (int64_t i = first; i < ctx - 1; ++i) ppl.add(token_nll(logits + i * V, V, src[i + 1]));
    }
    print_progress(c + 1, n_chunk, f.no_ppl ? nullptr : &ppl, now_seconds() - t0, tty);
  }
  const double secs = now_seconds() - t0;
  std::fprintf(stderr, "ll3 imatrix: %lld tokens in %.2f s (%.1f tokens/s)\n", static_cast<long long>(n_chunk * ctx),
               secs, static_cast<double>(n_chunk * ctx) / secs);
  return ppl;
}

// Tokenizes the text and runs the collection into `im`.
int compute(const ImatrixFlags& f, Imatrix& im) {
  Result<std::string> text = read_text_file(f.text_path);
  if (!text.ok()) return fail("imatrix", text.message());
  Result<LoadedModel> loaded = load_model_cli(f.model_path, true, f.load_flags);
  if (!loaded.ok()) return fail("imatrix", loaded.message());
  const Tokenizer& tok = *loaded->tokenizer;
  // As llama-imatrix: one BOS at the start, special tokens as text unless --parse-special.
  std::vector<int32_t> tokens = tok.encode(*text, true, f.parse_special);
  std::fprintf(stderr, "ll3 imatrix: %s: %zu tokens\n", f.text_path.c_str(), tokens.size());
  if (static_cast<long long>(tokens.size()) < 2 * f.ctx) {
    return fail("imatrix", strprintf("%s tokenizes to %zu tokens; a context of %lld needs at least %lld",
                                     f.text_path.c_str(), tokens.size(), f.ctx, 2 * f.ctx));
  }
  Imatrix fresh;
  fresh.chunk_size = f.ctx;
  fresh.datasets.push_back(f.text_path);
  Result<PplAccum> ppl = collect(*loaded->model, tokens, tok.bos_id(), f, fresh);
  if (!ppl.ok()) return fail("imatrix", ppl.message());
  if (!f.no_ppl) std::printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl->ppl(), ppl->ppl_error());
  if (Status s = im.merge(fresh); !s.ok()) return fail("imatrix", s.message());
  return 0;
}

int cmd_imatrix(int argc, char** argv) {
  ImatrixFlags f;
  if (int rc = parse_imatrix_flags(argc, argv, f); rc >= 0) return rc;
  Imatrix im;  // chunk_size 0: the first GGUF input's, if any
  for (const std::string& path : f.in_files) {
    Result<Imatrix> in = Imatrix::load(path, f.ctx);
    if (!in.ok()) return fail("imatrix", in.message());
    std::fprintf(stderr, "ll3 imatrix: loaded %zu entries from %s\n", in->entries.size(), path.c_str());
    if (Status s = im.merge(*in); !s.ok()) return fail("imatrix", s.message());
  }
  if (f.ctx == 0) f.ctx = f.text_path.empty() && im.chunk_size > 0 ? im.chunk_size : 512;
  if (!f.text_path.empty()) {
    if (int rc = compute(f, im); rc != 0) return rc;
  }
  im.chunk_size = f.ctx;  // the chunk size this run's counts are measured in, as llama-imatrix writes it
  im.update_chunk_count();
  const ImatrixFormat fmt = f.format.empty()   ? imatrix_format_for(f.out_path)
                            : f.format == "dat" ? ImatrixFormat::kDat
                                                : ImatrixFormat::kGguf;
  if (Status s = im.save(f.out_path, fmt); !s.ok()) return fail("imatrix", s.message());
  std::printf("saved %zu entries (%lld chunks of %lld) to %s (%s)\n", im.entries.size(),
              static_cast<long long>(im.chunk_count), static_cast<long long>(im.chunk_size), f.out_path.c_str(),
              fmt == ImatrixFormat::kDat ? "dat" : "gguf");
  return 0;
}

}  // namespace

LL3_COMMAND("imatrix", "importance matrix over a calibration text (llama-imatrix's GGUF / .dat files)", cmd_imatrix);

}  // namespace ll3::cli
