// Which layers go on the GPU when the model is larger than the card (or than --gpu-memory):
// plain arithmetic over the device bytes each part needs, so that it is tested on the CPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ll3 {

// The device memory the GPU part of a model takes, in bytes.
struct GpuNeeds {
  std::vector<int64_t> layer_bytes;  // per layer: its weights as the device keeps them, its KV mirror and new-row buffer
  int64_t output_bytes = 0;          // the output layer: W_out, its norm and the logits' buffer
  int64_t fixed_bytes = 0;           // the step's activations and metadata, whatever the split
};

struct GpuPlacement {
  int64_t first_layer = 0;  // the GPU runs layers [first_layer, n_layers) ...
  bool output = true;       // ... and the output layer, or the CPU does
  int64_t bytes = 0;        // the device memory that takes
};

// requested: -1 as many layers as fit, N > 0 the last N (all of them when N is the layer count
// or more). The layers on the GPU are the last ones, so that the residual stream crosses once
// each way (backend/split_runner.h). The output layer goes with them when it fits beside them,
// else it stays on the CPU: a prompt's work is in the layers (every row), the output layer's in
// the logit rows only. Fails, with the bytes needed and the budget, when the requested layers
// (or, for -1, one layer) do not fit in `budget` bytes.
Result<GpuPlacement> place_on_gpu(const GpuNeeds& needs, int64_t budget, int requested);

// "2.5 GiB": for the messages.
std::string gib(int64_t bytes);

}  // namespace ll3
