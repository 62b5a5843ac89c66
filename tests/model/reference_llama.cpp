#include "reference_llama.h"

#include <cmath>

namespace ll3::test {

namespace {

using Mat = std::vector<double>;  // row-major

Mat dequant(const WeightMatrix& w) {
  const TypeTraits* ref = type_traits_ref(w.type);
  Mat out(static_cast<size_t>(w.rows * w.cols));
  std::vector<float> row(static_cast<size_t>(w.cols));
  std::vector<uint8_t> bytes(w.row_bytes);  // a row unpacked from its decode panel
  for (int64_t r = 0; r < w.rows; ++r) {
    ref->to_float(w.row_in(r, bytes.data()), row.data(), w.cols);
    for (int64_t c = 0; c < w.cols; ++c) out[r * w.cols + c] = row[c];
  }
  return out;
}

// y (rows) = W (rows x cols) x
std::vector<double> mv(const Mat& W, int64_t rows, int64_t cols, const std::vector<double>& x) {
  std::vector<double> y(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += W[r * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  double scale = 1.0 / std::sqrt(ss / x.size() + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
  return y;
}

void rope(std::vector<double>& v, int64_t n_heads, int64_t hd, int64_t pos, const LlamaModel& m) {
  const LlamaConfig& c = m.config;
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < hd / 2; ++i) {
      double theta = pos * std::pow(static_cast<double>(c.rope_theta), -2.0 * i / hd) / m.rope_factors[i];
      int64_t a = c.rope_half_pairs ? i : 2 * i, b = c.rope_half_pairs ? i + hd / 2 : 2 * i + 1;
      double x0 = v[h * hd + a], x1 = v[h * hd + b];
      v[h * hd + a] = x0 * std::cos(theta) - x1 * std::sin(theta);
      v[h * hd + b] = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
  }
}

}  // namespace

std::vector<std::vector<double>> reference_logits(const LlamaModel& m, const std::vector<int32_t>& tokens,
                                                  const std::vector<int64_t>& positions) {
  const LlamaConfig& c = m.config;
  const int64_t T = static_cast<int64_t>(tokens.size()), dim = c.dim, hd = c.head_dim;
  const int64_t qd = c.n_heads * hd, kvd = c.n_kv_heads * hd, group = c.n_heads / c.n_kv_heads;
  std::vector<std::vector<double>> x(static_cast<size_t>(T));
  {
    std::vector<float> row(static_cast<size_t>(dim));
    const TypeTraits* ref = type_traits_ref(m.tok_embd.type);
    std::vector<uint8_t> bytes(m.tok_embd.row_bytes);
    for (int64_t t = 0; t < T; ++t) {
      ref->to_float(m.tok_embd.row_in(tokens[t], bytes.data()), row.data(), dim);
      x[t].assign(row.begin(), row.end());
    }
  }
  for (const LlamaLayer& L : m.layers) {
    Mat wq = dequant(L.wq), wk = dequant(L.wk), wv = dequant(L.wv), wo = dequant(L.wo);
    Mat wg = dequant(L.w_gate), wu = dequant(L.w_up), wd = dequant(L.w_down);
    std::vector<std::vector<double>> q(T), k(T), v(T);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> xn = rmsnorm(x[t], L.attn_norm, c.norm_eps);
      q[t] = mv(wq, qd, dim, xn);
      k[t] = mv(wk, kvd, dim, xn);
      v[t] = mv(wv, kvd, dim, xn);
      rope(q[t], c.n_heads, hd, t, m);
      rope(k[t], c.n_kv_heads, hd, t, m);
    }
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> att(static_cast<size_t>(qd), 0.0);
      for (int64_t h = 0; h < c.n_heads; ++h) {
        int64_t g = h / group;
        std::vector<double> s(static_cast<size_t>(t + 1));
        double mx = -1e300;
        for (int64_t p = 0; p <= t; ++p) {
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) d += q[t][h * hd + i] * k[p][g * hd + i];
          s[p] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[p]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t p = 0; p <= t; ++p) {
          for (int64_t i = 0; i < hd; ++i) att[h * hd + i] += s[p] / sum * v[p][g * hd + i];
        }
      }
      std::vector<double> o = mv(wo, dim, qd, att);
      for (int64_t i = 0; i < dim; ++i) x[t][i] += o[i];
      std::vector<double> xn = rmsnorm(x[t], L.ffn_norm, c.norm_eps);
      std::vector<double> gt = mv(wg, c.ffn_dim, dim, xn), up = mv(wu, c.ffn_dim, dim, xn);
      for (int64_t i = 0; i < c.ffn_dim; ++i) gt[i] = gt[i] / (1.0 + std::exp(-gt[i])) * up[i];
      std::vector<double> d = mv(wd, dim, c.ffn_dim, gt);
      for (int64_t i = 0; i < dim; ++i) x[t][i] += d[i];
    }
  }
  Mat wout = dequant(m.output);
  std::vector<std::vector<double>> out;
  for (int64_t p : positions) out.push_back(mv(wout, c.n_vocab, dim, rmsnorm(x[p], m.output_norm, c.norm_eps)));
  return out;
}

double rel_l2(const float* a, const double* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace ll3::test
