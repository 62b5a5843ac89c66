// Running static W8A8 models (model/w8a8_format.h, kernels/w8a8.h) on the trained model, from
// files made here by a converter independent of `ll3 quantize ... w8a8` (per-row int8 weights,
// no smoothing; input scales per token, or min-max over the prompt itself):
//   - with float activations the W8A8 file computes what an F32 file of its dequantized weights
//     computes (the loader binds the right rows and scales);
//   - with 8-bit activations, the logits stay as close to the float-activation ones as Q8_0's
//     own 8-bit activations keep Q8_0's (the tolerance: what llama.cpp's arithmetic already
//     costs, on the same model and text);
//   - a token's logits are the same bits in a batch as alone;
//   - broken scale tensors and a W8A8 embedding table are refused with what and where; the GPU
//     is refused with a reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "backend/runner.h"
#include "eval/sequence_evaluator.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/hf_export.h"
#include "kernels/type_traits.h"
#include "kernels/w8a8.h"
#include "model/model_tokenizer.h"
#include "model/w8a8_format.h"
#include "quant/imatrix.h"
#include "quant/model_source.h"
#include "quant/quantize.h"
#include "test_support.h"

namespace ll3 {
namespace {

std::string trained_path() { return test::shared_dir() + "/models/trained-llama3-4l-f16.gguf"; }

bool is_block_matrix(const quant::SourceTensor& t) {
  const std::string& n = t.name;
  return t.n_dims == 2 && n.rfind("blk.", 0) == 0 && n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0;
}

// Input scale of the product X ("blk.0.attn_q"): 0 for per-token scales.
using InputScaleFn = std::function<float(const std::string& stem)>;

// Optional damage to a W8A8 file: called with each tensor about to be written.
using Damage = std::function<void(std::string& name, DType& type, std::vector<float>& data)>;

// Writes `out` (W8A8 for every block matrix) and, if `f32_twin` is not empty, an F32 file of
// the same weights dequantized (q * scale): the two must compute the same function in float.
void hand_made(const std::string& out, const std::string& f32_twin, const InputScaleFn& input_scale,
               const Damage& damage = {}, uint32_t version = w8a8_format::kVersion) {
  auto in = GgufFile::open(trained_path());
  ASSERT_TRUE(in.ok()) << in.message();
  const quant::ModelSource src = quant::source_from_gguf(**in);
  GgufWriter w, twin;
  for (const auto& [key, value] : src.metadata) {
    w.set(key, value);
    twin.set(key, value);
  }
  w.set_u32(w8a8_format::kVersionKey, version);
  std::vector<std::vector<uint8_t>> keep;  // tensor data must outlive write()
  auto add = [&](GgufWriter& gw, std::string name, DType type, std::vector<int64_t> ne, std::vector<uint8_t> bytes) {
    keep.push_back(std::move(bytes));
    ASSERT_TRUE(gw.add_tensor(name, type, ne, keep.back().data()).ok()) << name;
  };
  auto floats = [](const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * sizeof(float));
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  for (const quant::SourceTensor& t : src.tensors) {
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    std::vector<uint8_t> raw(t.data, t.data + t.nbytes);
    if (!is_block_matrix(t)) {
      add(w, t.name, t.type, ne, raw);
      if (!f32_twin.empty()) add(twin, t.name, t.type, ne, raw);
      continue;
    }
    const int64_t cols = t.ne[0], rows = t.ne[1];
    const TypeTraits* tr = type_traits(t.type);
    std::vector<float> row(static_cast<size_t>(cols)), scales(static_cast<size_t>(rows));
    std::vector<float> deq(static_cast<size_t>(rows * cols));
    std::vector<int8_t> q(static_cast<size_t>(rows * cols));
    const size_t rb = dtype_row_bytes(t.type, cols);
    for (int64_t r = 0; r < rows; ++r) {
      tr->to_float(t.data + r * rb, row.data(), cols);
      float amax = 0;
      for (float v : row) amax = std::max(amax, std::fabs(v));
      const float s = amax > 0 ? amax / 127.0f : 1.0f;
      scales[static_cast<size_t>(r)] = s;
      for (int64_t c = 0; c < cols; ++c) {
        const float v = std::nearbyint(std::clamp(row[c] / s, -127.0f, 127.0f));
        q[static_cast<size_t>(r * cols + c)] = static_cast<int8_t>(v);
        deq[static_cast<size_t>(r * cols + c)] = v * s;
      }
    }
    std::vector<uint8_t> packed(kernels::w8a8_packed_bytes(rows, cols));
    kernels::w8a8_pack(q.data(), rows, cols, packed.data());
    const std::string stem = t.name.substr(0, t.name.size() - 7);
    std::string scale_name = t.name + w8a8_format::kWeightScaleSuffix, input_name = stem + w8a8_format::kInputScaleSuffix;
    std::vector<float> input = {input_scale(stem)};
    DType w_type = DType::W8A8, s_type = DType::F32, i_type = DType::F32;
    std::string w_name = t.name;
    if (damage) {
      std::vector<float> none;
      damage(w_name, w_type, none);
      damage(scale_name, s_type, scales);
      damage(input_name, i_type, input);
    }
    add(w, w_name, w_type, ne, packed);
    if (!scale_name.empty()) add(w, scale_name, s_type, {rows}, floats(scales));
    if (!input_name.empty()) add(w, input_name, i_type, {1}, floats(input));
    if (!f32_twin.empty()) add(twin, t.name, DType::F32, ne, floats(deq));
  }
  Status st = w.write(out);
  ASSERT_TRUE(st.ok()) << st.message();
  if (!f32_twin.empty()) {
    st = twin.write(f32_twin);
    ASSERT_TRUE(st.ok()) << st.message();
  }
}

// The first n tokens of the test text (BOS first).
std::vector<int32_t> prompt_tokens(const LlamaModel& m, size_t n) {
  auto tok = load_model_tokenizer(m);
  EXPECT_TRUE(tok.ok()) << tok.message();
  std::string text = test::read_file(test::shared_dir() + "/models/trained-test.txt").substr(0, 8000);
  std::vector<int32_t> ids = (*tok)->encode(text, true, false);
  if (ids.size() > n) ids.resize(n);
  return ids;
}

// All positions' logits of `ids` evaluated in batches of `batch`, and the activation tap's
// max |x| per product input on the way ("blk.0.attn_q" -> max), when asked.
std::vector<float> logits_of(const std::string& path, const std::vector<int32_t>& ids, bool int8_act, int64_t batch,
                             std::map<std::string, float>* input_max = nullptr) {
  auto m = LlamaModel::load(path);
  EXPECT_TRUE(m.ok()) << m.message();
  if (!m.ok()) return {};
  EvaluatorOptions o;
  o.context = 256;
  o.batch = batch;
  o.threads = 2;
  o.kv_type = DType::F32;
  o.int8_activations = int8_act;
  if (input_max != nullptr) {
    o.tap = [input_max](const char* name, int64_t layer, const float* x, int64_t rows, int64_t cols) {
      if (layer < 0) return;  // the output matrix stays a row type
      for (const std::string& wname : imatrix_weights_for_tap(name, layer)) {
        float& mx = (*input_max)[wname.substr(0, wname.size() - 7)];
        for (int64_t i = 0; i < rows * cols; ++i) mx = std::max(mx, std::fabs(x[i]));
      }
    };
  }
  auto ev = SequenceEvaluator::create(**m, o);
  EXPECT_TRUE(ev.ok()) << ev.message();
  if (!ev.ok()) return {};
  std::vector<float> all;
  for (size_t i = 0; i < ids.size(); i += static_cast<size_t>(batch)) {
    const size_t n = std::min(ids.size() - i, static_cast<size_t>(batch));
    Status st = (*ev)->eval(std::span<const int32_t>(ids.data() + i, n), true);
    EXPECT_TRUE(st.ok()) << st.message();
    all.insert(all.end(), (*ev)->logits().begin(), (*ev)->logits().end());
  }
  return all;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    n += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(d / n);
}

class W8A8Model : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::temp_dir());
    auto m = LlamaModel::load(trained_path());
    ASSERT_TRUE(m.ok()) << m.message();
    ids_ = new std::vector<int32_t>(prompt_tokens(**m, 200));
    // Q8_0 of the same model: the yardstick of the tolerances.
    auto in = GgufFile::open(trained_path());
    ASSERT_TRUE(in.ok());
    quant::QuantizeOptions qo;
    qo.threads = 2;
    ASSERT_TRUE(quant::quantize_gguf(**in, q8_path(), *quant::find_quant_mix("q8_0"), qo).ok());
  }
  static std::string q8_path() { return *dir_ + "/q8_0.gguf"; }
  static void TearDownTestSuite() {
    delete dir_;
    delete ids_;
  }
  static std::string* dir_;
  static std::vector<int32_t>* ids_;
};
std::string* W8A8Model::dir_ = nullptr;
std::vector<int32_t>* W8A8Model::ids_ = nullptr;

TEST_F(W8A8Model, FloatActivationsComputeTheDequantizedWeights) {
  const std::string w8 = *dir_ + "/dyn.gguf", f32 = *dir_ + "/dyn-f32.gguf";
  hand_made(w8, f32, [](const std::string&) { return 0.0f; });
  auto m = LlamaModel::load(w8);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_TRUE((*m)->has_w8a8_weights());
  EXPECT_EQ((*m)->layers[0].wq.type, DType::W8A8);
  const std::vector<float> a = logits_of(w8, *ids_, false, 64), b = logits_of(f32, *ids_, false, 64);
  // The same products in float, rounded in another order: (sum q x) s against sum (q s) x.
  EXPECT_LT(rel_l2(a, b), 1e-5);
}

TEST_F(W8A8Model, Int8ActivationsCostNoMoreThanQ8_0s) {
  // Q8_0's own gap between 8-bit and float activations.
  const std::string q8 = q8_path();
  const double q8_gap = rel_l2(logits_of(q8, *ids_, true, 64), logits_of(q8, *ids_, false, 64));

  // Per-token scales, and static min-max scales measured on this very prompt (nothing clips).
  const std::string dyn = *dir_ + "/dyn2.gguf", stat = *dir_ + "/static.gguf";
  hand_made(dyn, "", [](const std::string&) { return 0.0f; });
  std::map<std::string, float> input_max;
  logits_of(trained_path(), *ids_, false, 64, &input_max);
  ASSERT_EQ(input_max.size(), 4u * 7u);
  hand_made(stat, "", [&](const std::string& stem) { return input_max.at(stem) / 127.0f; });
  const double dyn_gap = rel_l2(logits_of(dyn, *ids_, true, 64), logits_of(dyn, *ids_, false, 64));
  const double static_gap = rel_l2(logits_of(stat, *ids_, true, 64), logits_of(stat, *ids_, false, 64));
  std::printf("8-bit against float activations, relative L2 of the logits: Q8_0 %.5f, W8A8 per-token %.5f, "
              "W8A8 static min-max %.5f\n", q8_gap, dyn_gap, static_gap);
  EXPECT_GT(q8_gap, 0.0);
  EXPECT_GT(dyn_gap, 0.0);   // the 8-bit path did run
  // Per token, one scale per row of up to 512 values against Q8_0's one per 32: within 2x.
  EXPECT_LT(dyn_gap, 2.0 * q8_gap);
  // One scale for all tokens, set by the largest: coarser steps than per token, bounded.
  EXPECT_LT(static_gap, 4.0 * q8_gap);
  EXPECT_GT(static_gap, 0.0);
}

TEST_F(W8A8Model, ATokensLogitsAreTheSameBitsInABatch) {
  const std::string dyn = *dir_ + "/dyn3.gguf";
  hand_made(dyn, "", [](const std::string& stem) { return stem.find("ffn_down") != std::string::npos ? 0.5f : 0.0f; });
  const std::vector<int32_t> ids(ids_->begin(), ids_->begin() + 40);
  for (bool int8 : {true, false}) {
    const std::vector<float> batched = logits_of(dyn, ids, int8, 40), alone = logits_of(dyn, ids, int8, 1);
    ASSERT_EQ(batched.size(), alone.size());
    EXPECT_EQ(std::memcmp(batched.data(), alone.data(), batched.size() * sizeof(float)), 0) << "int8 " << int8;
  }
}

// `ll3 quantize ... w8a8` on the trained model, calibrated on text the prompt is not in: its
// logits stay about as close to the F16 model's as Q8_0's do (relative L2 against Q8_0's,
// measured on Zen 5: 1.17x with the default per-input choice, 1.44x all static; the KL
// divergences are in docs/QUALITY.md).
TEST_F(W8A8Model, CalibratedFileStaysAsCloseToTheFloatModelAsQ8_0) {
  const std::string calib = *dir_ + "/calib.txt";
  test::write_file(calib, test::read_file(test::shared_dir() + "/models/trained-test.txt").substr(200000, 60000));
  const std::vector<float> ref = logits_of(trained_path(), *ids_, false, 64);
  const double q8_err = rel_l2(logits_of(q8_path(), *ids_, true, 64), ref);
  for (const char* flags : {"", "--max-static-loss-db 1000"}) {
    const std::string out = *dir_ + "/calibrated.gguf";
    auto r = test::run_command(test::ll3_binary() + " quantize " + trained_path() + " " + out + " w8a8 --calib " +
                                   calib + " -c 256 --calib-chunks 8 -t 2 " + flags + " 2>&1", true);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto f = GgufFile::open(out);
    ASSERT_TRUE(f.ok()) << f.message();
    int dynamic = 0, inputs = 0;
    for (const GgufTensorInfo& t : (*f)->tensors()) {
      if (t.name.find(w8a8_format::kInputScaleSuffix) == std::string::npos) continue;
      ++inputs;
      dynamic += *reinterpret_cast<const float*>(t.data) == 0.0f;
    }
    EXPECT_EQ(inputs, 28);
    EXPECT_EQ((*f)->get_int(w8a8_format::kDynamicCountKey).value_or(-1) == 0, dynamic == 0);
    const double err = rel_l2(logits_of(out, *ids_, true, 64), ref);
    std::printf("relative L2 of the logits against F16 ('%s'): W8A8 %.5f (%d of 28 products per token), Q8_0 %.5f\n",
                flags, err, dynamic, q8_err);
    EXPECT_LT(err, (std::string(flags).empty() ? 1.5 : 2.5) * q8_err) << flags;
    if (!std::string(flags).empty()) EXPECT_EQ(dynamic, 0);
  }
}

// A Hugging Face directory of the same model quantizes to the same tensors where calibration
// does not enter (no smoothing, every input per token): its Q / K rows come back in GGUF's order.
// Calibrated, the HF model's attention sums in another order (it rotates Q and K in halves), so
// the scales move by rounding and the logits by about half what 8-bit activations cost.
TEST_F(W8A8Model, AHuggingFaceDirectoryQuantizesLikeItsGguf) {
  const std::string calib = *dir_ + "/calib-hf.txt", hf = *dir_ + "/hf";
  test::write_file(calib, test::read_file(test::shared_dir() + "/models/trained-test.txt").substr(300000, 20000));
  auto f = GgufFile::open(trained_path());
  ASSERT_TRUE(f.ok()) << f.message();
  ASSERT_TRUE(export_hf_directory(**f, hf, 2, test::shared_dir() + "/tokenizers/llama3").ok());
  for (const char* flags : {"--smooth-alpha 0 --max-static-loss-db 0", ""}) {
    std::vector<std::string> outs;
    for (const std::string& in : {trained_path(), hf}) {
      outs.push_back(*dir_ + "/from-" + std::to_string(outs.size()) + ".gguf");
      auto r = test::run_command(test::ll3_binary() + " quantize " + in + " " + outs.back() + " w8a8 --calib " + calib +
                                     " -c 128 --calib-chunks 4 -t 2 " + flags + " 2>&1", true);
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    const double d = rel_l2(logits_of(outs[1], *ids_, true, 64), logits_of(outs[0], *ids_, true, 64));
    std::printf("'%s': relative L2 between the logits of the W8A8 files from the HF directory and from the GGUF: %.2e\n",
                flags, d);
    if (std::string(flags).empty()) {
      EXPECT_LT(d, 5e-3);
      continue;
    }
    EXPECT_EQ(d, 0.0);
    auto a = GgufFile::open(outs[0]), b = GgufFile::open(outs[1]);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ((*a)->tensors().size(), (*b)->tensors().size());
    for (const GgufTensorInfo& t : (*a)->tensors()) {
      const GgufTensorInfo* u = (*b)->find_tensor(t.name);
      ASSERT_NE(u, nullptr) << t.name;
      EXPECT_TRUE(u->type == t.type && u->nbytes == t.nbytes && std::memcmp(u->data, t.data, t.nbytes) == 0) << t.name;
    }
  }
}

std::string load_error(const std::string& path) {
  auto m = LlamaModel::load(path);
  EXPECT_FALSE(m.ok());
  return m.ok() ? std::string() : m.message();
}

TEST_F(W8A8Model, BrokenScalesAreRefusedWithWhatAndWhere) {
  const auto zero = [](const std::string&) { return 0.0f; };
  const std::string p = *dir_ + "/broken.gguf";
  hand_made(p, "", zero, [](std::string& name, DType&, std::vector<float>&) {
    if (name == "blk.1.ffn_up.weight_scale") name.clear();  // dropped
  });
  EXPECT_NE(load_error(p).find("W8A8 tensor 'blk.1.ffn_up.weight' has no 'blk.1.ffn_up.weight_scale'"), std::string::npos)
      << load_error(p);
  hand_made(p, "", zero, [](std::string& name, DType&, std::vector<float>& v) {
    if (name == "blk.2.attn_k.weight_scale") v[5] = -1.0f;
  });
  EXPECT_NE(load_error(p).find("'blk.2.attn_k.weight_scale' row 5: scale -1 is not a positive number"), std::string::npos)
      << load_error(p);
  hand_made(p, "", zero, [](std::string& name, DType&, std::vector<float>& v) {
    if (name == "blk.0.attn_v.input_scale") v[0] = std::nanf("");
  });
  EXPECT_NE(load_error(p).find("'blk.0.attn_v.input_scale' = nan: expected a scale >= 0"), std::string::npos)
      << load_error(p);
  hand_made(p, "", zero, [](std::string& name, DType& type, std::vector<float>&) {
    if (name == "blk.3.ffn_down.weight_scale") type = DType::F16;
  });
  EXPECT_NE(load_error(p).find("'blk.3.ffn_down.weight_scale' is f16 [256], expected f32 [256]"), std::string::npos)
      << load_error(p);
}

TEST_F(W8A8Model, AnotherFormatVersionIsRefused) {
  const std::string p = *dir_ + "/v2.gguf";
  hand_made(p, "", [](const std::string&) { return 0.0f; }, {}, 2);
  EXPECT_NE(load_error(p).find("W8A8 format version 2 (ll3.w8a8.version); this ll3 reads version 1"), std::string::npos)
      << load_error(p);
}

TEST_F(W8A8Model, TheGpuIsRefusedWithAReason) {
  const std::string p = *dir_ + "/gpu.gguf";
  hand_made(p, "", [](const std::string&) { return 0.0f; });
  auto m = LlamaModel::load(p);
  ASSERT_TRUE(m.ok()) << m.message();
  KvCacheConfig kc;
  kc.n_layers = (*m)->config.n_layers;
  kc.n_kv_heads = (*m)->config.n_kv_heads;
  kc.head_dim = (*m)->config.head_dim;
  kc.n_blocks = 4;
  auto kv = KvCache::create(kc);
  ASSERT_TRUE(kv.ok()) << kv.message();
  ThreadPool pool(1);
  RunnerOptions ro;
  ro.gpu_layers = static_cast<int>((*m)->config.n_layers);
  auto r = make_runner(**m, **kv, pool, ro);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("W8A8 (static int8) weights have CPU kernels only"), std::string::npos) << r.message();
  ro.gpu_layers = 0;
  EXPECT_TRUE(make_runner(**m, **kv, pool, ro).ok());
}

}  // namespace
}  // namespace ll3
