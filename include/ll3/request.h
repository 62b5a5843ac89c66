// A generation request to the engine (ll3/engine.h) and what comes back for it: one event per
// generated token, then one finish. Plain data; the engine validates it at submit.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace ll3 {

class Grammar;  // ll3/grammar.h

inline constexpr uint64_t kRandomSeed = 0xFFFFFFFFFFFFFFFFull;

// Sampling, in the order llama.cpp's default chain applies it: penalties, top-k, top-p, min-p,
// temperature, then a seeded draw.
struct SamplingParams {
  float temperature = 0.8f;  // 0 => greedy: argmax of the penalized logits
  int top_k = 40;            // <= 0 => off
  float top_p = 0.95f;       // 1 => off
  float min_p = 0.05f;       // 0 => off; keeps tokens with prob >= min_p * max prob
  // llama.cpp semantics: a logit of a token seen in the window is divided by the penalty when
  // positive and multiplied by it when negative. The window is the last repeat_last_n tokens of
  // the history (-1 => all of it, 0 => no penalties); it applies to all three penalties.
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  // OpenAI semantics: logit -= count * frequency_penalty + (count > 0) * presence_penalty.
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
  uint64_t seed = kRandomSeed;  // kRandomSeed => seeded from std::random_device
};

enum class FinishReason {
  kStop,       // an end-of-generation token or a stop string
  kLength,     // max_tokens, or the sequence reached the context
  kCancelled,  // cancel() or a callback asked to stop
  kError,      // see FinishInfo::error
};
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error"

struct TopLogprob {
  int32_t token = 0;
  float logprob = 0;
};

// One generated token. Called on the engine's thread: keep the callback short (hand the event to
// another thread if it must wait on I/O).
struct TokenEvent {
  int64_t index = 0;    // 0 for the first generated token
  int32_t token = 0;
  std::string piece;    // the token's own bytes (may be part of a UTF-8 character)
  // Output text that became final with this token: whole UTF-8 characters only, never part of a
  // stop string. May be empty (held back) or hold text of earlier tokens.
  std::string text;
  float logprob = 0;    // log-softmax of the model's logits (Request::logprobs)
  std::vector<TopLogprob> top_logprobs;  // best first (Request::top_logprobs)
  double seconds = 0;   // since submit
};

// The log-probability the model gives a prompt token after the tokens before it.
struct PromptTokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<TopLogprob> top_logprobs;  // best first (Request::prompt_logprobs of them)
};

struct FinishInfo {
  FinishReason reason = FinishReason::kStop;
  std::string error;        // kError: what went wrong
  std::string text;         // output text released at the end (held back until then)
  std::string stop_string;  // the stop string that ended generation, if one did
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens whose KV came from the prefix cache or a session
  int64_t completion_tokens = 0;
  int64_t preemptions = 0;
  double queued_seconds = 0;       // submit -> first scheduled
  double first_token_seconds = 0;  // submit -> first token (0 if none)
  double total_seconds = 0;        // submit -> finish
  std::string session_warning;     // a session file that could not be used, and why
};

// Embedding requests: how the final hidden state's rows (after the output norm) of the prompt's
// tokens become one vector.
enum class Pooling {
  kNone,  // not an embedding request: generate
  kMean,  // the mean over all prompt tokens
  kLast,  // the last prompt token's row
};

// A LoRA adapter a request runs with (Engine::load_lora, EngineOptions::loras), by name, at a
// scale (multiplying its alpha / rank; NaN: the scale it was loaded with, 0: off).
struct LoraUse {
  std::string name;
  float scale = std::numeric_limits<float>::quiet_NaN();
};

struct Request {
  // The prompt: token ids when given, else `text` tokenized by the model's tokenizer (special
  // tokens like <|eot_id|> recognised, <|begin_of_text|> added unless add_bos is false).
  std::vector<int32_t> tokens;
  std::string text;
  bool add_bos = true;

  SamplingParams sampling;
  int64_t max_tokens = 256;        // < 0: until the sequence reaches its context
  std::vector<std::string> stop;   // stop strings (not part of the output)
  bool ignore_eos = false;
  bool logprobs = false;
  int top_logprobs = 0;            // 0 .. 20
  // >= 0: the log-probability of every prompt token after the first, with this many (0 .. 20)
  // alternatives, delivered once through on_prompt when the prompt is computed, before the
  // first token (what evaluation harnesses score). The prompt is then computed in full: no
  // prefix cache, and it cannot be combined with a session.
  int prompt_logprobs = -1;
  // The KV of a named session stays pinned after the request (and is saved with --session-dir),
  // so the next turn computes only its new tokens.
  std::string session_id;
  int priority = 0;                // higher runs first; FCFS within a priority
  // Guess and verify ahead when the engine speculates (EngineOptions::spec): the same tokens,
  // sooner. False opts this request out.
  bool speculative = true;
  // LoRA adapters, applied in this order beside every product they correct. Their KV is theirs:
  // the prefix cache and sessions are never shared with other adapter sets or the base.
  std::vector<LoraUse> loras;
  // Every generated text matches this grammar (ll3/grammar.h): tokens it cannot continue with
  // are never sampled, an end-of-generation token comes only where the grammar may end, and
  // generation stops where nothing can follow. Null: unconstrained.
  std::shared_ptr<const Grammar> grammar;
  // != kNone: an embedding request. The prompt is computed (batched with other work) and its
  // pooled hidden state delivered once through on_embedding, before on_finish; nothing is
  // generated (max_tokens and sampling are not read).
  Pooling pooling = Pooling::kNone;

  // Return false to stop the request (finish reason kCancelled).
  std::function<bool(const TokenEvent&)> on_token;
  std::function<void(const FinishInfo&)> on_finish;
  // Entry i is prompt token i + 1 (n_prompt - 1 entries). Called on the engine's thread.
  std::function<void(const std::vector<PromptTokenLogprob>&)> on_prompt;
  // Pooling != kNone: the pooled vector (n_embd floats, not normalized). Engine thread.
  std::function<void(const std::vector<float>&)> on_embedding;
};

}  // namespace ll3
