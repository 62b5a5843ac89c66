// Model quantization: GGUF (F32 / F16 / BF16) in, GGUF with quantized weights out, choosing each
// tensor's type the way llama.cpp's llama-quantize does for its named mixtures (q4_k_m keeps the
// output and part of attn_v / ffn_down at Q6_K, and so on), so files load wherever llama.cpp's do.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "io/gguf.h"
#include "quant/imatrix_weights.h"
#include "quant/model_source.h"

namespace ll3::quant {

// The named mixtures; `ftype` is llama.cpp's LLAMA_FTYPE_MOSTLY_* id written to general.file_type.
struct QuantMix {
  const char* name;  // "q4_k_m"
  DType base;        // the type most weight matrices get
  uint32_t ftype;
};

// nullptr when `name` is not one of: q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q2_k_s q3_k_s q3_k_m q3_k_l
// q4_k_s q4_k_m q5_k_s q5_k_m q6_k (case-insensitive).
const QuantMix* find_quant_mix(std::string_view name);
// The mixtures that need nothing but the model, and those that also need an importance matrix.
const std::vector<QuantMix>& quant_mixes();
const std::vector<QuantMix>& imatrix_only_mixes();

struct TensorPlan {
  const SourceTensor* tensor;
  DType type;  // the output type (the input's type when the tensor is copied unchanged)
  bool quantize;
  // The tensor's importance weights (ne[0] of them) when quantized with an importance matrix
  // that has a matching entry; nullptr otherwise.
  const std::vector<float>* imatrix = nullptr;
};

// Mixtures llama-quantize refuses to make without an importance matrix (q2_k_s): the result
// would be garbage.
bool mix_requires_imatrix(const QuantMix& mix);

// The output type of every tensor of `in`, in order. Errors for a tensor ll3 cannot read. The
// plans point into `in` (the GgufFile overload: into a source it keeps; call it for inspection).
// With an importance matrix (non-empty), each plan also gets the tensor's entry, and the rules
// llama-quantize applies when one is given hold: q4_0 / q5_0 keep the first eighth of ffn_down
// at q4_1 / q5_1, an entry of the wrong size is an error (token_embd: ignored), and q2_k_s
// refuses a Q2_K tensor without an entry.
Result<std::vector<TensorPlan>> plan_quantization(const ModelSource& in, const QuantMix& mix,
                                                  const ImatrixWeights* imatrix = nullptr);
Result<std::vector<std::pair<std::string, DType>>> plan_types(const GgufFile& in, const QuantMix& mix,
                                                              const ImatrixWeights* imatrix = nullptr);

struct QuantizeProgress {
  size_t index;  // tensors finished so far (1-based once the first is done)
  size_t count;
  const TensorPlan* plan;  // the tensor just finished
  uint64_t bytes_in, bytes_out;  // totals so far
};

struct QuantizeOptions {
  int threads = 1;
  // Quantize against this importance matrix (llama-quantize --imatrix); its file, dataset,
  // entry and chunk counts are recorded under quantize.imatrix.*. Null or empty: none.
  const ImatrixWeights* imatrix = nullptr;
  std::function<void(const QuantizeProgress&)> on_tensor;  // after each tensor
};

struct QuantizeSummary {
  uint64_t n_params = 0;    // elements of all tensors
  uint64_t bytes_in = 0;    // tensor data of the input
  uint64_t bytes_out = 0;   // tensor data of the output
  uint64_t file_bytes = 0;  // the output file
  std::vector<std::pair<DType, int>> type_counts;  // output type -> tensors
  double bits_per_weight() const { return n_params ? 8.0 * bytes_out / n_params : 0.0; }
};

// Quantize `in` into a new GGUF at `out_path` (written to out_path.tmp, then renamed). All
// metadata is copied; general.file_type and general.quantization_version are set.
Result<QuantizeSummary> quantize_model(const ModelSource& in, const std::string& out_path,
                                       const QuantMix& mix, const QuantizeOptions& options);
Result<QuantizeSummary> quantize_gguf(const GgufFile& in, const std::string& out_path,
                                      const QuantMix& mix, const QuantizeOptions& options);

// Convert `rows` rows of n elements from type `from` into `to` over `threads` threads: output row
// r is made from source row row_map[r] (r when row_map is null). dst holds
// rows * dtype_row_bytes(to, n) bytes. With `importance` (n weights, one per column), types with
// a weighted quantizer use it; the others (Q8_0, F16) ignore it, as llama.cpp's do.
Status quantize_rows(const uint8_t* src, DType from, uint8_t* dst, DType to, int64_t n, int64_t rows,
                     int threads, const int64_t* row_map = nullptr, const float* importance = nullptr);

}  // namespace ll3::quant
