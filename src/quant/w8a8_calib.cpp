// W8A8Calibration: the two calibration passes, the smoothing factors between them and the
// static / dynamic decision after (quant/w8a8.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include "core/thread_pool.h"
#include "kernels/type_traits.h"
#include "kernels/w8a8.h"
#include "quant/w8a8.h"

namespace ll3::quant {

namespace {

constexpr float kMinSmooth = 1e-5f, kMaxSmooth = 1e5f;

const SourceTensor* find_tensor(const ModelSource& src, const std::string& name) {
  for (const SourceTensor& t : src.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string block_name(int64_t layer, const std::string& what) {
  return "blk." + std::to_string(layer) + "." + what + ".weight";
}

// The tensor, or an error naming it when it is missing or cannot be read as floats.
Result<const SourceTensor*> readable(const ModelSource& src, const std::string& name) {
  const SourceTensor* t = find_tensor(src, name);
  if (t == nullptr) return Status::errorf("w8a8: tensor '%s' is missing from %s", name.c_str(), src.origin.c_str());
  const TypeTraits* tr = type_traits(t->type);
  if (tr == nullptr || tr->to_float == nullptr) {
    return Status::errorf("w8a8: tensor '%s' has type %s, which ll3 cannot read", name.c_str(),
                          std::string(dtype_name(t->type)).c_str());
  }
  return t;
}

// Running max over rows of |W[r][j]| into w_max (t.ne[0] columns), rows split over the pool.
void column_max(const SourceTensor& t, ThreadPool& pool, std::vector<float>& w_max) {
  const int64_t cols = t.ne[0], rows = t.n_rows();
  const size_t row_bytes = dtype_row_bytes(t.type, cols);
  const TypeTraits* tr = type_traits(t.type);
  std::mutex mu;
  pool.parallel_for_dynamic(rows, 64, [&](int64_t r0, int64_t r1, int) {
    std::vector<float> row(cols), local(cols, 0.0f);
    for (int64_t r = r0; r < r1; ++r) {  // the row order does not matter here: row_map is ignored
      tr->to_float(t.data + r * row_bytes, row.data(), cols);
      for (int64_t j = 0; j < cols; ++j) local[j] = std::max(local[j], std::fabs(row[j]));
    }
    std::lock_guard<std::mutex> lock(mu);
    for (int64_t j = 0; j < cols; ++j) w_max[j] = std::max(w_max[j], local[j]);
  });
}

// Query channel (h, d) of the attention output reads V channel (h / group, d). group_max: per
// query channel (n_kv * group * hd) -> the max over each V channel's heads (n_kv * hd);
// expand_groups: per V channel -> per query channel.
std::vector<float> group_max(const std::vector<float>& per_channel, int64_t n_kv, int64_t group, int64_t hd) {
  std::vector<float> out(n_kv * hd, 0.0f);
  for (int64_t h = 0; h < n_kv * group; ++h) {
    for (int64_t d = 0; d < hd; ++d) {
      float& o = out[(h / group) * hd + d];
      o = std::max(o, per_channel[h * hd + d]);
    }
  }
  return out;
}
std::vector<float> expand_groups(const std::vector<float>& per_group, int64_t n_head, int64_t group, int64_t hd) {
  std::vector<float> out(n_head * hd);
  for (int64_t h = 0; h < n_head; ++h) {
    for (int64_t d = 0; d < hd; ++d) out[h * hd + d] = per_group[(h / group) * hd + d];
  }
  return out;
}

double sqnr_db(double signal, double noise) {
  if (noise <= 0.0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / noise);
}

}  // namespace

// ---- Names -------------------------------------------------------------------------------------

const char* w8a8_input_name(W8A8Input in) {
  static const char* const kNames[] = {"attn_norm", "kqv_out", "ffn_norm", "ffn_swiglu"};
  return kNames[static_cast<int>(in)];
}

const std::vector<std::string>& w8a8_input_products(W8A8Input in) {
  static const std::vector<std::string> kProducts[] = {
      {"attn_q", "attn_k", "attn_v"}, {"attn_output"}, {"ffn_gate", "ffn_up"}, {"ffn_down"}};
  return kProducts[static_cast<int>(in)];
}

std::optional<W8A8Input> w8a8_input_from_tap(std::string_view tap) {
  for (int i = 0; i < kW8A8InputCount; ++i) {
    if (tap == w8a8_input_name(static_cast<W8A8Input>(i))) return static_cast<W8A8Input>(i);
  }
  return std::nullopt;
}

Status W8A8Options::validate() const {
  if (!(smooth_alpha >= 0.0 && smooth_alpha <= 1.0)) {
    return Status::errorf("w8a8: smoothing alpha %g is outside [0, 1]", smooth_alpha);
  }
  if (!(percentile > 0.0 && percentile <= 100.0)) {
    return Status::errorf("w8a8: percentile %g is outside (0, 100]", percentile);
  }
  if (!(max_static_loss_db >= 0.0)) {
    return Status::errorf("w8a8: max static loss %g dB is negative", max_static_loss_db);
  }
  const TypeTraits* out = type_traits(output_type);
  if (out == nullptr || out->from_float == nullptr) {
    return Status::errorf("w8a8: ll3 cannot write %s for the embedding / output",
                          std::string(dtype_name(output_type)).c_str());
  }
  if (threads < 1) return Status::errorf("w8a8: %d threads", threads);
  return stats.validate();
}

std::vector<float> smoothing_factors(const std::vector<float>& x_max, const std::vector<float>& w_max, double alpha) {
  std::vector<float> s(x_max.size(), 1.0f);
  if (alpha <= 0.0) return s;
  for (size_t j = 0; j < s.size(); ++j) {
    if (x_max[j] <= 0.0f || w_max[j] <= 0.0f) continue;
    const double v =
        std::pow(static_cast<double>(x_max[j]), alpha) / std::pow(static_cast<double>(w_max[j]), 1.0 - alpha);
    s[j] = std::clamp(static_cast<float>(v), kMinSmooth, kMaxSmooth);
  }
  return s;
}

// ---- The source's shapes -----------------------------------------------------------------------

Status check_w8a8_source(const ModelSource& src) {
  if (src.n_layer <= 0) return Status::errorf("w8a8: %s has no layers (block_count)", src.origin.c_str());
  if (src.n_head <= 0 || src.n_head_kv <= 0 || src.n_head % src.n_head_kv != 0) {
    return Status::errorf("w8a8: %s has %lld heads and %lld KV heads", src.origin.c_str(),
                          static_cast<long long>(src.n_head), static_cast<long long>(src.n_head_kv));
  }
  for (int64_t l = 0; l < src.n_layer; ++l) {
    int64_t rows[7], cols[7];
    const char* const kNames[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    for (int i = 0; i < 7; ++i) {
      const std::string name = block_name(l, kNames[i]);
      Result<const SourceTensor*> t = readable(src, name);
      if (!t.ok()) return t.status();
      const SourceTensor& m = **t;
      rows[i] = m.n_rows();
      cols[i] = m.ne[0];
      if (m.n_dims != 2 || rows[i] % kernels::kW8A8PanelRows != 0 || cols[i] % kernels::kW8A8KAlign != 0 ||
          cols[i] > kernels::kW8A8MaxK) {
        return Status::errorf(
            "w8a8: tensor '%s' is %s: W8A8 needs a 2-D matrix with rows %% %lld == 0, columns "
            "%% %lld == 0 and at most %lld columns",
            name.c_str(), m.shape_string().c_str(), static_cast<long long>(kernels::kW8A8PanelRows),
            static_cast<long long>(kernels::kW8A8KAlign), static_cast<long long>(kernels::kW8A8MaxK));
      }
    }
    const int64_t dim = cols[0], q_dim = rows[0], kv_dim = rows[2], ffn = rows[5];
    const int64_t hd = q_dim / src.n_head;
    const bool ok = cols[1] == dim && cols[2] == dim && rows[1] == kv_dim && cols[3] == q_dim && rows[3] == dim &&
                    cols[4] == dim && cols[5] == dim && rows[4] == ffn && cols[6] == ffn && rows[6] == dim &&
                    hd * src.n_head == q_dim && hd * src.n_head_kv == kv_dim;
    if (!ok) {
      std::string shapes;
      for (int i = 0; i < 7; ++i) {
        shapes += strprintf("%s%s %lldx%lld", i ? ", " : "", kNames[i], static_cast<long long>(rows[i]),
                            static_cast<long long>(cols[i]));
      }
      return Status::errorf(
          "w8a8: the matrices of layer %lld do not fit together (rows x cols: %s; %lld heads, %lld "
          "KV heads)",
          static_cast<long long>(l), shapes.c_str(), static_cast<long long>(src.n_head),
          static_cast<long long>(src.n_head_kv));
    }
    for (const char* norm : {"attn_norm", "ffn_norm"}) {
      Result<const SourceTensor*> t = readable(src, block_name(l, norm));
      if (!t.ok()) return t.status();
      if ((*t)->n_elements() != dim) {
        return Status::errorf("w8a8: tensor '%s' has %lld values for a width of %lld", block_name(l, norm).c_str(),
                              static_cast<long long>((*t)->n_elements()), static_cast<long long>(dim));
      }
    }
  }
  return ok_status();
}

// ---- Calibration -------------------------------------------------------------------------------

Result<W8A8Calibration> W8A8Calibration::create(const ModelSource& src, const W8A8Options& options) {
  LL3_RETURN_IF_ERROR(options.validate());
  LL3_RETURN_IF_ERROR(check_w8a8_source(src));
  W8A8Calibration c(options);
  c.n_layer_ = src.n_layer;
  c.n_head_ = src.n_head;
  c.n_head_kv_ = src.n_head_kv;
  const SourceTensor& q = *find_tensor(src, block_name(0, "attn_q"));
  const SourceTensor& down = *find_tensor(src, block_name(0, "ffn_down"));
  const int64_t dim = q.ne[0], q_dim = q.n_rows(), ffn = down.ne[0];
  c.head_dim_ = q_dim / src.n_head;
  c.cols_[0] = dim, c.cols_[1] = q_dim, c.cols_[2] = dim, c.cols_[3] = ffn;
  ActivationStatsOptions so = options.stats;
  so.per_channel = false;
  for (int64_t l = 0; l < c.n_layer_; ++l) {
    for (int i = 0; i < kW8A8InputCount; ++i) {
      Slot s{{}, {}, {}, ActivationStats(so)};
      s.channel_max.assign(c.cols_[i], 0.0f);
      s.smooth.assign(c.cols_[i], 1.0f);
      s.inv_smooth.assign(c.cols_[i], 1.0f);
      c.slots_.push_back(std::move(s));
    }
    c.v_div_.emplace_back(src.n_head_kv * c.head_dim_, 1.0f);
  }
  if (options.smooth_alpha <= 0.0) c.phase_ = Phase::kStats;  // factors all 1: no first pass
  return c;
}

Status W8A8Calibration::observe(std::string_view tap, int64_t layer, const float* x, int64_t rows, int64_t cols) {
  const std::optional<W8A8Input> in = w8a8_input_from_tap(tap);
  if (!in || layer < 0 || rows <= 0) return ok_status();
  if (phase_ == Phase::kDone) return Status::error("w8a8: calibration data after the calibration was finished");
  if (layer >= n_layer_) {
    return Status::errorf("w8a8: activations of layer %lld, but the model has %lld layers",
                          static_cast<long long>(layer), static_cast<long long>(n_layer_));
  }
  if (cols != cols_[static_cast<int>(*in)]) {
    return Status::errorf("w8a8: tap '%s' of layer %lld has %lld columns, but its weights read %lld",
                          std::string(tap).c_str(), static_cast<long long>(layer), static_cast<long long>(cols),
                          static_cast<long long>(cols_[static_cast<int>(*in)]));
  }
  Slot& s = slot(layer, *in);
  s.rows += rows;
  if (phase_ == Phase::kChannelMax) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * cols;
      for (int64_t j = 0; j < cols; ++j) {
        if (!std::isfinite(xr[j])) {
          s.rows -= rows;
          return Status::errorf("w8a8: blk.%lld %s: non-finite activation %g at row %lld, column %lld",
                                static_cast<long long>(layer), std::string(tap).c_str(), xr[j],
                                static_cast<long long>(r), static_cast<long long>(j));
        }
        s.channel_max[j] = std::max(s.channel_max[j], std::fabs(xr[j]));
      }
    }
    return ok_status();
  }
  // Pass 2: the statistics of x / s, what the smoothed model's product reads.
  buf_.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) buf_[r * cols + j] = x[r * cols + j] * s.inv_smooth[j];
  }
  if (Status st = s.stats.observe(buf_.data(), rows, cols); !st.ok()) {
    s.rows -= rows;
    return st.with_context(strprintf("w8a8: blk.%lld %s: ", static_cast<long long>(layer), std::string(tap).c_str()));
  }
  observe_stats(s, buf_.data(), rows, cols);
  if (layer == 0 && *in == W8A8Input::kAttnNorm) tokens_ += rows;
  return ok_status();
}

// The exact error of per-token dynamic quantization (kernels::w8a8_quantize_dynamic, as the
// runtime does it) of each row, and the signal power.
void W8A8Calibration::observe_stats(Slot& s, const float* x, int64_t rows, int64_t cols) {
  qbuf_.resize(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float scale = kernels::w8a8_quantize_dynamic(xr, cols, qbuf_.data());
    double err = 0.0, sq = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      const double d = static_cast<double>(xr[j]) - static_cast<double>(qbuf_[j]) * scale;
      err += d * d;
      sq += static_cast<double>(xr[j]) * xr[j];
    }
    s.dyn_err += err;
    s.sum_sq += sq;
  }
}

Status W8A8Calibration::check_rows_seen(const char* pass) const {
  for (int64_t l = 0; l < n_layer_; ++l) {
    for (int i = 0; i < kW8A8InputCount; ++i) {
      if (slot(l, static_cast<W8A8Input>(i)).rows == 0) {
        return Status::errorf("w8a8: no activations of blk.%lld %s in the %s calibration pass",
                              static_cast<long long>(l), w8a8_input_name(static_cast<W8A8Input>(i)), pass);
      }
    }
  }
  return ok_status();
}

Status W8A8Calibration::end_channel_pass(const ModelSource& src) {
  if (phase_ != Phase::kChannelMax) return Status::error("w8a8: end_channel_pass() outside the first pass");
  LL3_RETURN_IF_ERROR(check_rows_seen("first"));
  LL3_RETURN_IF_ERROR(check_w8a8_source(src));
  if (src.n_layer != n_layer_ || src.n_head != n_head_ || src.n_head_kv != n_head_kv_) {
    return Status::errorf("w8a8: %s is not the model the calibration was made for", src.origin.c_str());
  }
  ThreadPool pool(options_.threads);
  for (int64_t l = 0; l < n_layer_; ++l) smooth_layer(src, l, pool);
  for (Slot& s : slots_) {
    for (size_t j = 0; j < s.smooth.size(); ++j) s.inv_smooth[j] = 1.0f / s.smooth[j];
    s.rows = 0;
    s.channel_max = {};
  }
  phase_ = Phase::kStats;
  return ok_status();
}

// The factors of one layer's inputs from the channel maxima and the source weights' column maxima.
void W8A8Calibration::smooth_layer(const ModelSource& src, int64_t l, ThreadPool& pool) {
  for (int i = 0; i < kW8A8InputCount; ++i) {
    const W8A8Input in = static_cast<W8A8Input>(i);
    if (in == W8A8Input::kKqvOut && !options_.smooth_attn_output) continue;
    Slot& s = slot(l, in);
    std::vector<float> w_max(cols_[i], 0.0f);
    for (const std::string& p : w8a8_input_products(in)) column_max(*find_tensor(src, block_name(l, p)), pool, w_max);
    if (in != W8A8Input::kKqvOut) {
      s.smooth = smoothing_factors(s.channel_max, w_max, options_.smooth_alpha);
      continue;
    }
    // One factor per attn_v row: the maxima over the query heads sharing each KV head.
    const int64_t group = n_head_ / n_head_kv_;
    v_div_[l] = smoothing_factors(group_max(s.channel_max, n_head_kv_, group, head_dim_),
                                  group_max(w_max, n_head_kv_, group, head_dim_), options_.smooth_alpha);
    s.smooth = expand_groups(v_div_[l], n_head_, group, head_dim_);
  }
}

Status W8A8Calibration::finish() {
  if (phase_ != Phase::kStats) {
    return Status::error(phase_ == Phase::kDone ? "w8a8: finish() called twice"
                                                : "w8a8: finish() before end_channel_pass()");
  }
  LL3_RETURN_IF_ERROR(check_rows_seen("second"));
  const double slack = std::pow(10.0, options_.max_static_loss_db / 10.0);
  report_.clear();
  for (int64_t l = 0; l < n_layer_; ++l) {
    for (int i = 0; i < kW8A8InputCount; ++i) {
      const W8A8Input in = static_cast<W8A8Input>(i);
      const Slot& s = slot(l, in);
      W8A8InputReport r;
      r.layer = l;
      r.input = in;
      r.cols = cols_[i];
      r.smooth_min = *std::min_element(s.smooth.begin(), s.smooth.end());
      r.smooth_max = *std::max_element(s.smooth.begin(), s.smooth.end());
      r.max_abs = s.stats.max_abs();
      const double n = static_cast<double>(s.stats.count());
      if (s.stats.max_abs() == 0.0f) {  // a dead input: any scale is exact
        r.sqnr_static_db = r.sqnr_dynamic_db = std::numeric_limits<double>::infinity();
        report_.push_back(r);
        continue;
      }
      Result<double> clip = choose_clip(s.stats, options_.calibrator, options_.percentile);
      if (!clip.ok()) {
        return clip.status().with_context(
            strprintf("w8a8: blk.%lld %s: ", static_cast<long long>(l), w8a8_input_name(in)));
      }
      r.clip = *clip;
      r.scale = static_cast<float>(*clip / kInt8Max);
      const double static_mse = histogram_quant_mse(s.stats, *clip), dyn_mse = s.dyn_err / n;
      r.sqnr_static_db = sqnr_db(s.sum_sq / n, static_mse);
      r.sqnr_dynamic_db = sqnr_db(s.sum_sq / n, dyn_mse);
      r.is_static = std::isinf(slack) || static_mse <= dyn_mse * slack;
      report_.push_back(r);
    }
  }
  phase_ = Phase::kDone;
  return ok_status();
}

float W8A8Calibration::input_scale(int64_t layer, W8A8Input in) const {
  if (phase_ != Phase::kDone) return 0.0f;
  const W8A8InputReport& r = report_[layer * kW8A8InputCount + static_cast<int>(in)];
  return r.is_static ? r.scale : 0.0f;
}

int W8A8Calibration::dynamic_count() const {
  int n = 0;
  for (const W8A8InputReport& r : report_) n += r.is_static ? 0 : 1;
  return n;
}

}  // namespace ll3::quant
