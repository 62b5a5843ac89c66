// Fuzz target: what the server does with a model's output (src/server/tool_calls.cpp,
// openai_output.cpp): the Llama 3.1 tool-call parser, and a choice with tools (streamed or not,
// with logprobs or not) fed the input a few bytes a token, whose tool-call deltas must add up to the calls the
// whole output parses as. Input: a model's output text. Never a crash, a leak or a hang.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "server/openai_output.h"
#include "server/tool_calls.h"

using namespace ll3;
using namespace ll3::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  // The input as a model's output: tool calls, and the chunks of a streamed choice with tools.
  const std::vector<std::string> names = {"get_weather", "a"};
  for (const ToolCall& c : parse_tool_calls(body, names)) {
    if (c.name != "get_weather" && c.name != "a") std::abort();
  }
  ResponseHeader h;
  h.id = "chatcmpl-x";
  h.model = "m";
  // The first byte also picks the choice's shape: streamed or not, with logprobs or not (each
  // token's entry is most of the work, so on a quarter of the inputs), and the token length
  // (1..16 bytes: where the text is cut between tokens).
  const uint8_t shape = size > 0 ? data[0] : 0;
  ChoiceConfig cc;
  cc.stream = (shape & 1) != 0;
  cc.tools = true;
  cc.tool_names = names;
  cc.logprobs = (shape & 6) == 0;
  cc.top_logprobs = 1;
  const size_t piece = 1 + (shape >> 3) % 16;
  ChoiceOutput out(&h, cc, [](int32_t) { return std::string_view("\xff"); });
  std::string sse = out.start();
  for (size_t at = 0; at < body.size(); at += piece) {
    TokenEvent ev;
    ev.piece = std::string(body.substr(at, piece));
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
