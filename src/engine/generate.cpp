#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "engine/stop_strings.h"

namespace ll3 {

namespace {
double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Result<GenerateStats> generate(Session& session, const Tokenizer& tok, std::span<const int32_t> prompt,
                               const GenerateOptions& opt, FunctionRef<bool(std::string_view)> on_text) {
  GenerateStats st;
  if (prompt.empty()) return Status::error("generate: empty prompt");
  // Reuse the longest common prefix with what the session already holds, but always evaluate
  // at least the last prompt token so there are logits to sample from.
  const std::vector<int32_t>& hist = session.history();
  size_t common = 0;
  while (common < hist.size() && common + 1 < prompt.size() && hist[common] == prompt[common]) ++common;
  session.truncate(static_cast<int64_t>(common));
  st.n_reused = static_cast<int64_t>(common);
  st.n_prompt = static_cast<int64_t>(prompt.size() - common);

  double t0 = seconds();
  LL3_RETURN_IF_ERROR(session.eval(prompt.subspan(common)));
  st.prompt_seconds = seconds() - t0;

  Sampler sampler(opt.sampling, static_cast<int32_t>(session.n_vocab()));
  StreamDecoder decoder(tok);
  StopStringMatcher stops(opt.stop);
  bool client_gone = false;
  auto emit = [&](std::string_view text) {
    if (!text.empty() && !client_gone && !on_text(text)) client_gone = true;
  };

  double t1 = seconds();
  st.finish_reason = "length";
  for (int64_t i = 0; opt.max_tokens < 0 || i < opt.max_tokens; ++i) {
    const int32_t next = sampler.sample(session.last_logits(), session.history());
    if (!opt.ignore_eos && tok.is_eog(next)) {
      st.finish_reason = "stop";
      break;
    }
    ++st.n_generated;
    StopStringMatcher::Step step = stops.feed(decoder.push(next));
    emit(step.emit);
    if (step.stopped) {
      st.finish_reason = "stop";
      break;
    }
    if (client_gone) {
      st.finish_reason = "cancelled";
      break;
    }
    if (session.n_past() >= session.context()) {
      st.finish_reason = "context";
      break;
    }
    LL3_RETURN_IF_ERROR(session.eval(std::span<const int32_t>(&next, 1)));
  }
  st.gen_seconds = seconds() - t1;
  if (!stops.stopped()) {
    StopStringMatcher::Step tail = stops.feed(decoder.flush());
    emit(tail.emit);
    if (!tail.stopped) emit(stops.flush());
  }
  return st;
}

}  // namespace ll3
