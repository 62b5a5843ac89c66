#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/half.h"
#include "kernels/float_dot_order.h"
#include "kernels/gemm_f32.h"
#include "kernels/panels.h"
#include "kernels/w8a8.h"

namespace ll3 {

namespace {

// Rows per work item: small enough that threads finish together (a preempted thread leaves
// its share to the others), large enough that each thread streams long runs: 4 items per
// thread's range. Decode, 1B, 2 threads, medians of 5-6 interleaved runs against 16 items:
// Q4_K_M 38.8 -> 39.1 t/s, Q8_0 23.5 -> 23.9 (2 items: 39.4, 24.0). Again with thieves taking
// half of what is left (ThreadPool::parallel_for_stealing), 6 rounds: 16 items 38.6 / 23.7,
// 4 items 38.8 / 24.3.
int64_t row_chunk(const ThreadPool& pool, int64_t rows) {
  return std::max<int64_t>(16, rows / (static_cast<int64_t>(pool.size()) * 4));
}

// Work items of a decode product (one activation row): units of about 128 KB of weights, a few
// microseconds of streaming. A thread that has run out of work waits at the barrier for the
// item the other is busy with, and a quarter of a thread's range (row_chunk) was up to 27 MB
// for the 1B preset's output matrix: 1B Q4_K_M, 2 threads, Zen 5, alternated, 61.2 -> 63.5 t/s,
// with 16 KB, 64 KB or 256 KB items alike.
int64_t decode_chunk(size_t unit_bytes) {
  constexpr size_t kDecodeChunkBytes = size_t{128} << 10;
  return static_cast<int64_t>(std::max<size_t>(1, kDecodeChunkBytes / std::max<size_t>(1, unit_bytes)));
}

enum class Path { kBf16, kInt8, kFloat, kW8A8 };

// Blocks of the prompt paths start on panel boundaries and cover whole panels.
static_assert(kRowBlock == kernels::kPanelRows && kernels::kBf16RowBlock % kernels::kPanelRows == 0);
// W8A8's units are the integer path's: 16 rows.
static_assert(kernels::kW8A8PanelRows == kernels::kPanelRows);

Path path_of(const WeightMatrix& W, int64_t n, const MatmulScratch& scratch) {
  const TypeTraits& tr = *W.traits;
  if (W.type == DType::W8A8) return Path::kW8A8;
  if (scratch.bf16 != nullptr && n >= kBf16MinTokens && W.type != DType::F32 && W.cols % 32 == 0) return Path::kBf16;
  if (scratch.int8_activations && tr.dot_q != nullptr && tr.vec_dot_type != DType::F32) return Path::kInt8;
  return Path::kFloat;
}

// Units of 16 rows (a panel in the panel layout) of the integer path.
int64_t units_of(const WeightMatrix& W) { return (W.rows + kernels::kPanelRows - 1) / kernels::kPanelRows; }
int64_t blocks_of(const WeightMatrix& W) { return (W.rows + kernels::kBf16RowBlock - 1) / kernels::kBf16RowBlock; }

// The products of a group laid end to end: a virtual index (row or block) over all of them.
struct Group {
  std::array<MatmulOutput, kMaxSharedOutputs> out{};
  int count = 0;
  std::array<int64_t, kMaxSharedOutputs + 1> start{};  // start[j]: first virtual index of product j
  std::array<double, kMaxSharedOutputs> index_bytes{};  // weight bytes per index of product j
  double bytes = 0;

  Group(std::initializer_list<MatmulOutput> outputs, int64_t (*size)(const WeightMatrix&)) {
    for (const MatmulOutput& o : outputs) {
      out[count] = o;
      start[count + 1] = start[count] + size(*o.W);
      index_bytes[count] = static_cast<double>(o.W->rows) * static_cast<double>(o.W->row_bytes) / size(*o.W);
      bytes += index_bytes[count] * (start[count + 1] - start[count]);
      ++count;
    }
  }
  int64_t total() const { return start[count]; }
  // The index where thread t of nt starts when every thread gets the same weight bytes: the
  // products of a group can differ in type (Q4_K_M's Q, K and V: Q4_K, Q4_K, Q6_K), and a split
  // by index would leave one thread the heavier part.
  int64_t split(int t, int nt) const {
    double left = bytes * t / nt;
    for (int j = 0; j < count; ++j) {
      const double b = index_bytes[j] * (start[j + 1] - start[j]);
      if (left < b) return start[j] + static_cast<int64_t>(left / index_bytes[j] + 0.5);
      left -= b;
    }
    return total();
  }
  const WeightMatrix& first() const { return *out[0].W; }
  // Calls fn(product index, local begin, local end) for each product [begin, end) overlaps.
  template <class F>
  void for_each(int64_t begin, int64_t end, F&& fn) const {
    for (int j = 0; j < count; ++j) {
      const int64_t b = std::max(begin, start[j]), e = std::min(end, start[j + 1]);
      if (b < e) fn(j, b - start[j], e - start[j]);
    }
  }
};

uint8_t* thread_wbuf(const MatmulScratch& scratch, int thread) {
  return scratch.wbuf + static_cast<size_t>(thread) * scratch.wbuf_thread_bytes;
}

// fn(product j, first unit, end unit, thread) over the group's units of 16 rows, split across
// the threads by weight bytes; decode items of about 128 KB of the first matrix's rows. A
// batched step's unit costs n times a decode one, so its chunks are 4 times smaller: the last
// chunk a thread is busy with is what the other waits for at the barrier. 16-row steps (bench
// --parallel 16, alternated): with a neighbour slowing one core, 222-230 -> 233-244 t/s, the
// main thread's wait 17 -> 8 us per parallel region; on a quiet host no change.
template <class F>
void for_each_unit_range(ThreadPool& pool, const Group& units, int64_t n, F&& fn) {
  constexpr int64_t P = kernels::kPanelRows;
  const int64_t chunk = n == 1 ? decode_chunk(units.first().row_bytes * P)
                               : std::max<int64_t>(1, row_chunk(pool, units.total() * P) / P / 4);
  auto split = [&](int t, int nt) { return units.split(t, nt); };
  pool.parallel_for_stealing(units.total(), chunk, split, [&](int64_t begin, int64_t end, int thread) {
    units.for_each(begin, end, [&](int j, int64_t u0, int64_t u1) { fn(j, u0, u1, thread); });
  });
}

// Bytes of quantized activation rows a prompt panel kernel takes at a time (matmul_q): 1B Q4_K_M
// pp256 on Zen 5, 435-440 -> 445-455 t/s against all rows at once.
constexpr size_t kPromptActBlockBytes = size_t{256} << 10;

// Integer path: quantize each activation row once, then multiply units of 16 weight rows (a
// panel, or 16 rows of the row layout) split across the threads (for_each_unit_range).
void matmul_q(ThreadPool& pool, const Group& units, const float* x, int64_t n, const MatmulScratch& scratch) {
  constexpr int64_t P = kernels::kPanelRows;
  const DType act_type = units.first().traits->vec_dot_type;
  const TypeTraits& act = *type_traits(act_type);
  const int64_t cols = units.first().cols;
  const size_t xq_bytes = dtype_row_bytes(act_type, cols);
  pool.parallel_for(n, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) act.from_float_act(x + t * cols, scratch.xq + t * xq_bytes, cols);
  });
  const size_t panel_act_bytes = kernels::panel_act_bytes(scratch.max_cols);
  if (n == 1) {  // the decode panel kernels' side data, once per product
    for (int j = 0; j < units.count; ++j) {
      const WeightMatrix& W = *units.out[j].W;
      if (W.panels) kernels::panel_act(W.type, scratch.xq, cols, scratch.panel_act + j * panel_act_bytes);
    }
  }
  for_each_unit_range(pool, units, n, [&](int j, int64_t u0, int64_t u1, int thread) {
    const MatmulOutput& o = units.out[j];
    const WeightMatrix& W = *o.W;
    const TypeTraits& tr = *W.traits;
    const int64_t r0 = u0 * P, r1 = std::min(u1 * P, W.rows);
    if (n == 1 && W.panels) {
      tr.dot_q_panels(W.row(r0), u1 - u0, scratch.xq, scratch.panel_act + j * panel_act_bytes, cols, o.y + r0);
    } else if (n == 1 && tr.dot_q_wrows != nullptr) {
      tr.dot_q_wrows(W.row(r0), W.row_bytes, r1 - r0, scratch.xq, cols, o.y + r0);
    } else if (W.panels && tr.dot_q_panel_rows != nullptr && cols <= kernels::kPanelRowsMaxCols) {
      // Activation rows in blocks that stay in L2 across the chunk's panels: a whole step's
      // rows of 8,192 columns (ffn_down) are 2.3 MB and streamed from L3 once per panel.
      const int64_t nb = std::max<int64_t>(16, static_cast<int64_t>(kPromptActBlockBytes / xq_bytes) / 16 * 16);
      for (int64_t b = 0; b < n; b += nb) {
        tr.dot_q_panel_rows(W.row(r0), u1 - u0, scratch.xq + b * xq_bytes, xq_bytes, std::min(nb, n - b), cols,
                            o.y + b * W.rows + r0, static_cast<size_t>(W.rows));
      }
    } else {
      // Each weight row is unpacked once for all activation rows (y is (n, rows): stride rows).
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t a = u * P, nr = std::min(P, W.rows - a);
        const uint8_t* rows = W.rows_in(a, nr, thread_wbuf(scratch, thread));
        for (int64_t r = 0; r < nr; ++r) {
          tr.dot_q_rows(rows + r * W.row_bytes, scratch.xq, xq_bytes, n, cols, o.y + a + r, static_cast<size_t>(W.rows));
        }
      }
    }
  });
}

// W8A8 path (kernels/w8a8.h): the activation rows quantized once for the group, at the inputs'
// static scale or per row, then one int32 accumulation over k per output, units of 16 rows (a
// panel) split across the threads. Without int8_activations (--float-act) the int8 weights
// multiply the float activations instead: the reference the static scales are measured against.
void matmul_w8a8(ThreadPool& pool, const Group& units, const float* x, int64_t n, const MatmulScratch& scratch) {
  constexpr int64_t P = kernels::kW8A8PanelRows;
  const int64_t cols = units.first().cols;
  const float input_scale = units.first().input_scale;  // the group's products share it
  const bool int8 = scratch.int8_activations;
  const int8_t* xq = reinterpret_cast<const int8_t*>(scratch.xq);
  if (int8) {
    pool.parallel_for(n, [&](int64_t begin, int64_t end, int) {
      for (int64_t t = begin; t < end; ++t) {
        int8_t* row = reinterpret_cast<int8_t*>(scratch.xq) + t * cols;
        if (input_scale > 0) {
          kernels::w8a8_quantize_static(x + t * cols, cols, input_scale, row);
          scratch.act_scales[t] = input_scale;
        } else {
          scratch.act_scales[t] = kernels::w8a8_quantize_dynamic(x + t * cols, cols, row);
        }
      }
    });
  }
  for_each_unit_range(pool, units, n, [&](int j, int64_t u0, int64_t u1, int thread) {
    const MatmulOutput& o = units.out[j];
    const WeightMatrix& W = *o.W;
    if (int8) {
      kernels::w8a8_gemm(W.data, W.row_scales, u0 * P, (u1 - u0) * P, xq, static_cast<size_t>(cols), scratch.act_scales,
                         n, cols, o.y, static_cast<size_t>(W.rows));
      return;
    }
    static const TypeTraits* f32 = type_traits(DType::F32);
    int8_t* q = reinterpret_cast<int8_t*>(thread_wbuf(scratch, thread));
    float* w = scratch.rows + static_cast<size_t>(thread) * kLaneRowBlock * scratch.max_cols;
    for (int64_t r = u0 * P; r < u1 * P; ++r) {
      kernels::w8a8_unpack_row(W.data, r, cols, q);
      for (int64_t c = 0; c < cols; ++c) w[c] = static_cast<float>(q[c]);
      for (int64_t t = 0; t < n; ++t) o.y[t * W.rows + r] = f32->dot_f32(w, x + t * cols, cols) * W.row_scales[r];
    }
  });
}

// AMX path: pack the activations once (per group of 16 tokens), then hand each thread blocks
// of 32 weight rows, which the kernel unpacks chunk by chunk and multiplies with all tokens.
void matmul_bf16(ThreadPool& pool, const Group& g, const float* x, int64_t n, const MatmulScratch& scratch) {
  const kernels::Bf16Gemm& k = *scratch.bf16;
  const int64_t cols = g.first().cols, G = kernels::kBf16TokenGroup, R = kernels::kBf16RowBlock;
  pool.parallel_for((n + G - 1) / G, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      k.pack_x(x + t * G * cols, static_cast<size_t>(cols), std::min(G, n - t * G), cols, scratch.xbf + t * G * cols);
    }
  });
  // Runs of blocks per thread, so each block can prefetch the next one's weights.
  const int64_t run = std::max<int64_t>(1, g.total() / (4 * static_cast<int64_t>(pool.size())));
  pool.parallel_for_dynamic(g.total(), run, [&](int64_t begin, int64_t end, int thread) {
    uint8_t* buf = thread_wbuf(scratch, thread);
    g.for_each(begin, end, [&](int j, int64_t b0, int64_t b1) {
      const MatmulOutput& o = g.out[j];
      const WeightMatrix& W = *o.W;
      kernels::Bf16WeightRows w;
      w.row_bytes = W.row_bytes;
      w.chunk_bytes = dtype_row_bytes(W.type, kernels::kBf16ChunkK);
      w.to_bf16 = W.traits->to_bf16;
      w.to_float = W.traits->to_float;
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t r0 = b * R;
        w.nr = std::min(R, W.rows - r0);
        w.rows = W.rows_in(r0, w.nr, buf);
        w.next = b + 1 < b1 ? W.row(r0 + R) : nullptr;
        w.next_bytes = b + 1 < b1 ? static_cast<size_t>(std::min(R, W.rows - r0 - R)) * W.row_bytes : 0;
        k.gemm(w, scratch.xbf, n, cols, o.y + r0, static_cast<size_t>(W.rows));
      }
    });
  });
}

// F32 / F16 / BF16 weights, which the float path multiplies as stored (quantized ones are
// dequantized to F32 first).
bool float_weights(const WeightMatrix& W) {
  return W.type == DType::F32 || W.type == DType::F16 || W.type == DType::BF16;
}

// A float product of a few rows of x that runs the decode kernels once per row (matmul_f32):
// F16 panels, and F32 / F16 / BF16 rows with a several-row kernel.
bool short_float_product(const WeightMatrix& W, int64_t n) {
  const TypeTraits& tr = *W.traits;
  if (W.panels && tr.dot_f32_panels != nullptr) return n > 1 && n <= kShortPanelProductRows;
  return float_weights(W) && tr.dot_f32_wrows != nullptr && n > 1 && n <= kShortRowProductRows;
}

// The float GEMM in broadcast form (kernels/gemm_f32.h), for products of at least
// kLaneMinTokens rows where the CPU has it. Rows: a multiple of 16.
const kernels::GemmF32Lanes* lanes_for(const WeightMatrix& W, int64_t n, bool pairs_in, const MatmulScratch& scratch) {
  static const kernels::GemmF32Lanes* lanes = kernels::gemm_f32_lanes();
  const bool order_ok = W.type != DType::BF16 || pairs_in;
  // F16 panels are the packs' own order (no transposes), so every product of several rows
  // past the short ones takes this GEMM; rows would have to be unpacked for the dot form.
  const bool panels = W.panels && W.type == DType::F16 && n > kShortPanelProductRows;
  return lanes != nullptr && scratch.xlanes != nullptr && (n >= kLaneMinTokens || panels) && W.rows % kRowBlock == 0 && order_ok
             ? lanes
             : nullptr;
}

// BF16 weights multiply in their pair order (kernels/float_dot_order.h), which the float GEMMs
// take as the 16-lane order of deinterleaved rows and inputs: for products of several rows
// whose columns are a multiple of 32 (else one dot_f32 per output).
bool bf16_pairs_input(const WeightMatrix& W, int64_t n, const MatmulScratch& scratch) {
  return W.type == DType::BF16 && n > 1 && W.cols % 32 == 0 && scratch.xr != nullptr && !short_float_product(W, n);
}

// In 8-bit mode the input of a BF16 product holds bf16 values, so the lane-major GEMM can run
// its `vdpbf16ps` form.
bool bf16_values_input(const WeightMatrix& W, const MatmulScratch& scratch) {
  return W.type == DType::BF16 && scratch.int8_activations && scratch.xr != nullptr;
}

// The input of the lane-major GEMM, packed into scratch.xlanes once for the products sharing it.
void pack_lanes_input(ThreadPool& pool, const kernels::GemmF32Lanes& lanes, bool pairs, const float* x, int64_t ldx,
                      int64_t n, int64_t cols, const MatmulScratch& scratch) {
  const int64_t tiles = (n + kernels::kLaneTokens - 1) / kernels::kLaneTokens;
  pool.parallel_for(tiles, [&](int64_t b, int64_t e, int) {
    const int64_t t0 = b * kernels::kLaneTokens, t1 = std::min(n, e * kernels::kLaneTokens);
    (pairs ? lanes.pack_x_pairs : lanes.pack_x)(x + t0 * ldx, static_cast<size_t>(ldx), t1 - t0, cols,
                                                scratch.xlanes + static_cast<size_t>(b) * kernels::lanes_x_tile_floats(cols));
  });
}

// y = W x from the packed input: per block of 32 weight rows, packed into the thread's scratch
// (F32 / F16 / BF16 converted on the way, quantized rows of --float-act dequantized first),
// every tile of tokens.
void matmul_f32_lanes(ThreadPool& pool, const kernels::GemmF32Lanes& lanes, bool pairs, const WeightMatrix& W, float* y,
                      int64_t n, const MatmulScratch& scratch) {
  const TypeTraits& tr = *W.traits;
  const int64_t rows = W.rows, cols = W.cols;
  const int64_t blocks = (rows + kLaneRowBlock - 1) / kLaneRowBlock;
  pool.parallel_for_dynamic(blocks, 1, [&](int64_t begin, int64_t end, int thread) {
    float* wrows = scratch.rows + static_cast<size_t>(thread) * kLaneRowBlock * scratch.max_cols;
    float* wp = scratch.wlanes + static_cast<size_t>(thread) * kernels::lanes_w_floats(kLaneRowBlock, scratch.max_cols);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t r0 = b * kLaneRowBlock, nr = std::min<int64_t>(kLaneRowBlock, rows - r0);
      if (W.panels && W.type == DType::F16) {  // the panels are the packs' order already
        lanes.pack_w_f16_panels(W.row(r0), nr, cols, wp);
        lanes.gemm(wp, nr, scratch.xlanes, n, cols, y + r0, static_cast<size_t>(rows));
        continue;
      }
      const uint8_t* src = W.rows_in(r0, nr, thread_wbuf(scratch, thread));
      if (pairs) {
        lanes.pack_w_pairs(src, W.row_bytes, nr, cols, wp);
        lanes.gemm_pairs(wp, nr, scratch.xlanes, n, cols, y + r0, static_cast<size_t>(rows));
        continue;
      }
      if (float_weights(W)) {
        lanes.pack_w(W.type, src, W.row_bytes, nr, cols, wp);  // converted as they are packed
      } else {
        for (int64_t r = 0; r < nr; ++r) tr.to_float(src + r * W.row_bytes, wrows + r * cols, cols);
        lanes.pack_w(DType::F32, wrows, static_cast<size_t>(cols) * sizeof(float), nr, cols, wp);
      }
      lanes.gemm(wp, nr, scratch.xlanes, n, cols, y + r0, static_cast<size_t>(rows));
    }
  });
}

// Float path: one dot_f32 per row for a single activation row; otherwise a float GEMM over
// blocks of kRowBlock weight rows, dequantized once per block into the thread's scratch (F32
// weights are used in place; BF16 ones deinterleaved, x then being deinterleaved: pairs_in).
void matmul_f32(ThreadPool& pool, const WeightMatrix& W, const float* x, int64_t ldx, float* y, int64_t n, bool pairs_in,
                const MatmulScratch& scratch) {
  const TypeTraits& tr = *W.traits;
  const int64_t rows = W.rows, cols = W.cols;
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  const bool panels = W.panels && tr.dot_f32_panels != nullptr;
  const bool in_place = float_weights(W);
  if (n == 1 || (short_float_product(W, n) && !pairs_in)) {
    // F32 / F16 / BF16 rows multiply in place; quantized ones (--float-act) are dequantized and
    // multiplied as F32, so that both give exactly what the GEMM below gives (every product in
    // the order of kernels/float_dot_order.h). A few rows of x run the decode kernels once per
    // row, block by block: the block comes from memory for the first and from L2 after.
    static const TypeTraits* f32 = type_traits(DType::F32);
    const int64_t chunk = n == 1 ? decode_chunk(W.row_bytes * kRowBlock) : std::max<int64_t>(1, row_chunk(pool, rows) / kRowBlock);
    pool.parallel_for_stealing(blocks, chunk, [&](int64_t begin, int64_t end, int thread) {
      float* wrow = scratch.rows + static_cast<size_t>(thread) * kRowBlock * scratch.max_cols;
      for (int64_t b = begin; b < end; ++b) {
        const int64_t r0 = b * kRowBlock, nr = std::min(kRowBlock, rows - r0);
        if (panels) {  // a block is one panel
          for (int64_t t = 0; t < n; ++t) tr.dot_f32_panels(W.row(r0), 1, x + t * ldx, cols, y + t * rows + r0);
          continue;
        }
        const uint8_t* w = W.rows_in(r0, nr, thread_wbuf(scratch, thread));
        if (in_place && tr.dot_f32_wrows != nullptr) {
          for (int64_t t = 0; t < n; ++t) tr.dot_f32_wrows(w, W.row_bytes, nr, x + t * ldx, cols, y + t * rows + r0);
          continue;
        }
        for (int64_t r = 0; r < nr; ++r) {
          if (in_place) {
            y[r0 + r] = tr.dot_f32(w + r * W.row_bytes, x, cols);
          } else {
            tr.to_float(w + r * W.row_bytes, wrow, cols);
            y[r0 + r] = f32->dot_f32(wrow, x, cols);
          }
        }
      }
    });
    return;
  }
  static const kernels::GemmF32Fn gemm = kernels::gemm_f32();
  const bool bf16 = W.type == DType::BF16;
  pool.parallel_for_dynamic(blocks, 1, [&](int64_t begin, int64_t end, int thread) {
    float* wrows = scratch.rows + static_cast<size_t>(thread) * kLaneRowBlock * scratch.max_cols;
    for (int64_t b = begin; b < end; ++b) {
      const int64_t r0 = b * kRowBlock, nr = std::min<int64_t>(kRowBlock, rows - r0);
      const uint8_t* src = W.rows_in(r0, nr, thread_wbuf(scratch, thread));
      if (bf16 && !pairs_in) {
        for (int64_t t = 0; t < n; ++t) {
          for (int64_t r = 0; r < nr; ++r) y[t * rows + r0 + r] = tr.dot_f32(src + r * W.row_bytes, x + t * ldx, cols);
        }
        continue;
      }
      const float* w = reinterpret_cast<const float*>(src);
      int64_t ldw = cols;
      if (W.type != DType::F32) {
        ldw = float_input_ld(cols);  // kRowBlock padded rows fit the thread's kLaneRowBlock
        for (int64_t r = 0; r < nr; ++r) {
          if (bf16) {
            tr.to_float_pairs(src + r * W.row_bytes, wrows + r * ldw, cols);
          } else {
            tr.to_float(src + r * W.row_bytes, wrows + r * ldw, cols);
          }
        }
        w = wrows;
      }
      gemm(w, static_cast<size_t>(ldw), x, static_cast<size_t>(ldx), y + r0, static_cast<size_t>(rows), nr, n, cols);
    }
  });
}

// In 8-bit mode F16 / BF16 weights multiply activations rounded to their own type (see
// MatmulScratch::xr); x otherwise. Deinterleaved for the pair order where pairs_in.
const float* float_path_input(ThreadPool& pool, const WeightMatrix& W, const float* x, int64_t n, bool pairs_in,
                              const MatmulScratch& scratch, int64_t& ld) {
  const bool round = scratch.int8_activations && scratch.xr != nullptr && (W.type == DType::F16 || W.type == DType::BF16);
  const int64_t cols = W.cols;
  ld = cols;
  if (!round && !pairs_in) return x;
  ld = float_input_ld(cols);
  const bool f16 = W.type == DType::F16;
  pool.parallel_for(n, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      const float* in = x + t * cols;
      float* out = scratch.xr + t * ld;
      for (int64_t i = 0; i < cols; ++i) {
        out[i] = !round ? in[i] : f16 ? f16_to_f32(f32_to_f16(in[i])) : bf16_to_f32(f32_to_bf16(in[i]));
      }
      if (pairs_in) {
        alignas(64) float block[32];
        for (int64_t b = 0; b < cols; b += 32) {
          std::memcpy(block, out + b, sizeof(block));
          kernels::bf16_pairs_deinterleave(block, out + b, 32);
        }
      }
    }
  });
  return scratch.xr;
}

void run(ThreadPool& pool, Path path, std::initializer_list<MatmulOutput> outputs, const float* x, int64_t n,
         const MatmulScratch& scratch) {
  switch (path) {
    case Path::kBf16: matmul_bf16(pool, Group(outputs, blocks_of), x, n, scratch); break;
    case Path::kInt8: matmul_q(pool, Group(outputs, units_of), x, n, scratch); break;
    case Path::kW8A8: matmul_w8a8(pool, Group(outputs, units_of), x, n, scratch); break;
    case Path::kFloat: {
      // A group of F16 (or BF16) products rounds its shared input once, and packs it once for
      // the lane-major GEMM.
      const float* in = nullptr;
      int64_t ld = 0;  // floats between in's rows
      DType rounded_for = DType::F32;
      bool packed = false;
      for (const MatmulOutput& o : outputs) {
        const bool pairs_in = bf16_pairs_input(*o.W, n, scratch);
        if (in == nullptr || o.W->type != rounded_for) {
          in = float_path_input(pool, *o.W, x, n, pairs_in, scratch, ld);
          rounded_for = o.W->type;
          packed = false;
        }
        if (const kernels::GemmF32Lanes* lanes = lanes_for(*o.W, n, pairs_in, scratch)) {
          const bool pairs = bf16_values_input(*o.W, scratch);
          if (!packed) pack_lanes_input(pool, *lanes, pairs, in, ld, n, o.W->cols, scratch);
          packed = true;
          matmul_f32_lanes(pool, *lanes, pairs, *o.W, o.y, n, scratch);
        } else {
          matmul_f32(pool, *o.W, in, ld, o.y, n, pairs_in, scratch);
        }
      }
      break;
    }
  }
}

}  // namespace

size_t matmul_wbuf_bytes(size_t max_row_bytes) {
  return static_cast<size_t>(std::max<int64_t>(kRowBlock, kernels::kBf16RowBlock)) * max_row_bytes;
}

void matmul(ThreadPool& pool, const WeightMatrix& W, const float* x, float* y, int64_t n,
            const MatmulScratch& scratch) {
  run(pool, path_of(W, n, scratch), {{&W, y}}, x, n, scratch);
}

void matmul_shared(ThreadPool& pool, std::initializer_list<MatmulOutput> outputs, const float* x, int64_t n,
                   const MatmulScratch& scratch) {
  // One pass when every product takes the same path (and, for 8-bit activations, the same
  // activation type); otherwise each product on its own.
  const WeightMatrix& first = *outputs.begin()->W;
  const Path path = path_of(first, n, scratch);
  bool together = outputs.size() <= kMaxSharedOutputs;
  for (const MatmulOutput& o : outputs) {
    together = together && path_of(*o.W, n, scratch) == path && o.W->cols == first.cols &&
               o.W->traits->vec_dot_type == first.traits->vec_dot_type && o.W->input_scale == first.input_scale;
  }
  if (together) {
    run(pool, path, outputs, x, n, scratch);
    return;
  }
  for (const MatmulOutput& o : outputs) run(pool, path_of(*o.W, n, scratch), {o}, x, n, scratch);
}

}  // namespace ll3
