// quantize_w8a8: the W8A8 GGUF of a calibrated model (quant/w8a8.h, model/w8a8_format.h).
#include "quant/w8a8.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>

#include "core/check.h"
#include "core/thread_pool.h"
#include "io/gguf_writer.h"
#include "kernels/type_traits.h"
#include "kernels/w8a8.h"
#include "model/w8a8_format.h"

namespace ll3::quant {

namespace {

// What a source tensor becomes.
enum class Role { kCopy, kMatrix, kNorm, kOutputType };

struct TensorRole {
  Role role = Role::kCopy;
  int64_t layer = -1;
  std::string product;  // kMatrix: "attn_q", ...; kNorm: "attn_norm" / "ffn_norm"
};

TensorRole role_of(const SourceTensor& t) {
  if (t.name == "token_embd.weight" || t.name == "output.weight") return {Role::kOutputType, -1, {}};
  // blk.N.<what>.weight
  const std::string& n = t.name;
  const std::string suffix = ".weight";
  if (n.rfind("blk.", 0) != 0 || n.size() <= suffix.size() ||
      n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return {};
  }
  const size_t dot = n.find('.', 4);
  if (dot == std::string::npos || dot == 4) return {};
  const std::string num = n.substr(4, dot - 4);
  if (num.size() > 9 || !std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; })) return {};
  const std::string what = n.substr(dot + 1, n.size() - suffix.size() - dot - 1);
  const int64_t layer = std::stoll(num);
  if (what == "attn_norm" || what == "ffn_norm") return {Role::kNorm, layer, what};
  for (int i = 0; i < kW8A8InputCount; ++i) {
    for (const std::string& p : w8a8_input_products(static_cast<W8A8Input>(i))) {
      if (what == p) return {Role::kMatrix, layer, what};
    }
  }
  return {};
}

W8A8Input input_of(const std::string& product) {
  for (int i = 0; i < kW8A8InputCount; ++i) {
    for (const std::string& p : w8a8_input_products(static_cast<W8A8Input>(i))) {
      if (p == product) return static_cast<W8A8Input>(i);
    }
  }
  return W8A8Input::kAttnNorm;  // unreachable: role_of() only names products
}

// One product's smoothed quantization: W'[r][j] = W[src_row(r)][j] * col[j] / row_div[r].
struct MatrixJob {
  const SourceTensor* t = nullptr;
  const float* col = nullptr;      // (cols) s_j of the input
  const float* row_div = nullptr;  // (rows) or null: ffn_up (ffn_swiglu's s), attn_v (kqv_out's)
  std::vector<float> scales;       // (rows) w_scale, once computed
  bool have_scales = false;
};

// Quantizes the job's rows into `packed` (the w8a8_pack layout; null: the scales only) and
// job.scales. Threads take 16-row panels, each quantized into a small buffer and packed straight
// to its place (panel p at byte 16 p cols), so no unpacked copy of the matrix is ever made.
void quantize_matrix(MatrixJob& job, ThreadPool& pool, uint8_t* packed) {
  const SourceTensor& t = *job.t;
  const int64_t cols = t.ne[0], rows = t.n_rows(), panel = kernels::kW8A8PanelRows;
  const size_t row_bytes = dtype_row_bytes(t.type, cols);
  const TypeTraits* tr = type_traits(t.type);
  const int64_t* row_map = t.row_map ? t.row_map->data() : nullptr;
  job.scales.resize(rows);
  pool.parallel_for_dynamic(rows / panel, 1, [&](int64_t p0, int64_t p1, int) {
    std::vector<float> w(cols);
    std::vector<int8_t> q(panel * cols);  // one panel, row-major
    for (int64_t p = p0; p < p1; ++p) {
      for (int64_t i = 0; i < panel; ++i) {
        const int64_t r = p * panel + i;
        tr->to_float(t.data + (row_map ? row_map[r] : r) * row_bytes, w.data(), cols);
        float amax = 0.0f;
        for (int64_t j = 0; j < cols; ++j) {
          float v = w[j] * job.col[j];
          if (job.row_div != nullptr) v /= job.row_div[r];
          w[j] = v;
          amax = std::max(amax, std::fabs(v));
        }
        const float scale = amax > 0.0f ? amax / kInt8Max : 1.0f;
        job.scales[r] = scale;
        for (int64_t j = 0; j < cols && packed != nullptr; ++j) {
          // Ties to even (the default rounding mode), as the activation quantizers round.
          const float v = std::clamp(w[j] / scale, -static_cast<float>(kInt8Max), static_cast<float>(kInt8Max));
          q[i * cols + j] = static_cast<int8_t>(std::nearbyint(v));
        }
      }
      if (packed != nullptr) kernels::w8a8_pack(q.data(), panel, cols, packed + p * panel * cols);
    }
  });
  job.have_scales = true;
}

// Everything the writer's fill callbacks share; they run one at a time, in write().
struct WriteState {
  const W8A8Calibration* calib = nullptr;
  const W8A8Options* options = nullptr;
  std::unique_ptr<ThreadPool> pool;
  std::vector<TensorPlan> plans;  // (source tensors), for the progress callback
  size_t done = 0;
  uint64_t bytes_in = 0, bytes_out = 0;

  void report(const TensorPlan& p, uint64_t out_bytes) {
    bytes_in += p.tensor->nbytes;
    bytes_out += out_bytes;
    if (options->on_tensor) options->on_tensor({++done, plans.size(), &p, bytes_in, bytes_out});
  }
};

std::vector<int64_t> shape_of(const SourceTensor& t) { return {t.ne, t.ne + std::max(1, t.n_dims)}; }

// X.weight (W8A8, packed), X.weight_scale, X.input_scale.
Status add_matrix(GgufWriter& w, WriteState& st, const TensorPlan& plan, const TensorRole& role, QuantizeSummary& sum) {
  const SourceTensor& t = *plan.tensor;
  const W8A8Calibration& calib = *st.calib;
  const W8A8Input in = input_of(role.product);
  auto job = std::make_shared<MatrixJob>();
  job->t = &t;
  job->col = calib.smoothing(role.layer, in).data();
  if (role.product == "ffn_up") job->row_div = calib.smoothing(role.layer, W8A8Input::kFfnSwiglu).data();
  if (role.product == "attn_v") job->row_div = calib.v_row_divisors(role.layer).data();
  const int64_t rows = t.n_rows(), cols = t.ne[0];
  const uint64_t packed = kernels::w8a8_packed_bytes(rows, cols);
  WriteState* s = &st;
  const TensorPlan* p = &plan;
  LL3_RETURN_IF_ERROR(w.add_tensor(t.name, DType::W8A8, {cols, rows}, [s, p, job, rows, packed](uint8_t* dst) {
    quantize_matrix(*job, *s->pool, dst);
    s->report(*p, packed + 4 * rows + 4);
  }));
  const std::string base = t.name.substr(0, t.name.size() - std::strlen(".weight"));
  LL3_RETURN_IF_ERROR(
      w.add_tensor(t.name + w8a8_format::kWeightScaleSuffix, DType::F32, {rows}, [s, job](uint8_t* dst) {
        if (!job->have_scales) quantize_matrix(*job, *s->pool, nullptr);
        std::memcpy(dst, job->scales.data(), job->scales.size() * sizeof(float));
      }));
  const float input_scale = calib.input_scale(role.layer, in);
  LL3_RETURN_IF_ERROR(w.add_tensor(base + w8a8_format::kInputScaleSuffix, DType::F32, {1},
                                   [input_scale](uint8_t* dst) { std::memcpy(dst, &input_scale, sizeof(float)); }));
  sum.bytes_out += packed + 4 * rows + 4;
  return ok_status();
}

// attn_norm / ffn_norm as F32 with 1 / s_j folded in.
Status add_norm(GgufWriter& w, WriteState& st, const TensorPlan& plan, const TensorRole& role, QuantizeSummary& sum) {
  const SourceTensor& t = *plan.tensor;
  const std::vector<float>& s =
      st.calib->smoothing(role.layer, role.product == "attn_norm" ? W8A8Input::kAttnNorm : W8A8Input::kFfnNorm);
  WriteState* ws = &st;
  const TensorPlan* p = &plan;
  const int64_t n = t.n_elements();
  LL3_RETURN_IF_ERROR(w.add_tensor(t.name, DType::F32, shape_of(t), [ws, p, &t, &s, n](uint8_t* dst) {
    std::vector<float> v(n);
    type_traits(t.type)->to_float(t.data, v.data(), n);
    for (int64_t j = 0; j < n; ++j) v[j] /= s[j];
    std::memcpy(dst, v.data(), n * sizeof(float));
    ws->report(*p, n * sizeof(float));
  }));
  sum.bytes_out += n * sizeof(float);
  return ok_status();
}

// token_embd / output at options.output_type (unchanged when already of that type).
Status add_output_type(GgufWriter& w, WriteState& st, const TensorPlan& plan, QuantizeSummary& sum) {
  const SourceTensor& t = *plan.tensor;
  const DType to = plan.type;
  const TypeTraits* from = type_traits(t.type);
  if (from == nullptr || from->to_float == nullptr) {
    return Status::errorf("w8a8: tensor '%s' has type %s, which ll3 cannot read", t.name.c_str(),
                          std::string(dtype_name(t.type)).c_str());
  }
  if (t.ne[0] % dtype_info(to).block_size != 0) {
    return Status::errorf(
        "w8a8: tensor '%s' has rows of %lld, not a whole number of %s blocks of %lld; choose "
        "another output type (q8_0, f16)",
        t.name.c_str(), static_cast<long long>(t.ne[0]), std::string(dtype_name(to)).c_str(),
        static_cast<long long>(dtype_info(to).block_size));
  }
  const uint64_t out_bytes = dtype_row_bytes(to, t.ne[0]) * static_cast<uint64_t>(t.n_rows());
  WriteState* ws = &st;
  const TensorPlan* p = &plan;
  LL3_RETURN_IF_ERROR(w.add_tensor(t.name, to, shape_of(t), [ws, p, &t, to, out_bytes](uint8_t* dst) {
    const int64_t* row_map = t.row_map ? t.row_map->data() : nullptr;
    // Both types and the row length were checked above, so a failure here is a bug.
    const Status s = quantize_rows(t.data, t.type, dst, to, t.ne[0], t.n_rows(), ws->options->threads, row_map);
    LL3_CHECK(s.ok());
    ws->report(*p, out_bytes);
  }));
  sum.bytes_out += out_bytes;
  return ok_status();
}

Status add_copy(GgufWriter& w, WriteState& st, const TensorPlan& plan, QuantizeSummary& sum) {
  const SourceTensor& t = *plan.tensor;
  WriteState* ws = &st;
  const TensorPlan* p = &plan;
  LL3_RETURN_IF_ERROR(w.add_tensor(t.name, t.type, shape_of(t), [ws, p, &t](uint8_t* dst) {
    t.copy_data(dst);
    ws->report(*p, t.nbytes);
  }));
  sum.bytes_out += t.nbytes;
  return ok_status();
}

Status check_calibration(const ModelSource& in, const W8A8Calibration& calib) {
  if (calib.phase() != W8A8Calibration::Phase::kDone) {
    return Status::error("w8a8: the calibration is not finished (finish() after both passes)");
  }
  LL3_RETURN_IF_ERROR(check_w8a8_source(in));
  const SourceTensor* q = nullptr;
  const SourceTensor* down = nullptr;
  for (const SourceTensor& t : in.tensors) {
    if (t.name == "blk.0.attn_q.weight") q = &t;
    if (t.name == "blk.0.ffn_down.weight") down = &t;
  }
  if (in.n_layer != calib.n_layer() || q->ne[0] != calib.cols(W8A8Input::kAttnNorm) ||
      q->n_rows() != calib.cols(W8A8Input::kKqvOut) || down->ne[0] != calib.cols(W8A8Input::kFfnSwiglu)) {
    return Status::errorf(
        "w8a8: the calibration was made for another model than %s (%lld layers, widths %lld / "
        "%lld / %lld; the calibration's: %lld layers, %lld / %lld / %lld)",
        in.origin.c_str(), static_cast<long long>(in.n_layer), static_cast<long long>(q->ne[0]),
        static_cast<long long>(q->n_rows()), static_cast<long long>(down->ne[0]),
        static_cast<long long>(calib.n_layer()), static_cast<long long>(calib.cols(W8A8Input::kAttnNorm)),
        static_cast<long long>(calib.cols(W8A8Input::kKqvOut)),
        static_cast<long long>(calib.cols(W8A8Input::kFfnSwiglu)));
  }
  return ok_status();
}

void set_w8a8_metadata(GgufWriter& w, const ModelSource& in, const W8A8Calibration& calib, const W8A8Options& o) {
  for (const auto& [key, value] : in.metadata) w.set(key, value);
  w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", w8a8_format::kFileType);
  w.set_u32(w8a8_format::kVersionKey, w8a8_format::kVersion);
  w.set_string(w8a8_format::kCalibratorKey, calibrator_name(o.calibrator));
  w.set_f32(w8a8_format::kSmoothAlphaKey, static_cast<float>(o.smooth_alpha));
  w.set_string(w8a8_format::kCalibFileKey, o.calib_file);
  w.set_u32(w8a8_format::kCalibTokensKey, static_cast<uint32_t>(std::min<int64_t>(calib.tokens(), UINT32_MAX)));
  w.set_u32(w8a8_format::kDynamicCountKey, static_cast<uint32_t>(calib.dynamic_count()));
}

}  // namespace

Result<QuantizeSummary> quantize_w8a8(const ModelSource& in, const std::string& out_path, const W8A8Calibration& calib,
                                      const W8A8Options& options) {
  LL3_RETURN_IF_ERROR(options.validate());
  LL3_RETURN_IF_ERROR(check_calibration(in, calib));
  // The file records what the calibration used, whatever `options` says.
  W8A8Options o = options;
  o.smooth_alpha = calib.options().smooth_alpha;
  o.calibrator = calib.options().calibrator;

  GgufWriter w;
  set_w8a8_metadata(w, in, calib, o);
  LL3_RETURN_IF_ERROR(w.set_alignment(in.alignment));
  WriteState st;
  st.calib = &calib;
  st.options = &o;
  st.pool = std::make_unique<ThreadPool>(o.threads);
  st.plans.reserve(in.tensors.size());  // add_* keep pointers into it

  QuantizeSummary sum;
  std::map<DType, int> counts;
  for (const SourceTensor& t : in.tensors) {
    const TensorRole role = role_of(t);
    if (role.layer >= in.n_layer) {
      return Status::errorf("w8a8: tensor '%s' is past the model's %lld layers", t.name.c_str(),
                            static_cast<long long>(in.n_layer));
    }
    TensorPlan& plan = st.plans.emplace_back(TensorPlan{&t, t.type, false});
    sum.n_params += static_cast<uint64_t>(t.n_elements());
    sum.bytes_in += t.nbytes;
    switch (role.role) {
      case Role::kMatrix:
        plan.type = DType::W8A8;
        plan.quantize = true;
        LL3_RETURN_IF_ERROR(add_matrix(w, st, plan, role, sum));
        counts[DType::F32] += 2;  // the two scale tensors
        break;
      case Role::kNorm:
        plan.type = DType::F32;
        LL3_RETURN_IF_ERROR(add_norm(w, st, plan, role, sum));
        break;
      case Role::kOutputType:
        plan.type = o.output_type;
        plan.quantize = o.output_type != t.type;
        LL3_RETURN_IF_ERROR(plan.quantize ? add_output_type(w, st, plan, sum) : add_copy(w, st, plan, sum));
        break;
      case Role::kCopy:
        LL3_RETURN_IF_ERROR(add_copy(w, st, plan, sum));
        break;
    }
    ++counts[plan.type];
  }
  sum.file_bytes = w.file_size();
  LL3_RETURN_IF_ERROR(w.write(out_path));
  for (const auto& [type, count] : counts) sum.type_counts.emplace_back(type, count);
  return sum;
}

}  // namespace ll3::quant
