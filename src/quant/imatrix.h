// Importance matrix: per weight matrix, per input column, the sum of the squared activations
// that entered the matrix product over a calibration text (and the number of tokens), which
// importance-weighted quantization uses to spend its error where the inputs are large.
//
// Files are llama.cpp's, so that imatrices move between ll3 and llama-imatrix / llama-quantize:
//
// GGUF (llama-imatrix's default since 2025): general.type = "imatrix", imatrix.datasets
// (string array), imatrix.chunk_count and imatrix.chunk_size (u32), and per weight `W`
// (e.g. "blk.0.attn_q.weight") the F32 tensors
//   W.in_sum2  [n_cols, n_mat]  sum of x^2 per input column (n_mat: experts, 1 when dense)
//   W.counts   [1, n_mat]       tokens that went through the matrix
//   W.in_sum   [n_cols, n_mat]  sum of x (newer llama-imatrix; optional when reading)
//
// Legacy .dat (llama-imatrix before the GGUF format, and --output-format dat), little endian:
//   int32 n_entries
//   n_entries x { int32 len; char name[len]; int32 ncall; int32 nval; float v[nval] }
//   int32 chunk_count; int32 len; char dataset[len]          (both optional when reading)
// with v = in_sum2 / count * ncall and ncall = ceil(count / chunk_size): the file keeps only
// the mean of x^2, so reading one needs a chunk size to rebuild sums and counts (llama.cpp
// takes its -c). The mean, all quantization uses, survives any chunk size.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace ll3 {

struct ImatrixEntry {
  int64_t n_cols = 0;
  std::vector<double> sum2;     // (n_mat, n_cols) sum of x^2
  std::vector<double> sum;      // (n_mat, n_cols) sum of x; empty when unknown (a .dat file)
  std::vector<int64_t> counts;  // (n_mat) tokens seen by each matrix
  int64_t n_mat() const { return static_cast<int64_t>(counts.size()); }
};

enum class ImatrixFormat { kGguf, kDat };

struct Imatrix {
  std::map<std::string, ImatrixEntry> entries;  // by weight name, sorted (the files' order)
  std::vector<std::string> datasets;            // calibration files, oldest first
  int64_t chunk_size = 0;                       // tokens per chunk (0: unknown)
  int64_t chunk_count = 0;                      // chunks seen (max count / chunk_size)

  // Adds `rows` activation rows of `cols` floats ((rows, cols), row-major) entering `name`.
  void add_rows(const std::string& name, const float* x, int64_t rows, int64_t cols);
  // Adds another imatrix (combining files): sums and counts add, datasets append. Fails on a
  // weight whose shape differs.
  Status merge(const Imatrix& other);
  // chunk_count from the largest count and chunk_size (llama-imatrix's rule).
  void update_chunk_count();

  // Per-column mean of x^2 of `name` (n_mat * n_cols), what quantization weights the error
  // with; empty when the weight is not in the matrix.
  std::vector<float> mean_sq(const std::string& name) const;

  // Reads either format (GGUF by its magic, else .dat). dat_chunk_size: see the .dat note
  // above (0: 512, llama-imatrix's default context).
  static Result<Imatrix> load(const std::string& path, int64_t dat_chunk_size = 0);
  static Result<Imatrix> parse_dat(const uint8_t* data, size_t size, const std::string& origin,
                                   int64_t dat_chunk_size);
  Status save(const std::string& path, ImatrixFormat format) const;
};

// The format a path asks for: .dat is the legacy format, anything else GGUF (as llama-imatrix).
ImatrixFormat imatrix_format_for(const std::string& path);

// Which weights read the activations the CPU runner's ActivationTap reports under `tap_name`
// ("attn_norm" feeds attn_q/k/v, "kqv_out" attn_output, "ffn_norm" ffn_gate/up, "ffn_swiglu"
// ffn_down; "result_norm" the output matrix). Empty for every other tap.
std::vector<std::string> imatrix_weights_for_tap(const char* tap_name, int64_t layer);

}  // namespace ll3
