// The importance matrix as `ll3 quantize --imatrix` consumes it: per weight tensor, one weight per
// input column (the mean of that column's squared activations over the calibration text), read
// from llama.cpp's GGUF imatrix files (`<name>.in_sum2` / `<name>.counts`) or its legacy .dat
// files, with the same arithmetic as llama-quantize, so the weighted quantizers see the same
// floats and produce the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace ll3::quant {

struct ImatrixWeights {
  std::string file;     // the path as given; recorded in quantize.imatrix.file
  std::string dataset;  // the calibration text's name (first one of a GGUF imatrix); may be empty
  int chunks = 0;       // chunks the matrix was computed over (0: unknown)
  // tensor name -> ne[0] * n_experts weights
  std::unordered_map<std::string, std::vector<float>> weights;

  // The weights of `tensor`, or nullptr when the file has none for it.
  const std::vector<float>* find(const std::string& tensor) const;
};

// Read an imatrix file (format detected by its magic). Errors name the file and what is wrong
// with it: truncated, no entries, non-finite values, sums without counts.
Result<ImatrixWeights> load_imatrix_weights(const std::string& path);

// llama-quantize's --include-weights / --exclude-weights: keep only the entries whose name
// contains one of `include` (when non-empty), after dropping those containing one of `exclude`.
void filter_imatrix_weights(ImatrixWeights& w, const std::vector<std::string>& include,
                            const std::vector<std::string>& exclude);

}  // namespace ll3::quant
