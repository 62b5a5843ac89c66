// Fuzz target: the OpenAI and Anthropic JSON -> request conversions (src/server/openai_request.cpp,
// anthropic_request.cpp) with the Llama 3.1 chat template. Input: a request body. Every body must
// end in a request within its limits or a 400 naming what was wrong, never a crash, a leak or a
// hang. What the server does with a model's output is fuzz_model_output's.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "server/anthropic_request.h"
#include "server/json_fields.h"
#include "server/openai_request.h"
#include "tokenizer/jinja.h"

namespace {

using namespace ll3;
using namespace ll3::server;

const ModelInfo& model() {
  static const ModelInfo m = [] {
    ModelInfo info;
    info.id = "m";
    std::ifstream f(LL3_SOURCE_DIR "/tests/fixtures/tokenizer/chat_templates/llama31.jinja");
    std::stringstream ss;
    ss << f.rdbuf();
    info.chat_template = ss.str();
    info.template_usable = !info.chat_template.empty() && jinja::parse(info.chat_template).ok();
    info.template_supports_tools = info.template_usable;
    info.eos_token = "<|eot_id|>";
    info.n_vocab = 128256;
    return info;
  }();
  return m;
}

void check(const ApiError& e) {
  if (e.ok()) return;
  if (e.status != 400 || e.message.empty() || e.type.empty()) std::abort();
}

void check_request(const ApiError& e, const ApiRequest& r) {
  check(e);
  if (!e.ok()) return;
  if (r.prompts.empty() || r.n < 1 || r.n > kMaxN || r.prompts.size() * static_cast<size_t>(r.n) > kMaxChoices) std::abort();
  if (r.top_logprobs < 0 || r.top_logprobs > kMaxTopLogprobs || r.base.max_tokens < -1) std::abort();
  if (r.lora.size() > kMaxLoraRefs) std::abort();
  for (const LoraRef& l : r.lora) {
    if ((l.index < 0) == l.name.empty() || !std::isfinite(l.scale)) std::abort();
  }
  // max_tokens 0 generates nothing: accepted only with echo, to score the prompt.
  if (r.base.max_tokens == 0 && !r.echo) std::abort();
  for (const Prompt& p : r.prompts) {
    if (p.is_tokens && p.tokens.empty()) std::abort();
    for (int32_t t : p.tokens) {
      if (t < 0 || t >= 128256) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  ApiRequest r;
  // The body is parsed once, as the parsers' callers can (a body that is not a JSON object
  // fails every parser alike, in parse_body: the string entry point is run once for it).
  ojson b;
  const ApiError parsed = parse_body(body, &b);
  if (!parsed.ok()) {
    check(parsed);
    check_request(parse_chat_request(body, model(), &r), r);
    return 0;
  }
  check_request(parse_chat_request_json(b, model(), &r), r);
  check_request(parse_completion_request_json(b, model(), &r), r);
  TokenizeRequest t;
  check(parse_tokenize_request_json(b, model(), &t));
  std::vector<int32_t> ids;
  check(parse_detokenize_request_json(b, model(), &ids));
  // The same bytes as an Anthropic Messages body (translated to the OpenAI one, then parsed).
  check_request(parse_messages_request(body, model(), &r), r);
  Prompt counted;
  check(parse_count_tokens_request(body, model(), &counted));
  return 0;
}
