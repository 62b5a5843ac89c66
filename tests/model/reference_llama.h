// An independent, deliberately naive LLaMA forward pass for tests: double precision, no KV
// cache (every position recomputed from the whole prefix), weights dequantized with the scalar
// reference kernels. Slow but obviously right; the engine is compared against it on prompts no
// golden file covers.
#pragma once

#include <cstdint>
#include <vector>

#include "model/llama_model.h"

namespace ll3::test {

// Logits (n_vocab, as double) at each position listed in `positions` for the prompt `tokens`.
std::vector<std::vector<double>> reference_logits(const LlamaModel& m, const std::vector<int32_t>& tokens,
                                                  const std::vector<int64_t>& positions);

// ||a - b|| / ||b||
double rel_l2(const float* a, const double* b, int64_t n);

}  // namespace ll3::test
