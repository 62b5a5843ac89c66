// The W8A8 type of `ll3 quantize` (quantize_w8a8.h): the calibration text is tokenized once (BOS
// first) and cut into chunks of -c tokens, each chunk's first token replaced by BOS and
// evaluated from an empty cache, as `ll3 imatrix` does; the float model (float activations,
// so the statistics are the unquantized model's) runs over the chunks twice, its tap feeding
// quant::W8A8Calibration.
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "cli_common.h"
#include "eval/sequence_evaluator.h"
#include "quant/w8a8.h"
#include "quantize_w8a8.h"

namespace ll3::cli {

namespace {

constexpr long long kMinCtx = 16;

Result<DType> parse_output_type(const std::string& s) {
  if (s == "q8_0") return DType::Q8_0;
  if (s == "q6_k") return DType::Q6_K;
  if (s == "f16") return DType::F16;
  return Status::errorf("unknown --output-type '%s' (q8_0, q6_k or f16)", s.c_str());
}

Result<quant::W8A8Options> make_options(const W8A8Flags& f, int threads) {
  quant::W8A8Options o;
  Result<quant::Calibrator> c = quant::parse_calibrator(f.calibrator);
  if (!c.ok()) return c.status();
  o.calibrator = *c;
  Result<DType> t = parse_output_type(f.output_type);
  if (!t.ok()) return t.status();
  o.output_type = *t;
  o.percentile = f.percentile;
  o.smooth_alpha = f.smooth_alpha;
  o.max_static_loss_db = f.max_static_loss_db;
  o.threads = threads;
  o.calib_file = f.calib;
  LL3_RETURN_IF_ERROR(o.validate());
  return o;
}

// One pass over the chunks; the evaluator's tap feeds the calibration, `tap_error` holds its
// first error.
Status run_pass(SequenceEvaluator& ev, const std::vector<int32_t>& tokens, int64_t ctx, int64_t n_chunk, int32_t bos,
                const char* what, const Status& tap_error) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  std::vector<int32_t> chunk(static_cast<size_t>(ctx));
  const double t0 = now_seconds();
  for (int64_t c = 0; c < n_chunk; ++c) {
    chunk.assign(tokens.begin() + c * ctx, tokens.begin() + (c + 1) * ctx);
    if (bos >= 0) chunk[0] = bos;
    ev.truncate(0);
    LL3_RETURN_IF_ERROR(ev.eval(chunk, false));
    LL3_RETURN_IF_ERROR(tap_error);
    const double secs = now_seconds() - t0;
    std::fprintf(stderr, tty ? "\rw8a8 %s: chunk %lld/%lld (%.1f s)   " : "w8a8 %s: chunk %lld/%lld (%.1f s)\n", what,
                 static_cast<long long>(c + 1), static_cast<long long>(n_chunk), secs);
    if (tty && c + 1 == n_chunk) std::fputc('\n', stderr);
    std::fflush(stderr);
  }
  return ok_status();
}

// Both passes of the model at `in_path` over the text into `calib`.
Status calibrate(const std::string& in_path, const quant::ModelSource& src, const W8A8Flags& f, int threads,
                 quant::W8A8Calibration& calib) {
  Result<std::string> text = read_text_file(f.calib);
  if (!text.ok()) return text.status();
  Result<LoadedModel> loaded = load_model_cli(in_path, true);
  if (!loaded.ok()) return loaded.status();
  const LlamaModel& model = *loaded->model;
  int64_t ctx = f.ctx;
  if (model.config.context_length > 0 && ctx > model.config.context_length) {
    std::fprintf(stderr, "w8a8: -c %lld is past the model's context; using %lld\n", f.ctx,
                 static_cast<long long>(model.config.context_length));
    ctx = model.config.context_length;
  }
  const std::vector<int32_t> tokens = loaded->tokenizer->encode(*text, true, false);
  const int64_t n_max = static_cast<int64_t>(tokens.size()) / ctx;
  const int64_t n_chunk = f.chunks < 0 ? n_max : std::min<int64_t>(f.chunks, n_max);
  if (n_chunk == 0) {
    return Status::errorf("calibration text %s tokenizes to %zu tokens, less than one chunk of %lld", f.calib.c_str(),
                          tokens.size(), static_cast<long long>(ctx));
  }
  Status tap_error;
  EvaluatorOptions eo;
  eo.context = ctx;
  eo.batch = std::min<int64_t>(ctx, 512);
  eo.threads = threads;
  eo.int8_activations = false;  // calibrate on the float model
  eo.tap = [&calib, &tap_error](const char* name, int64_t layer, const float* x, int64_t rows, int64_t cols) {
    if (!tap_error.ok()) return;
    tap_error = calib.observe(name, layer, x, rows, cols);
  };
  Result<std::unique_ptr<SequenceEvaluator>> ev = SequenceEvaluator::create(model, eo);
  if (!ev.ok()) return ev.status();
  std::fprintf(stderr, "w8a8: calibrating on %s: %lld chunks of %lld tokens, %s\n", f.calib.c_str(),
               static_cast<long long>(n_chunk), static_cast<long long>(ctx),
               calib.needs_channel_pass() ? "two passes" : "one pass (no smoothing)");
  const int32_t bos = loaded->tokenizer->bos_id();
  if (calib.needs_channel_pass()) {
    LL3_RETURN_IF_ERROR(run_pass(**ev, tokens, ctx, n_chunk, bos, "channel maxima", tap_error));
    LL3_RETURN_IF_ERROR(calib.end_channel_pass(src));
  }
  LL3_RETURN_IF_ERROR(run_pass(**ev, tokens, ctx, n_chunk, bos, "statistics", tap_error));
  return calib.finish();
}

std::string db(double v) { return std::isinf(v) ? std::string("exact") : strprintf("%.1f dB", v); }

void print_report(const quant::W8A8Calibration& calib) {
  const quant::W8A8Options& o = calib.options();
  std::printf("w8a8 inputs: calibrator %s, smoothing alpha %.2f, static within %.1f dB of dynamic, %lld tokens\n",
              std::string(quant::calibrator_name(o.calibrator)).c_str(), o.smooth_alpha, o.max_static_loss_db,
              static_cast<long long>(calib.tokens()));
  std::printf("%5s  %-10s  %-20s  %-17s  %9s  %9s  %10s  %10s  %s\n", "layer", "input", "weights", "smoothing s",
              "max|x/s|", "clip", "SQNR stat", "SQNR dyn", "decision");
  for (const quant::W8A8InputReport& r : calib.report()) {
    std::string weights;
    for (const std::string& p : quant::w8a8_input_products(r.input)) weights += (weights.empty() ? "" : ",") + p;
    const std::string smooth = strprintf("%.3g..%.3g", r.smooth_min, r.smooth_max);
    std::printf("%5lld  %-10s  %-20s  %-17s  %9.4g  %9.4g  %10s  %10s  %s\n", static_cast<long long>(r.layer),
                quant::w8a8_input_name(r.input), weights.c_str(), smooth.c_str(), r.max_abs, r.clip,
                db(r.sqnr_static_db).c_str(), db(r.sqnr_dynamic_db).c_str(),
                r.is_static ? strprintf("static %.4g", r.scale).c_str() : "dynamic");
  }
  std::printf("w8a8: %zu static, %d dynamic inputs\n", calib.report().size() - calib.dynamic_count(),
              calib.dynamic_count());
}

}  // namespace

void add_w8a8_flags(ArgParser& ap, W8A8Flags* f) {
  // Each setter records that a W8A8 flag was given, for the error with another TYPE.
  auto str = [&ap, f](const char* name, const char* meta, const char* help, std::string* out) {
    ap.add({name}, meta, help, [f, out, name](const std::string& v) {
      if (f->seen.empty()) f->seen = name;
      *out = v;
      return std::string();
    });
  };
  auto num = [&ap, f](std::vector<std::string> names, const char* meta, const char* help, double* out) {
    const std::string first = names.back();
    ap.add(names, meta, help, [f, out, first](const std::string& v) {
      if (f->seen.empty()) f->seen = first;
      char* end = nullptr;
      *out = std::strtod(v.c_str(), &end);
      return end != v.c_str() && *end == '\0' && std::isfinite(*out) ? std::string() : first + " needs a number";
    });
  };
  str("--calib", "TEXT", "w8a8: calibration text (required)", &f->calib);
  str("--calibrator", "NAME", "w8a8: static scale rule: minmax, ema, percentile or mse (default mse)", &f->calibrator);
  num({"--percentile"}, "P", "w8a8: percentile of --calibrator percentile (default 99.99)", &f->percentile);
  num({"--smooth-alpha"}, "A", "w8a8: SmoothQuant alpha in [0, 1] (default 0.5; 0: no smoothing)", &f->smooth_alpha);
  num({"--max-static-loss-db"}, "D",
      "w8a8: keep an input dynamic when a static scale loses more than D dB of SQNR (default 3)",
      &f->max_static_loss_db);
  auto count = [&ap, f](std::vector<std::string> names, const char* meta, const char* help, long long* out) {
    const std::string first = names.back();
    ap.add(names, meta, help, [f, out, first](const std::string& v) {
      if (f->seen.empty()) f->seen = first;
      char* end = nullptr;
      *out = std::strtoll(v.c_str(), &end, 10);
      return end != v.c_str() && *end == '\0' && *out > 0 ? std::string() : first + " needs a positive integer";
    });
  };
  count({"-c", "--ctx"}, "N", "w8a8: tokens per calibration chunk (default 512, at most the model's context)", &f->ctx);
  count({"--calib-chunks"}, "N", "w8a8: calibrate on at most N chunks (default: all)", &f->chunks);
  str("--output-type", "TYPE", "w8a8: type of token_embd / output: q8_0, q6_k or f16 (default q8_0)", &f->output_type);
}

std::string check_w8a8_flags(const W8A8Flags& f, bool is_w8a8) {
  if (!is_w8a8) return f.seen.empty() ? std::string() : f.seen + " applies to TYPE w8a8 only";
  if (f.calib.empty()) return "w8a8 needs a calibration text: --calib TEXT";
  if (f.ctx < kMinCtx) return strprintf("--ctx must be at least %lld", kMinCtx);
  if (Result<quant::W8A8Options> o = make_options(f, 1); !o.ok()) return o.message();
  return std::string();
}

Result<quant::QuantizeSummary> run_w8a8_quantize(const std::string& in_path, const quant::ModelSource& src,
                                                 const std::string& out_path, int threads, const W8A8Flags& f,
                                                 std::function<void(const quant::QuantizeProgress&)> on_tensor) {
  Result<quant::W8A8Options> o = make_options(f, threads);
  if (!o.ok()) return o.status();
  o->on_tensor = std::move(on_tensor);
  Result<quant::W8A8Calibration> calib = quant::W8A8Calibration::create(src, *o);
  if (!calib.ok()) return calib.status();  // before the slow part: shapes W8A8 cannot take
  LL3_RETURN_IF_ERROR(calibrate(in_path, src, f, threads, *calib));
  Result<quant::QuantizeSummary> sum = quant::quantize_w8a8(src, out_path, *calib, *o);
  if (sum.ok()) print_report(*calib);
  return sum;
}

}  // namespace ll3::cli
