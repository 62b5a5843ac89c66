// `ll3 quantize ... w8a8` (quant/w8a8.h): SmoothQuant's factors on hand-made maxima, the static /
// dynamic decision, the written file against the source (each int8 weight within half a step
// of the smoothed source weight, the norms divided by the factors, the scales and keys) on a
// synthetic model and on the trained model calibrated on held-out text, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "eval/sequence_evaluator.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "kernels/type_traits.h"
#include "kernels/w8a8.h"
#include "model/model_tokenizer.h"
#include "model/w8a8_format.h"
#include "quant/w8a8.h"
#include "test_support.h"

namespace ll3 {
namespace {

using quant::W8A8Calibration;
using quant::W8A8Input;

std::string trained_path() { return test::shared_dir() + "/models/trained-llama3-4l-f16.gguf"; }

// ---- A synthetic one-layer model: dim 64, 2 heads of 32, 1 KV head, FFN 128, F32 --------------

struct Synth {
  std::vector<std::shared_ptr<std::vector<float>>> data;
  quant::ModelSource src;

  void add(const std::string& name, std::vector<int64_t> ne, std::vector<float> v) {
    auto p = std::make_shared<std::vector<float>>(std::move(v));
    quant::SourceTensor t;
    t.name = name;
    t.type = DType::F32;
    t.n_dims = static_cast<int>(ne.size());
    for (size_t i = 0; i < ne.size(); ++i) t.ne[i] = ne[i];
    t.data = reinterpret_cast<const uint8_t*>(p->data());
    t.nbytes = p->size() * sizeof(float);
    data.push_back(p);
    src.tensors.push_back(t);
  }
  const quant::SourceTensor& tensor(const std::string& name) const {
    for (const auto& t : src.tensors) {
      if (t.name == name) return t;
    }
    throw std::runtime_error("no tensor " + name);
  }
  const float* values(const std::string& name) const { return reinterpret_cast<const float*>(tensor(name).data); }
};

Synth synth_model(int64_t dim = 64, int64_t ffn = 128) {
  Synth s;
  s.src.origin = "synthetic";
  s.src.n_layer = 1;
  s.src.n_head = 2;
  s.src.n_head_kv = 1;
  s.src.metadata.emplace_back("general.architecture", GgufWriteValue::string("llama"));
  const int64_t hd = dim / 2;
  uint32_t seed = 1;
  auto matrix = [&](const char* name, int64_t rows, int64_t cols) {
    s.add(std::string("blk.0.") + name + ".weight", {cols, rows}, test::random_normal(rows * cols, seed++, 0.1f));
  };
  s.add("token_embd.weight", {dim, 32}, test::random_normal(dim * 32, seed++));
  std::vector<float> norm = test::random_normal(dim, seed++);
  for (float& v : norm) v = 1.0f + 0.25f * std::fabs(v);
  s.add("blk.0.attn_norm.weight", {dim}, norm);
  matrix("attn_q", dim, dim);
  matrix("attn_k", hd, dim);
  matrix("attn_v", hd, dim);
  matrix("attn_output", dim, dim);
  std::reverse(norm.begin(), norm.end());
  s.add("blk.0.ffn_norm.weight", {dim}, norm);
  matrix("ffn_gate", ffn, dim);
  matrix("ffn_up", ffn, dim);
  matrix("ffn_down", dim, ffn);
  s.add("output_norm.weight", {dim}, std::vector<float>(dim, 1.0f));
  return s;
}

// rows x cols activations: uniform in [-1, 1] times the per-column gain.
std::vector<float> activations(int64_t rows, int64_t cols, uint32_t seed, const std::vector<float>& gain = {}) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) x[i] = u(g) * (gain.empty() ? 1.0f : gain[i % cols]);
  return x;
}

// Feeds the same activations of all four inputs of layer 0 (column gains grow with the column).
void feed(W8A8Calibration& c, int64_t dim, int64_t ffn, uint32_t seed) {
  for (int i = 0; i < quant::kW8A8InputCount; ++i) {
    const W8A8Input in = static_cast<W8A8Input>(i);
    const int64_t cols = in == W8A8Input::kFfnSwiglu ? ffn : dim;
    std::vector<float> gain(cols);
    for (int64_t j = 0; j < cols; ++j) gain[j] = 0.5f + 0.1f * static_cast<float>(j % 17);
    const std::vector<float> x = activations(48, cols, seed + i, gain);
    ASSERT_TRUE(c.observe(quant::w8a8_input_name(in), 0, x.data(), 48, cols).ok());
  }
}

// Column maxima over the rows of the named matrices.
std::vector<float> column_max(const Synth& s, const std::vector<std::string>& names) {
  std::vector<float> m;
  for (const std::string& n : names) {
    const quant::SourceTensor& t = s.tensor("blk.0." + n + ".weight");
    m.resize(t.ne[0], 0.0f);
    const float* w = s.values(t.name);
    for (int64_t r = 0; r < t.ne[1]; ++r) {
      for (int64_t j = 0; j < t.ne[0]; ++j) m[j] = std::max(m[j], std::fabs(w[r * t.ne[0] + j]));
    }
  }
  return m;
}

// Every row of X.weight, unpacked and times its scale, within half a step of the smoothed
// source row (`smoothed(r, c)`), the scale max|row| / 127, and the two scale tensors' shapes.
void expect_matrix(const GgufFile& f, const std::string& stem, int64_t rows, int64_t cols,
                   const std::function<float(int64_t, int64_t)>& smoothed) {
  const GgufTensorInfo* w = f.find_tensor(stem + ".weight");
  const GgufTensorInfo* ws = f.find_tensor(stem + ".weight" + w8a8_format::kWeightScaleSuffix);
  const GgufTensorInfo* is = f.find_tensor(stem + w8a8_format::kInputScaleSuffix);
  ASSERT_TRUE(w && ws && is) << stem;
  ASSERT_EQ(w->type, DType::W8A8) << stem;
  ASSERT_EQ(w->ne[0], cols) << stem;
  ASSERT_EQ(w->ne[1], rows) << stem;
  ASSERT_EQ(ws->type, DType::F32);
  ASSERT_EQ(ws->n_elements(), rows);
  ASSERT_EQ(is->type, DType::F32);
  ASSERT_EQ(is->n_elements(), 1);
  EXPECT_GE(*reinterpret_cast<const float*>(is->data), 0.0f) << stem;
  const float* scale = reinterpret_cast<const float*>(ws->data);
  std::vector<int8_t> q(cols);
  int bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    kernels::w8a8_unpack_row(w->data, r, cols, q.data());
    float amax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(smoothed(r, c)));
    EXPECT_FLOAT_EQ(scale[r], amax > 0 ? amax / 127.0f : 1.0f) << stem << " row " << r;
    for (int64_t c = 0; c < cols; ++c) {
      const float want = smoothed(r, c), got = q[c] * scale[r];
      if (std::fabs(want - got) > scale[r] * 0.5f + 1e-6f * std::fabs(want) + 1e-30f && ++bad < 5) {
        ADD_FAILURE() << stem << " [" << r << "][" << c << "]: " << got << " for " << want << " (scale " << scale[r]
                      << ")";
      }
    }
  }
}

// ---- Smoothing factors -------------------------------------------------------------------------

TEST(W8A8Quantize, SmoothingFactorsOnHandMadeMaxima) {
  const std::vector<float> x = {4, 1, 0, 9, 1e12f, 1e-12f};
  const std::vector<float> w = {1, 4, 2, 0, 1e-12f, 1e12f};
  const std::vector<float> s = quant::smoothing_factors(x, w, 0.5);
  // sqrt(4 / 1), sqrt(1 / 4), dead channel, dead weight, clamped high, clamped low.
  EXPECT_EQ(s, (std::vector<float>{2.0f, 0.5f, 1.0f, 1.0f, 1e5f, 1e-5f}));
  const std::vector<float> s75 = quant::smoothing_factors(x, w, 0.75);
  EXPECT_NEAR(s75[0], std::pow(4.0, 0.75), 1e-6);        // 4^0.75 / 1^0.25
  EXPECT_NEAR(s75[1], 1.0 / std::pow(4.0, 0.25), 1e-6);  // 1^0.75 / 4^0.25
  EXPECT_EQ(quant::smoothing_factors(x, w, 0.0), std::vector<float>(6, 1.0f));
}

TEST(W8A8Quantize, CalibrationSmoothsEachInputAgainstItsWeights) {
  Synth s = synth_model();
  quant::W8A8Options o;
  auto c = W8A8Calibration::create(s.src, o);
  ASSERT_TRUE(c.ok()) << c.message();
  ASSERT_TRUE(c->needs_channel_pass());
  // Known channel maxima: attn_norm's max |x_j| = j + 1, from two rows.
  std::vector<float> x(2 * 64);
  for (int j = 0; j < 64; ++j) x[j] = static_cast<float>(j + 1), x[64 + j] = -0.5f * (j + 1);
  ASSERT_TRUE(c->observe("attn_norm", 0, x.data(), 2, 64).ok());
  ASSERT_TRUE(c->observe("Qcur", 0, x.data(), 2, 64).ok());  // not an input: ignored
  ASSERT_TRUE(c->observe("kqv_out", 0, x.data(), 2, 64).ok());
  ASSERT_TRUE(c->observe("ffn_norm", 0, x.data(), 2, 64).ok());
  std::vector<float> xf(128, 2.0f);
  ASSERT_TRUE(c->observe("ffn_swiglu", 0, xf.data(), 1, 128).ok());
  ASSERT_TRUE(c->end_channel_pass(s.src).ok());

  const std::vector<float> wq = column_max(s, {"attn_q", "attn_k", "attn_v"});
  const std::vector<float> wg = column_max(s, {"ffn_gate", "ffn_up"});
  const std::vector<float> wd = column_max(s, {"ffn_down"});
  const std::vector<float> wo = column_max(s, {"attn_output"});
  for (int j = 0; j < 64; ++j) {
    EXPECT_NEAR(c->smoothing(0, W8A8Input::kAttnNorm)[j], std::sqrt((j + 1) / wq[j]), 1e-5 * (j + 1)) << j;
    EXPECT_NEAR(c->smoothing(0, W8A8Input::kFfnNorm)[j], std::sqrt((j + 1) / wg[j]), 1e-5 * (j + 1)) << j;
  }
  for (int j = 0; j < 128; ++j) EXPECT_NEAR(c->smoothing(0, W8A8Input::kFfnSwiglu)[j], std::sqrt(2 / wd[j]), 1e-5);
  // kqv_out: the two query heads share the KV head: channel d and 32 + d get one factor, from
  // the maxima over both (x: d + 33 > d + 1; W: the larger of the two columns).
  for (int d = 0; d < 32; ++d) {
    const float want = std::sqrt((d + 33) / std::max(wo[d], wo[32 + d]));
    EXPECT_NEAR(c->v_row_divisors(0)[d], want, 1e-5 * want) << d;
    EXPECT_EQ(c->smoothing(0, W8A8Input::kKqvOut)[d], c->v_row_divisors(0)[d]);
    EXPECT_EQ(c->smoothing(0, W8A8Input::kKqvOut)[32 + d], c->v_row_divisors(0)[d]);
  }
}

// ---- The static / dynamic decision -------------------------------------------------------------

TEST(W8A8Quantize, OutlierTokenStaysDynamicAndWellBehavedGoesStatic) {
  Synth s = synth_model();
  quant::W8A8Options o;
  o.smooth_alpha = 0;  // one pass
  auto c = W8A8Calibration::create(s.src, o);
  ASSERT_TRUE(c.ok()) << c.message();
  ASSERT_FALSE(c->needs_channel_pass());
  const std::vector<float> calm = activations(512, 64, 7);
  std::vector<float> outlier = activations(512, 64, 8);
  for (int j = 0; j < 64; ++j) outlier[100 * 64 + j] *= 1000.0f;  // one token 1000 times larger
  const std::vector<float> zeros(512 * 64, 0.0f), swiglu = activations(512, 128, 9);
  ASSERT_TRUE(c->observe("attn_norm", 0, calm.data(), 512, 64).ok());
  ASSERT_TRUE(c->observe("ffn_norm", 0, outlier.data(), 512, 64).ok());
  ASSERT_TRUE(c->observe("kqv_out", 0, zeros.data(), 512, 64).ok());
  ASSERT_TRUE(c->observe("ffn_swiglu", 0, swiglu.data(), 512, 128).ok());
  ASSERT_TRUE(c->finish().ok());

  EXPECT_GT(c->input_scale(0, W8A8Input::kAttnNorm), 0.5f / 127);
  EXPECT_LE(c->input_scale(0, W8A8Input::kAttnNorm), 1.0f / 127);
  EXPECT_EQ(c->input_scale(0, W8A8Input::kFfnNorm), 0.0f);
  EXPECT_EQ(c->input_scale(0, W8A8Input::kKqvOut), 1.0f);  // dead: static, scale 1
  EXPECT_GT(c->input_scale(0, W8A8Input::kFfnSwiglu), 0.0f);
  EXPECT_EQ(c->dynamic_count(), 1);
  EXPECT_EQ(c->tokens(), 512);
  ASSERT_EQ(c->report().size(), 4u);
  const quant::W8A8InputReport& calm_r = c->report()[0];
  const quant::W8A8InputReport& out_r = c->report()[2];
  EXPECT_TRUE(calm_r.is_static);
  EXPECT_GT(calm_r.sqnr_static_db, calm_r.sqnr_dynamic_db - 3.0);
  EXPECT_GT(calm_r.sqnr_static_db, 35.0);  // uniform data, 8 bits: about 6 dB a bit
  EXPECT_FALSE(out_r.is_static);
  EXPECT_GT(out_r.sqnr_dynamic_db, out_r.sqnr_static_db + 3.0);

  // With no loss allowed at all, even the calm input goes dynamic: per-token steps are a little
  // finer than one step for all tokens.
  o.max_static_loss_db = 0;
  auto strict = W8A8Calibration::create(s.src, o);
  ASSERT_TRUE(strict.ok());
  ASSERT_TRUE(strict->observe("attn_norm", 0, calm.data(), 512, 64).ok());
  ASSERT_TRUE(strict->observe("ffn_norm", 0, outlier.data(), 512, 64).ok());
  ASSERT_TRUE(strict->observe("kqv_out", 0, outlier.data(), 512, 64).ok());
  ASSERT_TRUE(strict->observe("ffn_swiglu", 0, swiglu.data(), 512, 128).ok());
  ASSERT_TRUE(strict->finish().ok());
  EXPECT_EQ(strict->input_scale(0, W8A8Input::kAttnNorm), 0.0f);
}

// ---- The written file --------------------------------------------------------------------------

// The file of a calibrated model against its source: matrices, norms, scales, keys.
void expect_w8a8_file(const std::string& path, const quant::ModelSource& src, const W8A8Calibration& c) {
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ((*f)->get_int("general.file_type").value_or(0), int64_t{w8a8_format::kFileType});
  EXPECT_EQ((*f)->get_int(w8a8_format::kVersionKey).value_or(0), int64_t{w8a8_format::kVersion});
  EXPECT_EQ((*f)->get_string(w8a8_format::kCalibratorKey).value_or(""), "mse");
  EXPECT_FLOAT_EQ((*f)->get_float(w8a8_format::kSmoothAlphaKey).value_or(-1), c.options().smooth_alpha);
  EXPECT_EQ((*f)->get_string(w8a8_format::kCalibFileKey).value_or("?"), c.options().calib_file);
  EXPECT_EQ((*f)->get_int(w8a8_format::kCalibTokensKey).value_or(-1), c.tokens());
  EXPECT_EQ((*f)->get_int(w8a8_format::kDynamicCountKey).value_or(-1), c.dynamic_count());
  auto find = [&src](const std::string& name) -> const quant::SourceTensor& {
    for (const auto& t : src.tensors) {
      if (t.name == name) return t;
    }
    throw std::runtime_error("no tensor " + name);
  };
  // A source row as floats.
  auto row = [](const quant::SourceTensor& t, int64_t r) {
    std::vector<float> v(t.ne[0]);
    type_traits(t.type)->to_float(t.data + r * dtype_row_bytes(t.type, t.ne[0]), v.data(), t.ne[0]);
    return v;
  };
  for (int64_t l = 0; l < src.n_layer; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    for (int i = 0; i < quant::kW8A8InputCount; ++i) {
      const W8A8Input in = static_cast<W8A8Input>(i);
      const std::vector<float>& s = c.smoothing(l, in);
      for (const std::string& p : quant::w8a8_input_products(in)) {
        const quant::SourceTensor& t = find(blk + p + ".weight");
        const std::vector<float>* div = p == "ffn_up"   ? &c.smoothing(l, W8A8Input::kFfnSwiglu)
                                        : p == "attn_v" ? &c.v_row_divisors(l)
                                                        : nullptr;
        std::vector<float> cur;
        int64_t cur_r = -1;
        expect_matrix(**f, blk + p, t.n_rows(), t.ne[0], [&](int64_t r, int64_t j) {
          if (r != cur_r) cur = row(t, r), cur_r = r;
          const float v = cur[j] * s[j];
          return div ? v / (*div)[r] : v;
        });
        const GgufTensorInfo* is = (*f)->find_tensor(blk + p + w8a8_format::kInputScaleSuffix);
        ASSERT_TRUE(is);
        EXPECT_EQ(*reinterpret_cast<const float*>(is->data), c.input_scale(l, in)) << blk + p;
      }
    }
    for (const char* norm : {"attn_norm", "ffn_norm"}) {
      const std::vector<float>& s =
          c.smoothing(l, std::string(norm) == "attn_norm" ? W8A8Input::kAttnNorm : W8A8Input::kFfnNorm);
      const GgufTensorInfo* g = (*f)->find_tensor(blk + norm + ".weight");
      ASSERT_TRUE(g);
      ASSERT_EQ(g->type, DType::F32);
      const std::vector<float> want = row(find(blk + norm + ".weight"), 0);
      const float* got = reinterpret_cast<const float*>(g->data);
      for (size_t j = 0; j < want.size(); ++j) EXPECT_EQ(got[j], want[j] / s[j]) << blk << norm << " " << j;
    }
  }
  const GgufTensorInfo* emb = (*f)->find_tensor("token_embd.weight");
  ASSERT_TRUE(emb);
  EXPECT_EQ(emb->type, c.options().output_type);
}

// An F32 twin of `src` whose block matrices and norms are replaced: `dequantized` false, by the
// smoothed float weights (W' and g / s, from the calibration: the same function as the source);
// true, by the W8A8 file's q * scale and its norms (the same function up to weight rounding).
void write_twin(const quant::ModelSource& src, const W8A8Calibration& c, const GgufFile& w8a8, bool dequantized,
                const std::string& out) {
  GgufWriter w;
  for (const auto& [key, value] : src.metadata) w.set(key, value);
  ASSERT_TRUE(w.set_alignment(src.alignment).ok());
  std::vector<std::shared_ptr<std::vector<float>>> keep;
  for (const quant::SourceTensor& t : src.tensors) {
    const GgufTensorInfo* q = w8a8.find_tensor(t.name);
    ASSERT_TRUE(q) << t.name;
    const bool norm = t.name.rfind("blk.", 0) == 0 && t.name.find("_norm.weight") != std::string::npos;
    if (q->type != DType::W8A8 && !norm) {
      ASSERT_TRUE(w.add_tensor(t.name, t.type, {t.ne, t.ne + t.n_dims}, t.data).ok());
      continue;
    }
    auto v = std::make_shared<std::vector<float>>(t.n_elements());
    const int64_t cols = t.ne[0], rows = t.n_rows();
    if (dequantized && q->type == DType::W8A8) {
      const float* scale = reinterpret_cast<const float*>(w8a8.find_tensor(t.name + "_scale")->data);
      std::vector<int8_t> row(cols);
      for (int64_t r = 0; r < rows; ++r) {
        kernels::w8a8_unpack_row(q->data, r, cols, row.data());
        for (int64_t j = 0; j < cols; ++j) (*v)[r * cols + j] = row[j] * scale[r];
      }
    } else if (norm) {
      std::memcpy(v->data(), q->data, v->size() * sizeof(float));  // folded: checked against g / s
    }
    if (!dequantized && q->type == DType::W8A8) {
      const size_t dot = t.name.find('.', 4);
      const int64_t l = std::stoll(t.name.substr(4, dot - 4));
      const std::string p = t.name.substr(dot + 1, t.name.size() - dot - 8);
      W8A8Input in = W8A8Input::kAttnNorm;
      for (int i = 0; i < quant::kW8A8InputCount; ++i) {
        for (const std::string& name : quant::w8a8_input_products(static_cast<W8A8Input>(i))) {
          if (name == p) in = static_cast<W8A8Input>(i);
        }
      }
      const std::vector<float>& s = c.smoothing(l, in);
      for (int64_t r = 0; r < rows; ++r) {
        type_traits(t.type)->to_float(t.data + r * dtype_row_bytes(t.type, cols), &(*v)[r * cols], cols);
        const float div = p == "ffn_up"   ? c.smoothing(l, W8A8Input::kFfnSwiglu)[r]
                          : p == "attn_v" ? c.v_row_divisors(l)[r]
                                          : 1.0f;
        for (int64_t j = 0; j < cols; ++j) (*v)[r * cols + j] = (*v)[r * cols + j] * s[j] / div;
      }
    }
    ASSERT_TRUE(w.add_tensor(t.name, DType::F32, {t.ne, t.ne + t.n_dims}, v->data()).ok());
    keep.push_back(v);
  }
  ASSERT_TRUE(w.write(out).ok());
}

// All logits of `tokens` (float activations, F32 cache).
std::vector<float> logits_of(const std::string& path, const std::vector<int32_t>& tokens) {
  auto m = LlamaModel::load(path);
  EXPECT_TRUE(m.ok()) << m.message();
  if (!m.ok()) return {};
  EvaluatorOptions eo;
  eo.context = 128;
  eo.threads = 2;
  eo.kv_type = DType::F32;
  eo.int8_activations = false;
  auto ev = SequenceEvaluator::create(**m, eo);
  EXPECT_TRUE(ev.ok()) << ev.message();
  if (!ev.ok() || !(*ev)->eval(tokens, true).ok()) return {};
  return (*ev)->logits();
}

double relative_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) d += (a[i] - b[i]) * double(a[i] - b[i]), n += b[i] * double(b[i]);
  return std::sqrt(d / n);
}

TEST(W8A8Quantize, SyntheticModelFileMatchesTheSmoothedSource) {
  Synth s = synth_model();
  quant::W8A8Options o;
  o.calib_file = "synthetic.txt";
  o.threads = 2;
  auto c = W8A8Calibration::create(s.src, o);
  ASSERT_TRUE(c.ok()) << c.message();
  feed(*c, 64, 128, 1);
  ASSERT_TRUE(c->end_channel_pass(s.src).ok());
  feed(*c, 64, 128, 1);
  ASSERT_TRUE(c->finish().ok());
  for (int i = 0; i < quant::kW8A8InputCount; ++i) {  // the factors are not all 1
    const std::vector<float>& f = c->smoothing(0, static_cast<W8A8Input>(i));
    EXPECT_NE(*std::min_element(f.begin(), f.end()), *std::max_element(f.begin(), f.end())) << i;
  }
  const std::string out = test::temp_dir() + "/synth-w8a8.gguf";
  size_t progress = 0;
  o.on_tensor = [&progress](const quant::QuantizeProgress& p) {
    progress = p.index;
    EXPECT_LE(p.index, p.count);
  };
  auto sum = quant::quantize_w8a8(s.src, out, *c, o);
  ASSERT_TRUE(sum.ok()) << sum.message();
  EXPECT_EQ(progress, s.src.tensors.size());
  expect_w8a8_file(out, s.src, *c);
  auto f = GgufFile::open(out);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->tensors().size(), s.src.tensors.size() + 2 * 7);  // two scale tensors a matrix
  EXPECT_EQ((*f)->get_string("general.architecture").value_or(""), "llama");
  const GgufTensorInfo* on = (*f)->find_tensor("output_norm.weight");  // copied as it was
  ASSERT_TRUE(on);
  EXPECT_EQ(reinterpret_cast<const float*>(on->data)[0], 1.0f);
}

// The trained model calibrated on two chunks of 128 tokens of the held-out text: the float
// model's activations through the runner's tap, as `ll3 quantize` gathers them.
TEST(W8A8Quantize, TrainedModelEndToEnd) {
  LL3_REQUIRE_SHARED();
  auto gguf = GgufFile::open(trained_path());
  ASSERT_TRUE(gguf.ok()) << gguf.message();
  const quant::ModelSource src = quant::source_from_gguf(**gguf);
  auto model = LlamaModel::load(trained_path());
  ASSERT_TRUE(model.ok()) << model.message();
  auto tok = load_model_tokenizer(**model);
  ASSERT_TRUE(tok.ok()) << tok.message();
  const std::string text = test::read_file(test::shared_dir() + "/models/trained-test.txt").substr(0, 100000);
  const std::vector<int32_t> tokens = (*tok)->encode(text, true, false);
  ASSERT_GE(tokens.size(), 256u);

  quant::W8A8Options o;
  o.threads = 2;
  o.calib_file = "trained-test.txt";
  auto c = W8A8Calibration::create(src, o);
  ASSERT_TRUE(c.ok()) << c.message();
  Status tap_error;
  EvaluatorOptions eo;
  eo.context = 128;
  eo.batch = 128;
  eo.threads = 2;
  eo.int8_activations = false;
  eo.tap = [&](const char* name, int64_t layer, const float* x, int64_t rows, int64_t cols) {
    if (tap_error.ok()) tap_error = c->observe(name, layer, x, rows, cols);
  };
  auto ev = SequenceEvaluator::create(**model, eo);
  ASSERT_TRUE(ev.ok()) << ev.message();
  auto pass = [&]() {
    for (int chunk = 0; chunk < 2; ++chunk) {
      std::vector<int32_t> t(tokens.begin() + chunk * 128, tokens.begin() + (chunk + 1) * 128);
      t[0] = (*tok)->bos_id();
      (*ev)->truncate(0);
      ASSERT_TRUE((*ev)->eval(t).ok());
    }
    ASSERT_TRUE(tap_error.ok()) << tap_error.message();
  };
  pass();
  ASSERT_TRUE(c->end_channel_pass(src).ok());
  pass();
  ASSERT_TRUE(c->finish().ok());
  EXPECT_EQ(c->tokens(), 256);
  ASSERT_EQ(c->report().size(), 16u);
  for (const quant::W8A8InputReport& r : c->report()) {
    EXPECT_GT(r.sqnr_dynamic_db, 20.0) << r.layer << " " << quant::w8a8_input_name(r.input);
    EXPECT_GT(r.smooth_max, r.smooth_min) << r.layer << " " << quant::w8a8_input_name(r.input);
  }
  const std::string out = test::temp_dir() + "/trained-w8a8.gguf";
  auto sum = quant::quantize_w8a8(src, out, *c, o);
  ASSERT_TRUE(sum.ok()) << sum.message();
  EXPECT_LT(sum->bytes_out, sum->bytes_in);
  expect_w8a8_file(out, src, *c);

  // The smoothed float model computes the source's function (the factors fold in exactly, the
  // kqv_out ones through attn_v's rows included); the int8 weights stay close to it.
  auto w8a8 = GgufFile::open(out);
  ASSERT_TRUE(w8a8.ok());
  const std::string dir = test::temp_dir();
  write_twin(src, *c, **w8a8, false, dir + "/smoothed-f32.gguf");
  write_twin(src, *c, **w8a8, true, dir + "/dequantized-f32.gguf");
  const std::vector<int32_t> prompt(tokens.begin() + 300, tokens.begin() + 364);
  const std::vector<float> ref = logits_of(trained_path(), prompt);
  const std::vector<float> smoothed = logits_of(dir + "/smoothed-f32.gguf", prompt);
  const std::vector<float> deq = logits_of(dir + "/dequantized-f32.gguf", prompt);
  ASSERT_EQ(smoothed.size(), ref.size());
  ASSERT_EQ(deq.size(), ref.size());
  EXPECT_LT(relative_l2(smoothed, ref), 1e-5);
  EXPECT_LT(relative_l2(deq, ref), 5e-3);
  std::printf("relative L2 of the logits against the source: smoothed float %.2e, int8 weights %.2e\n",
              relative_l2(smoothed, ref), relative_l2(deq, ref));
}

// ---- Errors ------------------------------------------------------------------------------------

TEST(W8A8Quantize, ShapesW8A8CannotTakeAreNamed) {
  Synth rows = synth_model(64, 120);  // ffn rows not a multiple of 16
  auto c = W8A8Calibration::create(rows.src, {});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("'blk.0.ffn_gate.weight'"), std::string::npos) << c.message();
  EXPECT_NE(c.message().find("rows % 16"), std::string::npos) << c.message();

  Synth cols = synth_model(96, 128);  // dim 96: not a multiple of 64
  auto c2 = W8A8Calibration::create(cols.src, {});
  ASSERT_FALSE(c2.ok());
  EXPECT_NE(c2.message().find("'blk.0.attn_q.weight'"), std::string::npos) << c2.message();

  Synth unreadable = synth_model();
  for (auto& t : unreadable.src.tensors) {
    if (t.name == "blk.0.ffn_down.weight") t.type = DType::I32;
  }
  auto c3 = W8A8Calibration::create(unreadable.src, {});
  ASSERT_FALSE(c3.ok());
  EXPECT_NE(c3.message().find("'blk.0.ffn_down.weight' has type i32"), std::string::npos) << c3.message();

  Synth missing = synth_model();
  std::erase_if(missing.src.tensors, [](const quant::SourceTensor& t) { return t.name == "blk.0.attn_k.weight"; });
  auto c4 = W8A8Calibration::create(missing.src, {});
  ASSERT_FALSE(c4.ok());
  EXPECT_NE(c4.message().find("'blk.0.attn_k.weight' is missing"), std::string::npos) << c4.message();
}

TEST(W8A8Quantize, CalibrationMisuseIsAnError) {
  Synth s = synth_model();
  auto c = W8A8Calibration::create(s.src, {});
  ASSERT_TRUE(c.ok());
  const std::vector<float> x(64 * 4, 1.0f);
  Status wide = c->observe("attn_norm", 0, x.data(), 2, 128);
  EXPECT_NE(wide.message().find("has 128 columns, but its weights read 64"), std::string::npos) << wide.message();
  Status layer = c->observe("attn_norm", 3, x.data(), 1, 64);
  EXPECT_NE(layer.message().find("layer 3"), std::string::npos) << layer.message();
  std::vector<float> nan(64, 1.0f);
  nan[5] = std::nanf("");
  Status bad_value = c->observe("ffn_norm", 0, nan.data(), 1, 64);
  EXPECT_NE(bad_value.message().find("blk.0 ffn_norm: non-finite activation nan at row 0, column 5"), std::string::npos)
      << bad_value.message();
  EXPECT_FALSE(c->finish().ok());             // the first pass is not over
  Status empty = c->end_channel_pass(s.src);  // nothing seen
  EXPECT_NE(empty.message().find("no activations of blk.0 attn_norm"), std::string::npos) << empty.message();
  auto sum = quant::quantize_w8a8(s.src, test::temp_dir() + "/x.gguf", *c, {});
  ASSERT_FALSE(sum.ok());
  EXPECT_NE(sum.message().find("not finished"), std::string::npos) << sum.message();
  quant::W8A8Options bad;
  bad.smooth_alpha = 1.5;
  EXPECT_FALSE(W8A8Calibration::create(s.src, bad).ok());
}

TEST(W8A8Quantize, CliFlags) {
  LL3_REQUIRE_SHARED();
  const std::string dir = test::temp_dir(), bin = test::ll3_binary();
  auto need = test::run_command(bin + " quantize " + trained_path() + " " + dir + "/x.gguf w8a8 2>&1", true);
  EXPECT_EQ(need.exit_code, 2) << need.output;
  EXPECT_NE(need.output.find("--calib TEXT"), std::string::npos) << need.output;
  auto other = test::run_command(bin + " quantize " + trained_path() + " " + dir + "/x.gguf q8_0 --calib a 2>&1", true);
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_NE(other.output.find("--calib applies to TYPE w8a8 only"), std::string::npos) << other.output;
  auto cal = test::run_command(
      bin + " quantize " + trained_path() + " " + dir + "/x.gguf w8a8 --calib a --calibrator best 2>&1", true);
  EXPECT_EQ(cal.exit_code, 2) << cal.output;
  EXPECT_NE(cal.output.find("best"), std::string::npos) << cal.output;
  auto missing = test::run_command(
      bin + " quantize " + trained_path() + " " + dir + "/x.gguf w8a8 --calib " + dir + "/none.txt 2>&1", true);
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("none.txt"), std::string::npos) << missing.output;
}

// The command, end to end, on one short chunk.
TEST(W8A8Quantize, CliWritesTheFileAndTheReport) {
  LL3_REQUIRE_SHARED();
  const std::string dir = test::temp_dir(), bin = test::ll3_binary();
  test::write_file(dir + "/calib.txt",
                   test::read_file(test::shared_dir() + "/models/trained-test.txt").substr(0, 4000));
  auto r = test::run_command(bin + " quantize " + trained_path() + " " + dir + "/w.gguf w8a8 --calib " + dir +
                                 "/calib.txt -c 64 --calib-chunks 1 -t 2 --output-type f16 2>&1",
                             true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ffn_swiglu"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bits/weight"), std::string::npos) << r.output;
  auto f = GgufFile::open(dir + "/w.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ((*f)->get_int(w8a8_format::kCalibTokensKey).value_or(0), 64);
  EXPECT_EQ((*f)->find_tensor("token_embd.weight")->type, DType::F16);
  EXPECT_EQ((*f)->find_tensor("blk.3.ffn_down.weight")->type, DType::W8A8);
}

}  // namespace
}  // namespace ll3
