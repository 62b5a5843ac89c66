// ll3 quantize IN OUT TYPE [--threads N] [--imatrix FILE]: an F32 / F16 / BF16 GGUF or a Hugging
// Face directory in, a quantized GGUF out, with llama.cpp's per-tensor mixtures (q4_k_m, ...),
// optionally weighted by an importance matrix (llama-quantize --imatrix), or ll3's static W8A8
// (TYPE w8a8 --calib TEXT: cmd_quantize_w8a8.cpp). A progress bar on a terminal, plain lines
// when stderr is not one, and a summary of sizes and bits per weight.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "io/gguf.h"
#include "quant/quantize.h"
#include "quantize_w8a8.h"

namespace ll3::cli {

namespace {

std::string mib(uint64_t b) { return strprintf("%.2f MiB", b / 1048576.0); }

std::string mix_names() {
  std::string s;
  for (const quant::QuantMix& m : quant::quant_mixes()) s += (s.empty() ? "" : ", ") + std::string(m.name);
  for (const quant::QuantMix& m : quant::imatrix_only_mixes()) s += ", " + std::string(m.name) + " (needs --imatrix)";
  return s + ", w8a8 (static int8 weights and activations; needs --calib)";
}

int cmd_quantize(int argc, char** argv) {
  std::vector<std::string> pos;
  int threads = 0;
  std::string imatrix_path;
  std::vector<std::string> include, exclude;
  W8A8Flags w8a8;
  ArgParser ap("quantize",
               "ll3 quantize IN OUT.gguf TYPE [--threads N] [--imatrix FILE]\n"
               "       ll3 quantize IN OUT.gguf w8a8 --calib TEXT [-c 512] [--calibrator mse] [--smooth-alpha 0.5] ...",
               "Quantize an F32/F16/BF16 GGUF or a Hugging Face directory (IN). TYPE: " + mix_names() + ".");
  ap.add_int({"-t", "--threads"}, "N", "worker threads (default: all cores)", &threads);
  ap.add_string({"--imatrix"}, "FILE",
                "importance matrix (llama.cpp GGUF or .dat, from ll3 imatrix / llama-imatrix); required by q2_k_s",
                &imatrix_path);
  auto add_list = [&ap](const char* name, const char* help, std::vector<std::string>* out) {
    ap.add({name}, "NAME", help, [out](const std::string& v) {
      out->push_back(v);
      return std::string();
    });
  };
  add_list("--include-weights", "use the imatrix only for tensors whose name contains NAME (repeatable)", &include);
  add_list("--exclude-weights", "do not use the imatrix for tensors whose name contains NAME (repeatable)", &exclude);
  add_w8a8_flags(ap, &w8a8);
  ap.positionals("IN OUT TYPE", &pos, 3, 3);
  if (int rc = ap.parse(argc, argv); rc >= 0) return rc;
  const bool is_w8a8 = pos[2] == "w8a8" || pos[2] == "W8A8";
  const quant::QuantMix* mix = is_w8a8 ? nullptr : quant::find_quant_mix(pos[2]);
  if (mix == nullptr && !is_w8a8) return ap.usage_error("unknown type '" + pos[2] + "' (one of " + mix_names() + ")");
  if (std::string e = check_w8a8_flags(w8a8, is_w8a8); !e.empty()) return ap.usage_error(e);
  if (is_w8a8 && !imatrix_path.empty()) return ap.usage_error("--imatrix does not apply to w8a8");
  if (threads < 0) return ap.usage_error("--threads must be positive");
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (!include.empty() && !exclude.empty()) return ap.usage_error("give --include-weights or --exclude-weights, not both");
  if ((!include.empty() || !exclude.empty()) && imatrix_path.empty()) {
    return ap.usage_error("--include-weights / --exclude-weights need --imatrix");
  }
  quant::ImatrixWeights imatrix;
  if (!imatrix_path.empty()) {
    auto im = quant::load_imatrix_weights(imatrix_path);
    if (!im.ok()) {
      std::fprintf(stderr, "ll3 quantize: %s\n", im.message().c_str());
      return 1;
    }
    imatrix = std::move(im.value());
    quant::filter_imatrix_weights(imatrix, include, exclude);
    std::fprintf(stderr, "imatrix: %zu entries from %s (dataset '%s', %d chunks)\n", imatrix.weights.size(),
                 imatrix_path.c_str(), imatrix.dataset.c_str(), imatrix.chunks);
  }
  if (mix != nullptr && quant::mix_requires_imatrix(*mix) && imatrix.weights.empty()) {
    std::fprintf(stderr, "ll3 quantize: %s needs an importance matrix (--imatrix FILE)\n", mix->name);
    return 1;
  }

  // IN: a GGUF file or a Hugging Face directory.
  std::unique_ptr<GgufFile> gguf;
  quant::ModelSource src;
  if (std::filesystem::is_directory(pos[0])) {
    auto hf = quant::source_from_hf(pos[0]);
    if (!hf.ok()) {
      std::fprintf(stderr, "ll3 quantize: %s\n", hf.message().c_str());
      return 1;
    }
    src = std::move(hf.value());
  } else {
    auto in = GgufFile::open(pos[0]);
    if (!in.ok()) {
      std::fprintf(stderr, "ll3 quantize: %s\n", in.message().c_str());
      return 1;
    }
    gguf = std::move(in.value());
    src = quant::source_from_gguf(*gguf);
  }
  const bool tty = isatty(STDERR_FILENO) != 0;
  const double t0 = now_seconds();
  quant::QuantizeOptions opt;
  opt.threads = threads;
  opt.imatrix = &imatrix;
  opt.on_tensor = [tty, t0](const quant::QuantizeProgress& p) {
    const quant::TensorPlan& tp = *p.plan;
    const std::string what = tp.quantize ? strprintf("%s -> %s%s", std::string(dtype_name(tp.tensor->type)).c_str(),
                                                     std::string(dtype_name(tp.type)).c_str(),
                                                     tp.imatrix ? " (imatrix)" : "")
                                         : strprintf("%s (copied)", std::string(dtype_name(tp.type)).c_str());
    if (tty) {
      const int width = 30;
      const int filled = static_cast<int>(width * p.index / p.count);
      std::fprintf(stderr, "\r[%s%s] %3d%% %zu/%zu %.1fs  %-40.40s", std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), static_cast<int>(100 * p.index / p.count), p.index,
                   p.count, now_seconds() - t0, tp.tensor->name.c_str());
      if (p.index == p.count) std::fputc('\n', stderr);
    } else {
      std::fprintf(stderr, "[%zu/%zu] %-32s %-14s %s\n", p.index, p.count, tp.tensor->name.c_str(),
                   tp.tensor->shape_string().c_str(), what.c_str());
    }
    std::fflush(stderr);
  };
  auto sum = is_w8a8 ? run_w8a8_quantize(pos[0], src, pos[1], threads, w8a8, opt.on_tensor)
                     : quant::quantize_model(src, pos[1], *mix, opt);
  if (!sum.ok()) {
    std::fprintf(stderr, "ll3 quantize: %s\n", sum.message().c_str());
    return 1;
  }
  const quant::QuantizeSummary& s = *sum;
  std::printf("quantized %s -> %s (%s) in %.1fs with %d threads\n", pos[0].c_str(), pos[1].c_str(),
              is_w8a8 ? "w8a8" : mix->name,
              now_seconds() - t0, threads);
  std::printf("  tensors:  ");
  for (const auto& [type, count] : s.type_counts) std::printf(" %s x%d", std::string(dtype_name(type)).c_str(), count);
  std::printf("\n  weights:   %.3f M parameters\n", s.n_params / 1e6);
  std::printf("  size:      %s -> %s (%.1f%%), file %s\n", mib(s.bytes_in).c_str(), mib(s.bytes_out).c_str(),
              s.bytes_in ? 100.0 * s.bytes_out / s.bytes_in : 0.0, mib(s.file_bytes).c_str());
  std::printf("  bits/weight: %.2f -> %.2f\n", s.n_params ? 8.0 * s.bytes_in / s.n_params : 0.0, s.bits_per_weight());
  return 0;
}

}  // namespace

LL3_COMMAND("quantize", "quantize a GGUF or Hugging Face model (q4_k_m, q8_0, ...)", cmd_quantize);

}  // namespace ll3::cli
