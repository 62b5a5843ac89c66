// Text generation on one Session: evaluates the prompt (reusing whatever prefix the session
// already holds), then samples token by token, streaming complete UTF-8 text to a callback
// until a stop string, an end-of-generation token, max_tokens or the end of the context.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "tokenizer/tokenizer.h"

namespace ll3 {

struct GenerateOptions {
  int64_t max_tokens = 256;  // < 0: until the context is full
  SamplingParams sampling;
  std::vector<std::string> stop;  // stop strings (not included in the output)
  bool ignore_eos = false;
};

struct GenerateStats {
  int64_t n_prompt = 0;  // prompt tokens evaluated (after prefix reuse)
  int64_t n_reused = 0;  // prompt tokens found already in the session
  int64_t n_generated = 0;
  double prompt_seconds = 0;
  double gen_seconds = 0;
  std::string finish_reason;  // "stop" (EOS or stop string), "length", "context"
};

// on_text receives each piece of output text as soon as it is complete UTF-8 and cannot be part
// of a stop string. Returning false from it stops generation (e.g. the client went away).
Result<GenerateStats> generate(Session& session, const Tokenizer& tok, std::span<const int32_t> prompt,
                               const GenerateOptions& opt, FunctionRef<bool(std::string_view)> on_text);

}  // namespace ll3
