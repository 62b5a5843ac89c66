#include "backend/cpu/cpu_runner.h"

#include <algorithm>
#include <cmath>

#include "kernels/attention.h"
#include "kernels/gemm_f32.h"
#include "kernels/ops.h"
#include "kernels/panels.h"

namespace ll3 {

CpuRunner::CpuRunner(const LlamaModel& model, KvCache& kv, ThreadPool& pool, int64_t max_batch_tokens,
                         bool int8_activations, bool amx_prompts, LayerRange layers)
    : m_(model), c_(model.config), kv_(kv), pool_(pool), max_tokens_(std::max<int64_t>(1, max_batch_tokens)),
      range_(layers) {
  if (range_.end < 0 || range_.end > c_.n_layers) range_.end = c_.n_layers;
  range_.begin = std::clamp<int64_t>(range_.begin, 0, range_.end);
  const int64_t T = max_tokens_;
  q_dim_ = c_.n_heads * c_.head_dim;
  kv_dim_ = c_.n_kv_heads * c_.head_dim;
  x_.resize(T * c_.dim);
  xb_.resize(T * c_.dim);
  q_.resize(T * q_dim_);
  k_.resize(T * kv_dim_);
  v_.resize(T * kv_dim_);
  att_.resize(T * q_dim_);
  proj_.resize(T * c_.dim);
  gate_.resize(T * c_.ffn_dim);
  up_.resize(T * c_.ffn_dim);
  rope_cos_.resize(T * c_.head_dim / 2);
  rope_sin_.resize(T * c_.head_dim / 2);
  const int group = static_cast<int>(c_.n_heads / c_.n_kv_heads);
  att_scratch_floats_ = kernels::attend_scratch_floats(group, c_.head_dim, kv.config().block_size);
  att_scratch_.resize(static_cast<size_t>(pool.size() * att_scratch_floats_));
  runs_.reserve(static_cast<size_t>(T));
  const size_t max_parts = static_cast<size_t>(kPartialFloats / (group * c_.head_dim));
  att_jobs_.reserve(static_cast<size_t>(T * c_.n_kv_heads) + max_parts);
  att_splits_.reserve(static_cast<size_t>(T * c_.n_kv_heads));
  att_parts_.reserve(max_parts);
  part_out_.resize(static_cast<size_t>(kPartialFloats));
  part_max_.resize(static_cast<size_t>(kPartialFloats / c_.head_dim));
  part_sum_.resize(part_max_.size());
  token_pos_.resize(T);
  token_seq_.resize(T);
  logit_seq_.resize(T);
  mm_scratch_.max_cols = std::max({c_.dim, c_.ffn_dim, q_dim_});
  wrows_.resize(static_cast<size_t>(pool.size()) * kLaneRowBlock * mm_scratch_.max_cols);
  mm_scratch_.rows = wrows_.data();
  if (kernels::gemm_f32_lanes() != nullptr && T > 1 && (!int8_activations || model.has_float_weights())) {
    xlanes_.resize(kernels::lanes_x_floats(T, mm_scratch_.max_cols));
    wlanes_.resize(static_cast<size_t>(pool.size()) * kernels::lanes_w_floats(kLaneRowBlock, mm_scratch_.max_cols));
    mm_scratch_.xlanes = xlanes_.data();
    mm_scratch_.wlanes = wlanes_.data();
  }
  mm_scratch_.wbuf_thread_bytes = matmul_wbuf_bytes(model.max_row_bytes());
  wbuf_.resize(static_cast<size_t>(pool.size()) * mm_scratch_.wbuf_thread_bytes);
  mm_scratch_.wbuf = wbuf_.data();
  xq_.resize(static_cast<size_t>(T) * xq_row_bytes(mm_scratch_.max_cols));
  mm_scratch_.xq = xq_.data();
  act_scales_.resize(static_cast<size_t>(T));
  mm_scratch_.act_scales = act_scales_.data();
  panel_act_.resize(kMaxSharedOutputs * kernels::panel_act_bytes(mm_scratch_.max_cols));
  mm_scratch_.panel_act = panel_act_.data();
  mm_scratch_.int8_activations = int8_activations;
  if (int8_activations || model.has_float_weights()) {  // rounded, or deinterleaved for BF16's pairs
    xr_.resize(static_cast<size_t>(T) * float_input_ld(mm_scratch_.max_cols));
    mm_scratch_.xr = xr_.data();
  }
  mm_scratch_.bf16 = int8_activations && amx_prompts && T >= kBf16MinTokens ? kernels::bf16_gemm_amx() : nullptr;
  if (mm_scratch_.bf16 != nullptr) {
    xbf_.resize(kernels::bf16_packed_x_elems(T, mm_scratch_.max_cols));
    mm_scratch_.xbf = xbf_.data();
  }
}

Status CpuRunner::validate(const BatchPlan& plan) const {
  return validate_plan(plan, max_tokens_, c_.n_vocab, kv_.config().block_size, kv_.config().n_blocks, lora_ != nullptr);
}

void CpuRunner::enable_lora() {
  if (!lora_) lora_ = std::make_unique<LoraProducts>(max_tokens_, LoraProducts::kMaxRank);
}

// x += proj over the batch's T rows and, with a norm weight, xb = rmsnorm(x) for the block
// after, in the same pass over the threads (a parallel region fewer per block: each one ends
// with the threads waiting for the slowest).
void CpuRunner::add_residual(int64_t T, const float* norm_weight) {
  const int64_t dim = c_.dim;
  pool_.parallel_for(T, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      float* x = &x_[t * dim];
      const float* p = &proj_[t * dim];
      for (int64_t i = 0; i < dim; ++i) x[i] += p[i];
      if (norm_weight != nullptr) ops::rmsnorm(x, norm_weight, &xb_[t * dim], dim, c_.norm_eps);
    }
  });
}

Status CpuRunner::forward(const BatchPlan& plan, float* logits, float* hidden) {
  if (range_.begin != 0 || range_.end != c_.n_layers || !range_.output) {
    return Status::error("forward: this CPU runner holds part of the layers (use forward_part)");
  }
  return forward_part(plan, nullptr, nullptr, logits, hidden);
}

Status CpuRunner::forward_part(const BatchPlan& plan, const float* x_in, float* x_out, float* logits, float* hidden) {
  LL3_RETURN_IF_ERROR(validate(plan));
  if (range_.output && !plan.hidden_rows.empty() && hidden == nullptr) {
    return Status::error("forward: hidden rows asked for without a buffer");
  }
  if ((x_in == nullptr) != (range_.begin == 0)) {
    return Status::error("forward_part: the residual stream comes in exactly when the first layer is not layer 0");
  }
  if ((x_out == nullptr) != range_.output) {
    return Status::error("forward_part: the residual stream goes out exactly when the output layer is not here");
  }
  const int64_t T = static_cast<int64_t>(plan.tokens.size());
  const int64_t dim = c_.dim, hd = c_.head_dim, half = hd / 2;

  // Position and RoPE angles of every batch row.
  for (size_t s = 0; s < plan.seqs.size(); ++s) {
    const SeqBatch& seq = plan.seqs[s];
    for (int32_t i = 0; i < seq.n_tokens; ++i) {
      const int64_t row = seq.token_begin + i;
      token_pos_[row] = seq.n_past + i;
      token_seq_[row] = static_cast<int32_t>(s);
      ops::rope_angles(token_pos_[row], hd, c_.rope_theta, m_.rope_factors.data(),
                       &rope_cos_[row * half], &rope_sin_[row * half]);
    }
  }

  plan_attention_runs(plan);

  if (x_in != nullptr) {
    std::copy(x_in, x_in + T * dim, x_.begin());
  } else {  // x = embedding(tokens)
    for (int64_t t = 0; t < T; ++t) {
      m_.tok_embd.traits->to_float(m_.tok_embd.row_in(plan.tokens[t], wbuf_.data()), &x_[t * dim], dim);
    }
  }
  for (int64_t l = range_.begin; l < range_.end; ++l) layer(plan, l, T);
  if (x_out != nullptr) {
    std::copy(x_.begin(), x_.begin() + T * dim, x_out);
    return Status();
  }
  output(plan, logits, hidden);
  return Status();
}

void CpuRunner::layer(const BatchPlan& plan, int64_t l, int64_t T) {
  const LlamaLayer& L = m_.layers[l];
  const int64_t dim = c_.dim, hd = c_.head_dim, half = hd / 2;
  const int64_t bs = kv_.config().block_size;

  // Attention block: x += Wo · attention(RoPE(Wq·norm(x)), RoPE(Wk·norm(x)), Wv·norm(x))
  if (l == range_.begin) rmsnorm_rows(L.attn_norm.data(), T);  // later layers': with the residual before
  tap("attn_norm", l, xb_, T, dim);
  matmul_shared(pool_, {{&L.wq, q_.data()}, {&L.wk, k_.data()}, {&L.wv, v_.data()}}, xb_.data(), T, mm_scratch_);
  const int32_t* seq = token_seq_.data();
  lora(plan, seq, T, l, LoraTarget::kQ, xb_.data(), dim, q_.data(), q_dim_);
  lora(plan, seq, T, l, LoraTarget::kK, xb_.data(), dim, k_.data(), kv_dim_);
  lora(plan, seq, T, l, LoraTarget::kV, xb_.data(), dim, v_.data(), kv_dim_);
  tap("Qcur", l, q_, T, q_dim_);
  tap("Kcur", l, k_, T, kv_dim_);
  tap("Vcur", l, v_, T, kv_dim_);
  // RoPE, and this position's K and V appended to the sequence's cache blocks, on every
  // thread: on one, with the F16 conversion, it was 1.5% of a 16-row decode step.
  pool_.parallel_for(T, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      ops::rope(&q_[t * q_dim_], c_.n_heads, hd, &rope_cos_[t * half], &rope_sin_[t * half], c_.rope_half_pairs);
      ops::rope(&k_[t * kv_dim_], c_.n_kv_heads, hd, &rope_cos_[t * half], &rope_sin_[t * half], c_.rope_half_pairs);
      const int64_t pos = token_pos_[t];
      kv_.store_uncounted(l, plan.seqs[token_seq_[t]].block_table[pos / bs], pos % bs, &k_[t * kv_dim_],
                          &v_[t * kv_dim_]);
    }
  });
  // The blocks' versions tell a device mirror (the CUDA runner's) to upload them again; a split's
  // front writes layers no mirror holds (the GPU's are the last ones), so it leaves them be.
  if (range_.end == c_.n_layers) {
    for (int64_t t = 0; t < T; ++t) kv_.touch_block(plan.seqs[token_seq_[t]].block_table[token_pos_[t] / bs]);
  }
  tap("Qrope", l, q_, T, q_dim_);
  tap("Krope", l, k_, T, kv_dim_);
  attention(plan, l);
  tap("kqv_out", l, att_, T, q_dim_);
  matmul(pool_, L.wo, att_.data(), proj_.data(), T, mm_scratch_);
  lora(plan, seq, T, l, LoraTarget::kO, att_.data(), q_dim_, proj_.data(), dim);
  tap("attn_out", l, proj_, T, dim);
  add_residual(T, L.ffn_norm.data());
  tap("ffn_inp", l, x_, T, dim);

  // Feed-forward block: x += W_down · (silu(W_gate·norm(x)) * W_up·norm(x))
  tap("ffn_norm", l, xb_, T, dim);
  matmul_shared(pool_, {{&L.w_gate, gate_.data()}, {&L.w_up, up_.data()}}, xb_.data(), T, mm_scratch_);
  lora(plan, seq, T, l, LoraTarget::kGate, xb_.data(), dim, gate_.data(), c_.ffn_dim);
  lora(plan, seq, T, l, LoraTarget::kUp, xb_.data(), dim, up_.data(), c_.ffn_dim);
  tap("ffn_gate", l, gate_, T, c_.ffn_dim);
  tap("ffn_up", l, up_, T, c_.ffn_dim);
  const int64_t ffn = c_.ffn_dim;
  pool_.parallel_for(T, [&](int64_t b, int64_t e, int) { ops::swiglu(&gate_[b * ffn], &up_[b * ffn], (e - b) * ffn); });
  tap("ffn_swiglu", l, gate_, T, ffn);
  matmul(pool_, L.w_down, gate_.data(), proj_.data(), T, mm_scratch_);
  lora(plan, seq, T, l, LoraTarget::kDown, gate_.data(), ffn, proj_.data(), dim);
  tap("ffn_out", l, proj_, T, dim);
  add_residual(T, l + 1 < range_.end ? m_.layers[l + 1].attn_norm.data() : nullptr);
  tap("l_out", l, x_, T, dim);
}

// The rows asked for through the output layer: hidden = norm(x), logits = W_out · norm(x).
void CpuRunner::output(const BatchPlan& plan, float* logits, float* hidden) {
  const int64_t dim = c_.dim;
  // The final hidden state norm(x) of the rows embeddings pool: the same arithmetic as the
  // rows the LM head reads below.
  pool_.parallel_for(static_cast<int64_t>(plan.hidden_rows.size()), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      ops::rmsnorm(&x_[plan.hidden_rows[i] * dim], m_.output_norm.data(), &hidden[i * dim], dim, c_.norm_eps);
    }
  });

  // logits = W_out · norm(x), only for the rows asked for.
  const int64_t n_out = static_cast<int64_t>(plan.logit_rows.size());
  if (n_out == 0) return;
  for (int64_t i = 0; i < n_out; ++i) {
    ops::rmsnorm(&x_[plan.logit_rows[i] * dim], m_.output_norm.data(), &xb_[i * dim], dim, c_.norm_eps);
  }
  tap("result_norm", -1, xb_, n_out, dim);
  matmul(pool_, m_.output, xb_.data(), logits, n_out, mm_scratch_);
  if (LoraProducts::any(plan)) {
    for (int64_t i = 0; i < n_out; ++i) logit_seq_[i] = token_seq_[plan.logit_rows[i]];
    lora(plan, logit_seq_.data(), n_out, -1, LoraTarget::kQ, xb_.data(), dim, logits, c_.n_vocab);
  }
}

void CpuRunner::rmsnorm_rows(const float* weight, int64_t T) {
  const int64_t dim = c_.dim;
  pool_.parallel_for(T, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) ops::rmsnorm(&x_[t * dim], weight, &xb_[t * dim], dim, c_.norm_eps);
  });
}

// Consecutive rows of one sequence (a prompt chunk) attend together, reading each K and V row
// once for the run. Then the jobs: a (run, KV head) pair whose work (rows x positions) exceeds
// a quarter of a thread's share is split into its chunks, as the partials' room allows, so a
// long sequence beside short ones, or one sequence on more threads than KV heads, keeps every
// thread busy. Splitting changes no bits (kernels/attention.h), so this may be any policy.
void CpuRunner::plan_attention_runs(const BatchPlan& plan) {
  const int64_t n_kv = c_.n_kv_heads, hd = c_.head_dim, bs = kv_.config().block_size;
  const int group = static_cast<int>(c_.n_heads / c_.n_kv_heads);
  runs_.clear();
  int64_t total = 0;  // rows x positions, per KV head
  for (const SeqBatch& seq : plan.seqs) {
    for (int32_t i = 0; i < seq.n_tokens;) {
      const int32_t m = std::min(kernels::kMaxAttendRows, seq.n_tokens - i);
      runs_.push_back({seq.token_begin + i, m});
      total += m * (seq.n_past + i + m);
      i += m;
    }
  }
  const int64_t share = total * n_kv / (4 * pool_.size());
  att_jobs_.clear();
  att_splits_.clear();
  att_parts_.clear();
  int64_t floats = 0;
  for (size_t r = 0; r < runs_.size(); ++r) {
    const int64_t n_last = token_pos_[runs_[r].row] + runs_[r].m;
    const int64_t chunks = kernels::attend_chunks(n_last, bs), part = runs_[r].m * group;
    const bool split = pool_.size() > 1 && chunks > 1 && runs_[r].m * n_last > share &&
                       floats + n_kv * chunks * part * hd <= kPartialFloats;
    for (int32_t g = 0; g < n_kv; ++g) {
      const int32_t run = static_cast<int32_t>(r);
      if (!split) {
        att_jobs_.push_back({run, g, 0, -1});
        continue;
      }
      att_splits_.push_back({run, g, static_cast<int32_t>(att_parts_.size()), static_cast<int32_t>(chunks)});
      for (int32_t c = 0; c < chunks; ++c) {
        att_jobs_.push_back({run, g, c, static_cast<int32_t>(att_parts_.size())});
        att_parts_.push_back({&part_out_[floats], &part_max_[floats / hd], &part_sum_[floats / hd]});
        floats += part * hd;
      }
    }
  }
}

// Causal grouped-query attention of every (run of rows, KV head) pair over the rows' sequence,
// positions 0 .. pos, read from the paged cache: the query heads sharing a KV head together;
// then the split pairs' partials merged.
void CpuRunner::attention(const BatchPlan& plan, int64_t layer) {
  const int64_t hd = c_.head_dim;
  const int group = static_cast<int>(c_.n_heads / c_.n_kv_heads);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Runs late in a prompt attend over more positions: hand out single jobs so the threads
  // finish together.
  pool_.parallel_for_dynamic(static_cast<int64_t>(att_jobs_.size()), 1, [&](int64_t begin, int64_t end, int thread) {
    float* scratch = &att_scratch_[static_cast<size_t>(thread * att_scratch_floats_)];
    for (int64_t j = begin; j < end; ++j) {
      const AttentionJob& job = att_jobs_[j];
      const AttentionRun& r = runs_[job.run];
      const int64_t t = r.row, head0 = job.head * group;  // the first query head reading this KV head
      const kernels::KvHeadView kv = kv_.head_view(layer, job.head, plan.seqs[token_seq_[t]].block_table);
      const float* q = &q_[t * q_dim_ + head0 * hd];
      if (job.part < 0) {
        kernels::attend_rows(q, q_dim_, r.m, group, hd, kv, token_pos_[t] + 1, scale, scratch,
                             &att_[t * q_dim_ + head0 * hd]);
      } else {
        kernels::attend_chunk(q, q_dim_, r.m, group, hd, kv, token_pos_[t] + 1, job.chunk, scale, scratch,
                              att_parts_[job.part]);
      }
    }
  });
  if (att_splits_.empty()) return;
  pool_.parallel_for(static_cast<int64_t>(att_splits_.size()), [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const AttentionSplit& sp = att_splits_[i];
      const AttentionRun& r = runs_[sp.run];
      kernels::attend_combine(&att_parts_[sp.first_part], sp.n_parts, r.m, group, hd,
                              &att_[r.row * q_dim_ + sp.head * group * hd], q_dim_);
    }
  });
}

}  // namespace ll3
