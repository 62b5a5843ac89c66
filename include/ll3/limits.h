// Limits of what one request may ask for, shared by the engine (which enforces them at submit)
// and the frontends (which check them while parsing, to name the field in their own terms).
#pragma once

#include <cstddef>

namespace ll3 {

inline constexpr int kMaxTopLogprobs = 20;          // Request::top_logprobs, prompt_logprobs
inline constexpr size_t kMaxSessionIdBytes = 256;   // Request::session_id

}  // namespace ll3
