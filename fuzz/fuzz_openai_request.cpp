// Fuzz target: the OpenAI and Anthropic JSON -> request conversions (src/server/openai_request.cpp,
// anthropic_request.cpp) with the Llama 3.1 chat template, and what the server does with a model's
// output (tool-call parsing, the choice output). Input: a request body (or a model output). Every
// body must end in a request within its limits or a 400 naming what was wrong, never a crash, a
// leak or a hang.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "server/anthropic_request.h"
#include "server/openai_output.h"
#include "server/openai_request.h"
#include "server/tool_calls.h"
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
  check_request(parse_chat_request(body, model(), &r), r);
  check_request(parse_completion_request(body, model(), &r), r);
  TokenizeRequest t;
  check(parse_tokenize_request(body, model(), &t));
  std::vector<int32_t> ids;
  check(parse_detokenize_request(body, model(), &ids));
  // The same bytes as an Anthropic Messages body (translated to the OpenAI one, then parsed).
  check_request(parse_messages_request(body, model(), &r), r);
  Prompt counted;
  check(parse_count_tokens_request(body, model(), &counted));

  // The input as a model's output: tool calls, and the chunks of a streamed choice with tools.
  const std::vector<std::string> names = {"get_weather", "a"};
  for (const ToolCall& c : parse_tool_calls(body, names)) {
    if (c.name != "get_weather" && c.name != "a") std::abort();
  }
  ResponseHeader h;
  h.id = "chatcmpl-x";
  h.model = "m";
  ChoiceConfig cc;
  cc.stream = size % 2 == 0;
  cc.tools = true;
  cc.tool_names = names;
  cc.logprobs = true;
  cc.top_logprobs = 1;
  ChoiceOutput out(&h, cc, [](int32_t) { return std::string_view("\xff"); });
  std::string sse = out.start();
  for (size_t at = 0; at < body.size(); at += 7) {
    TokenEvent ev;
    ev.piece = std::string(body.substr(at, 7));
    ev.text = ev.piece;
    ev.top_logprobs = {{1, -1.0f}};
    sse += out.token(ev);
  }
  FinishInfo f;
  sse += out.finish(f);
  (void)dump_json(out.choice());

  // Streamed tool-call deltas add up to the calls the whole output parses as.
  if (cc.stream && !out.tool_calls().empty()) {
    std::vector<std::string> args(out.tool_calls().size());
    for (size_t at = 0; (at = sse.find("data: ", at)) != std::string::npos;) {
      const size_t end = sse.find("\n\n", at);
      const auto ev = nlohmann::json::parse(sse.substr(at + 6, end - at - 6), nullptr, false);
      at = end;
      if (ev.is_discarded() || !ev.contains("choices") || ev["choices"].empty()) continue;
      const auto& delta = ev["choices"][0]["delta"];
      if (!delta.contains("tool_calls")) continue;
      for (const auto& tc : delta["tool_calls"]) {
        const size_t k = tc["index"].get<size_t>();
        if (k >= args.size()) std::abort();
        args[k] += tc["function"]["arguments"].get<std::string>();
      }
    }
    for (size_t k = 0; k < args.size(); ++k) {
      if (args[k] != out.tool_calls()[k].arguments) std::abort();
    }
  }
  return 0;
}
