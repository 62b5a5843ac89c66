// `ll3 quantize IN OUT w8a8 --calib TEXT`: the flags of the W8A8 type and its driver (two
// calibration passes of the float model over the text, then quant::quantize_w8a8), called
// from cmd_quantize.cpp, which owns the positionals, --threads, the progress and the summary.
#pragma once

#include <functional>
#include <string>

#include "cli_args.h"
#include "quant/quantize.h"

namespace ll3::cli {

struct W8A8Flags {
  std::string calib;                 // --calib TEXT (required)
  std::string calibrator = "mse";    // --calibrator minmax|ema|percentile|mse
  double percentile = 99.99;         // --percentile P
  double smooth_alpha = 0.5;         // --smooth-alpha A (0: no smoothing)
  double max_static_loss_db = 3.0;   // --max-static-loss-db D
  long long ctx = 512;               // -c / --ctx N: tokens per calibration chunk
  long long chunks = -1;             // --calib-chunks N (-1: all)
  std::string output_type = "q8_0";  // --output-type q8_0|q6_k|f16
  std::string seen;                  // the first of these flags given, for the other types' error
};

void add_w8a8_flags(ArgParser& ap, W8A8Flags* f);
// "" when the flags are valid for the TYPE given (w8a8 or not), else the usage error.
std::string check_w8a8_flags(const W8A8Flags& f, bool is_w8a8);

// Calibrates `in_path` (GGUF or Hugging Face directory; `src` is the same model as the
// quantizer reads it) on the text, prints progress on stderr, writes out_path and prints the
// per-input report on stdout. The summary is the caller's to print.
Result<quant::QuantizeSummary> run_w8a8_quantize(const std::string& in_path, const quant::ModelSource& src,
                                                 const std::string& out_path, int threads, const W8A8Flags& f,
                                                 std::function<void(const quant::QuantizeProgress&)> on_tensor);

}  // namespace ll3::cli
