// Static W8A8 quantization, the offline half (`ll3 quantize IN OUT w8a8 --calib TEXT`): calibrate
// each matrix product's input on a text, smooth (SmoothQuant), quantize the block matrices to
// int8 with one scale per row, and write the GGUF that model/w8a8_format.h describes.
//
// A layer's products read four float inputs, named as the CPU runner's ActivationTap names them:
//
//   input       read by               smoothing s_j folded into (1/s_j)
//   attn_norm   attn_q, attn_k, attn_v   blk.N.attn_norm.weight[j]
//   kqv_out     attn_output              row j' of attn_v (see below)
//   ffn_norm    ffn_gate, ffn_up         blk.N.ffn_norm.weight[j]
//   ffn_swiglu  ffn_down                 row j of ffn_up (swiglu = silu(gate) * up is linear in up)
//
// and every weight reading the input gets column j times s_j, so the float model computes the
// same function. SmoothQuant's factor: s_j = max|X_j|^a / max|W_j|^(1-a), a = smooth_alpha,
// max|W_j| over the rows of all the matrices reading the input (source weights, before any
// smoothing), clamped to [1e-5, 1e5]; 1 where either maximum is 0.
// kqv_out: attention output channel (head h, dim d) is a convex combination of the V cache's
// channel (kv head h / group, d), so 1/s folds into that row of attn_v only if every query head
// sharing the KV head has the same s there: the maxima are taken over the group's heads first,
// one factor per attn_v row (W8A8Options::smooth_attn_output).
//
// Calibration runs the float model twice over the same text (W8A8Calibration): pass 1 gathers
// each input's per-channel max |x| (skipped without smoothing); then the factors; pass 2 gathers
// ActivationStats of the smoothed inputs x_j / s_j and the exact error of per-token dynamic
// quantization. Each input then gets a static scale from the calibrator, unless that scale's
// estimated error (histogram_quant_mse) is more than max_static_loss_db above the dynamic one,
// in which case it stays dynamic (input_scale 0: per token at run time).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "quant/calibrate.h"
#include "quant/model_source.h"
#include "quant/quantize.h"

namespace ll3 {
class ThreadPool;
}

namespace ll3::quant {

enum class W8A8Input : int { kAttnNorm = 0, kKqvOut = 1, kFfnNorm = 2, kFfnSwiglu = 3 };
constexpr int kW8A8InputCount = 4;

// The tap name: "attn_norm", "kqv_out", "ffn_norm", "ffn_swiglu".
const char* w8a8_input_name(W8A8Input in);
// The products reading the input, without "blk.N." and ".weight": {"attn_q", "attn_k", "attn_v"}, ...
const std::vector<std::string>& w8a8_input_products(W8A8Input in);
// The input a tap name reports; nullopt for every other tap.
std::optional<W8A8Input> w8a8_input_from_tap(std::string_view tap);

struct W8A8Options {
  Calibrator calibrator = Calibrator::kMse;  // how a static input scale is chosen
  double percentile = 99.99;                 // p of Calibrator::kPercentile, in (0, 100]
  double smooth_alpha = 0.5;                 // SmoothQuant's migration strength in [0, 1]; 0: none
  bool smooth_attn_output = true;            // smooth kqv_out too, into attn_v's rows (alpha > 0)
  // An input is static when the static scale's MSE is at most this many dB above per-token
  // dynamic quantization's (>= 0); infinity: always static.
  double max_static_loss_db = 3.0;
  DType output_type = DType::Q8_0;  // token_embd.weight and output.weight (a type quantize_rows writes)
  int threads = 1;                  // quantization and weight-maxima threads
  std::string calib_file;           // recorded as ll3.w8a8.calib_file
  ActivationStatsOptions stats;     // histogram bins and EMA decay of pass 2 (per_channel unused)
  std::function<void(const QuantizeProgress&)> on_tensor;  // after each source tensor is written

  // Says which option is out of range, else OK.
  Status validate() const;
};

// One input's calibration result (one row of the report).
struct W8A8InputReport {
  int64_t layer = 0;
  W8A8Input input = W8A8Input::kAttnNorm;
  int64_t cols = 0;
  float smooth_min = 1, smooth_max = 1;  // range of s_j
  double max_abs = 0;                    // max |x / s| seen
  double clip = 0;                       // the calibrator's clip c; 0 for an all-zero input
  float scale = 1;                       // c / 127 (1 for an all-zero input)
  // 10 log10(mean x^2 / MSE) of the smoothed input: static (histogram estimate at clip c) and
  // per-token dynamic (exact); +inf when the error is 0.
  double sqnr_static_db = 0, sqnr_dynamic_db = 0;
  bool is_static = true;
};

// s_j = x_max[j]^alpha / w_max[j]^(1 - alpha), clamped to [1e-5, 1e5]; 1 where x_max[j] or
// w_max[j] is 0, and everywhere when alpha is 0. Same lengths.
std::vector<float> smoothing_factors(const std::vector<float>& x_max, const std::vector<float>& w_max, double alpha);

// Checks that every layer of `src` has the seven products (readable type, 2-D, rows % 16 == 0,
// cols % 64 == 0, cols <= 32768, shapes agreeing with each other and the head counts) and both
// norms; the error names the tensor.
Status check_w8a8_source(const ModelSource& src);

// The calibration collector. Feed it the tap of the float model over the calibration text, once
// per pass (needs_channel_pass(): twice), with end_channel_pass() between and finish() after.
class W8A8Calibration {
 public:
  enum class Phase { kChannelMax, kStats, kDone };

  // Checks `src` (check_w8a8_source) and the options, and takes the shapes from it.
  static Result<W8A8Calibration> create(const ModelSource& src, const W8A8Options& options);

  // The taps the products read (see the top); any other tap, and layer -1, is ignored. rows
  // rows of cols floats. Errors: a layer out of range, a width that is not the input's, a
  // non-finite value, a call after finish(). Not thread-safe (the runner taps from one thread).
  Status observe(std::string_view tap, int64_t layer, const float* x, int64_t rows, int64_t cols);

  bool needs_channel_pass() const { return phase_ == Phase::kChannelMax; }
  // After pass 1: the smoothing factors, from the channel maxima and `src`'s weights (the model
  // create() saw). Error if an input saw no rows.
  Status end_channel_pass(const ModelSource& src);
  // After pass 2: the scales and the static / dynamic decisions. Error if an input saw no rows.
  Status finish();

  Phase phase() const { return phase_; }
  const W8A8Options& options() const { return options_; }
  int64_t n_layer() const { return n_layer_; }
  int64_t cols(W8A8Input in) const { return cols_[static_cast<int>(in)]; }
  // s_j of the input's columns (cols(in) values; all 1 without smoothing).
  const std::vector<float>& smoothing(int64_t layer, W8A8Input in) const { return slot(layer, in).smooth; }
  // The divisor of each attn_v row (kv_dim values): the kqv_out factor of its channel group.
  const std::vector<float>& v_row_divisors(int64_t layer) const { return v_div_[layer]; }
  // The input_scale tensor's value: the static scale, or 0 for a dynamic input (after finish()).
  float input_scale(int64_t layer, W8A8Input in) const;
  const std::vector<W8A8InputReport>& report() const { return report_; }
  int64_t tokens() const { return tokens_; }  // rows of pass 2 (layer 0's attn_norm)
  int dynamic_count() const;

 private:
  struct Slot {
    std::vector<float> channel_max;  // pass 1: (cols) max |x_j|
    std::vector<float> smooth;       // (cols) s_j
    std::vector<float> inv_smooth;   // (cols) 1 / s_j
    ActivationStats stats;           // pass 2, of x / s
    double dyn_err = 0, sum_sq = 0;  // pass 2: sum (x - dyn(x))^2, sum x^2
    int64_t rows = 0;                // rows seen in this pass
  };
  W8A8Calibration(const W8A8Options& options) : options_(options) {}
  Slot& slot(int64_t layer, W8A8Input in) { return slots_[layer * kW8A8InputCount + static_cast<int>(in)]; }
  const Slot& slot(int64_t layer, W8A8Input in) const { return slots_[layer * kW8A8InputCount + static_cast<int>(in)]; }
  Status check_rows_seen(const char* pass) const;
  void observe_stats(Slot& s, const float* x, int64_t rows, int64_t cols);
  void smooth_layer(const ModelSource& src, int64_t layer, ThreadPool& pool);

  W8A8Options options_;
  Phase phase_ = Phase::kChannelMax;
  int64_t n_layer_ = 0, n_head_ = 1, n_head_kv_ = 1, head_dim_ = 0;
  int64_t cols_[kW8A8InputCount] = {};
  std::vector<Slot> slots_;                // (n_layer, 4)
  std::vector<std::vector<float>> v_div_;  // (n_layer, kv_dim)
  std::vector<W8A8InputReport> report_;
  std::vector<float> buf_;    // pass 2: the smoothed batch
  std::vector<int8_t> qbuf_;  // pass 2: one quantized row
  int64_t tokens_ = 0;
};

// Writes the W8A8 GGUF of `in` (calibrated: calib.phase() == kDone, on the same model) to
// out_path: metadata copied plus general.file_type (w8a8_format::kFileType) and the ll3.w8a8.*
// keys; each blk product as X.weight (W8A8) + X.weight_scale + X.input_scale; attn_norm /
// ffn_norm F32 with 1/s folded in; token_embd / output at options.output_type; the rest copied.
// The alpha and calibrator recorded are the calibration's; output_type, threads, calib_file and
// on_tensor come from `options`.
Result<QuantizeSummary> quantize_w8a8(const ModelSource& in, const std::string& out_path, const W8A8Calibration& calib,
                                      const W8A8Options& options);

}  // namespace ll3::quant
