// How a static W8A8 model is stored in GGUF (written by `ll3 quantize ... w8a8`, quant/w8a8.h;
// read by the loader, model/llama_model.cpp). Only ll3 reads it: the weight tensors have type
// DType::W8A8 (1024), far past ggml's ids, so llama.cpp stops at the first one ("invalid ggml
// type"), and the keys below say what the file is.
//
// For each quantized product X (e.g. "blk.0.attn_q"), three tensors:
//   X.weight        W8A8, ne = [cols, rows]: q[r][c] = clamp(round(W'[r][c] / w_scale[r]), +-127)
//                   in the packed layout of kernels::w8a8_pack (16-row panels, bytes q + 128);
//                   rows % 16 == 0, cols % 64 == 0, cols <= 32768
//   X.weight_scale  F32, ne = [rows]: w_scale[r] = max_c |W'[r][c]| / 127 (1 for a zero row)
//   X.input_scale   F32, ne = [1]: the static activation scale s (x_q = clamp(round(x / s), +-127)),
//                   or 0: the input is quantized per token at run time (amax / 127)
// W' is the weight after SmoothQuant's smoothing: column j times s_j, with the inverse folded
// into what produces the input (attn_norm / ffn_norm for Q, K, V / gate, up; the rows of ffn_up
// for ffn_down), so the float model computes the same function.
#pragma once

namespace ll3::w8a8_format {

constexpr const char* kWeightScaleSuffix = "_scale";   // X.weight -> X.weight_scale
constexpr const char* kInputScaleSuffix = ".input_scale";  // X -> X.input_scale (X without ".weight")

// Metadata keys.
constexpr const char* kVersionKey = "ll3.w8a8.version";          // u32, kVersion
constexpr const char* kCalibratorKey = "ll3.w8a8.calibrator";    // string: minmax / ema / percentile / mse
constexpr const char* kSmoothAlphaKey = "ll3.w8a8.smooth_alpha";  // f32: SmoothQuant's alpha (0: none)
constexpr const char* kCalibFileKey = "ll3.w8a8.calib_file";     // string: the calibration text
constexpr const char* kCalibTokensKey = "ll3.w8a8.calib_tokens";  // u32: tokens it gave
constexpr const char* kDynamicCountKey = "ll3.w8a8.dynamic_inputs";  // u32: inputs left per-token
constexpr unsigned kVersion = 1;
// general.file_type of a W8A8 file: past llama.cpp's LLAMA_FTYPE ids.
constexpr unsigned kFileType = 1024;

}  // namespace ll3::w8a8_format
