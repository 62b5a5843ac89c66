#include "server/openai_output.h"

#include <algorithm>
#include <random>

namespace ll3::server {

std::string dump_json(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

ojson error_json(const ApiError& e) {
  ojson err = ojson::object();
  err["message"] = e.message;
  err["type"] = e.type.empty() ? "invalid_request_error" : e.type;
  err["param"] = e.param.empty() ? ojson(nullptr) : ojson(e.param);
  err["code"] = e.code.empty() ? ojson(nullptr) : ojson(e.code);
  ojson j = ojson::object();
  j["error"] = std::move(err);
  return j;
}

std::string sse_event(const ojson& j) { return "data: " + dump_json(j) + "\n\n"; }

std::string make_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string id = prefix;
  for (int k = 0; k < 2; ++k) {
    uint64_t x = rng();
    for (int i = 0; i < 12; ++i, x >>= 4) id += hex[x & 15];
  }
  return id;
}

ojson usage_json(const Usage& u) {
  ojson j = ojson::object();
  j["prompt_tokens"] = u.prompt_tokens;
  j["completion_tokens"] = u.completion_tokens;
  j["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  ojson details = ojson::object();
  details["cached_tokens"] = u.cached_tokens;
  j["prompt_tokens_details"] = std::move(details);
  return j;
}

ojson response_json(const ResponseHeader& h, bool chunk, ojson choices, const Usage* usage) {
  const bool chat = h.endpoint == Endpoint::kChatCompletions;
  ojson j = ojson::object();
  j["id"] = h.id;
  j["object"] = chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  j["created"] = h.created;
  j["model"] = h.model;
  j["system_fingerprint"] = "ll3";
  j["choices"] = std::move(choices);
  if (usage) {
    j["usage"] = usage_json(*usage);
  } else if (!chunk || h.include_usage) {
    j["usage"] = nullptr;
  }
  return j;
}

std::string usage_chunk(const ResponseHeader& h, const Usage& u) {
  return sse_event(response_json(h, true, ojson::array(), &u));
}

namespace {

ojson bytes_json(std::string_view s) {
  ojson b = ojson::array();
  for (char c : s) b.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return b;
}

}  // namespace

ChoiceOutput::ChoiceOutput(const ResponseHeader* header, ChoiceConfig config, PieceFn piece)
    : header_(header), cfg_(std::move(config)), piece_(std::move(piece)) {
  mode_ = cfg_.tools && chat() ? Mode::kUndecided : Mode::kContent;
  if (!chat()) text_ = cfg_.echo_text;
}

// "call_" + the response id's random part + choice and call numbers: unique within the server.
std::string ChoiceOutput::call_id(size_t k) const {
  const size_t dash = header_->id.find('-');
  return "call_" + header_->id.substr(dash == std::string::npos ? 0 : dash + 1) + "_" + std::to_string(cfg_.index) + "_" +
         std::to_string(k);
}

ChoiceOutput::TokenLogprob ChoiceOutput::record(const TokenEvent& ev) const {
  TokenLogprob lp;
  lp.token = ev.piece;
  lp.logprob = ev.logprob;
  lp.text_offset = static_cast<int64_t>(text_.size());
  for (const TopLogprob& t : ev.top_logprobs) lp.top.emplace_back(std::string(piece_(t.token)), t.logprob);
  return lp;
}

ojson ChoiceOutput::chat_logprobs(const std::vector<TokenLogprob>& lps) const {
  ojson content = ojson::array();
  for (const TokenLogprob& lp : lps) {
    ojson e = ojson::object();
    e["token"] = lp.token;
    e["logprob"] = lp.logprob;
    e["bytes"] = bytes_json(lp.token);
    ojson top = ojson::array();
    for (const auto& [tok, l] : lp.top) {
      ojson t = ojson::object();
      t["token"] = tok;
      t["logprob"] = l;
      t["bytes"] = bytes_json(tok);
      top.push_back(std::move(t));
    }
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  ojson j = ojson::object();
  j["content"] = std::move(content);
  j["refusal"] = nullptr;
  return j;
}

ojson ChoiceOutput::legacy_logprobs(const std::vector<TokenLogprob>& lps, bool with_echo) const {
  ojson tokens = ojson::array(), token_lps = ojson::array(), top = ojson::array(), offsets = ojson::array();
  auto add = [&](const TokenLogprob& lp) {
    tokens.push_back(lp.token);
    offsets.push_back(lp.text_offset);
    if (!lp.scored) {
      token_lps.push_back(nullptr);
      top.push_back(nullptr);
      return;
    }
    token_lps.push_back(lp.logprob);
    ojson t = ojson::object();
    for (const auto& [tok, l] : lp.top) t[tok] = l;
    top.push_back(std::move(t));
  };
  if (with_echo && echo_ready_) {
    for (const TokenLogprob& lp : echo_lps_) add(lp);
  } else if (with_echo) {
    int64_t off = 0;
    for (int32_t t : cfg_.echo_tokens) {
      const std::string_view p = piece_(t);
      add(TokenLogprob{std::string(p), 0, {}, off, false});
      off += static_cast<int64_t>(p.size());
    }
  }
  for (const TokenLogprob& lp : lps) add(lp);
  ojson j = ojson::object();
  j["tokens"] = std::move(tokens);
  j["token_logprobs"] = std::move(token_lps);
  j["top_logprobs"] = std::move(top);
  j["text_offset"] = std::move(offsets);
  return j;
}

std::string ChoiceOutput::content_chunk(const std::string& text, const std::vector<TokenLogprob>& lps,
                                        const char* finish) const {
  if (finish == nullptr && (!cfg_.logprobs || lps.empty())) return text_chunk(text);
  return content_chunk_tree(text, lps, finish);
}

std::string ChoiceOutput::text_chunk(const std::string& text) const {
  if (text_chunk_head_.empty()) {
    const std::string chunk = content_chunk_tree("\x01", {}, nullptr);
    const std::string marker = "\"\\u0001\"";  // the marker's JSON string
    const size_t at = chunk.rfind(marker);  // after the header (id, model): nothing of a user's after it
    text_chunk_head_ = chunk.substr(0, at);
    text_chunk_tail_ = chunk.substr(at + marker.size());
  }
  return text_chunk_head_ + dump_json(ojson(text)) + text_chunk_tail_;
}

std::string ChoiceOutput::content_chunk_tree(const std::string& text, const std::vector<TokenLogprob>& lps,
                                             const char* finish) const {
  ojson c = ojson::object();
  if (chat()) {
    c["index"] = cfg_.index;
    ojson delta = ojson::object();
    if (!text.empty() || !finish) delta["content"] = text;
    c["delta"] = std::move(delta);
    c["logprobs"] = cfg_.logprobs && !lps.empty() ? chat_logprobs(lps) : ojson(nullptr);
  } else {
    c["text"] = text;
    c["index"] = cfg_.index;
    c["logprobs"] = cfg_.logprobs && !lps.empty() ? legacy_logprobs(lps, false) : ojson(nullptr);
  }
  c["finish_reason"] = finish ? ojson(finish) : ojson(nullptr);
  ojson choices = ojson::array();
  choices.push_back(std::move(c));
  return sse_event(response_json(*header_, true, std::move(choices), nullptr));
}

std::string ChoiceOutput::start() {
  if (!cfg_.stream) return "";
  if (chat()) {
    ojson delta = ojson::object();
    delta["role"] = "assistant";
    delta["content"] = "";
    return delta_chunk(std::move(delta));
  }
  if (cfg_.echo_text.empty() || cfg_.echo_scored) return "";  // a scored echo waits for prompt()
  return content_chunk(cfg_.echo_text, {}, nullptr);
}

std::string ChoiceOutput::prompt(const std::vector<PromptTokenLogprob>& lps) {
  if (!cfg_.echo_scored || echo_ready_) return "";
  int64_t off = 0;
  for (size_t j = 0; j < cfg_.echo_tokens.size(); ++j) {
    TokenLogprob lp;
    lp.token = std::string(piece_(cfg_.echo_tokens[j]));
    lp.text_offset = off;
    off += static_cast<int64_t>(lp.token.size());
    const size_t p = j + static_cast<size_t>(cfg_.echo_first);  // its index in the prompt
    lp.scored = p >= 1 && p - 1 < lps.size();
    if (lp.scored) {
      lp.logprob = lps[p - 1].logprob;
      for (const TopLogprob& t : lps[p - 1].top_logprobs) lp.top.emplace_back(std::string(piece_(t.token)), t.logprob);
    }
    echo_lps_.push_back(std::move(lp));
  }
  echo_ready_ = true;
  if (!cfg_.stream || cfg_.echo_text.empty()) return "";
  return content_chunk(cfg_.echo_text, echo_lps_, nullptr);
}

std::string ChoiceOutput::token(const TokenEvent& ev) {
  ++n_tokens_;
  const bool keep_lp = cfg_.logprobs && (!cfg_.stream || mode_ != Mode::kContent);
  if (mode_ == Mode::kContent) {
    if (keep_lp) logprobs_.push_back(record(ev));
    if (!cfg_.stream) {
      text_ += ev.text;
      return "";
    }
    std::vector<TokenLogprob> one;
    if (cfg_.logprobs) one.push_back(record(ev));
    text_ += ev.text;
    return content_chunk(ev.text, one, nullptr);
  }
  // Tools: nothing leaves while the output may still be a call.
  if (cfg_.logprobs) logprobs_.push_back(record(ev));
  held_ += ev.text;
  if (mode_ == Mode::kUndecided) {
    const ToolSniff s = sniff_tool_call(held_);
    if (s == ToolSniff::kMaybeCall) mode_ = Mode::kCall;
    if (s == ToolSniff::kContent) {
      mode_ = Mode::kContent;
      std::string out;
      text_ += held_;
      if (cfg_.stream) {
        out = content_chunk(held_, std::vector<TokenLogprob>(logprobs_.begin() + static_cast<long>(held_logprobs_), logprobs_.end()), nullptr);
        held_logprobs_ = logprobs_.size();
      }
      held_.clear();
      return out;
    }
  }
  return mode_ == Mode::kCall && cfg_.stream ? stream_calls() : "";
}

std::string ChoiceOutput::call_chunk(size_t k, const std::string* name, const std::string& arguments) const {
  ojson fn = ojson::object();
  ojson call = ojson::object();
  call["index"] = static_cast<int64_t>(k);
  if (name != nullptr) {
    call["id"] = call_id(k);
    call["type"] = "function";
    fn["name"] = *name;
  }
  fn["arguments"] = arguments;
  call["function"] = std::move(fn);
  ojson calls = ojson::array();
  calls.push_back(std::move(call));
  ojson delta = ojson::object();
  delta["tool_calls"] = std::move(calls);
  return delta_chunk(std::move(delta));
}

std::string ChoiceOutput::delta_chunk(ojson delta) const {
  ojson c = ojson::object();
  c["index"] = cfg_.index;
  c["delta"] = std::move(delta);
  c["logprobs"] = nullptr;
  c["finish_reason"] = nullptr;
  ojson choices = ojson::array();
  choices.push_back(std::move(c));
  return sse_event(response_json(*header_, true, std::move(choices), nullptr));
}

std::string ChoiceOutput::stream_calls() {
  std::string out;
  const std::vector<PartialCall> seen = scan_partial_tool_calls(held_);
  for (size_t k = 0; k < seen.size(); ++k) {
    if (k == headers_sent_) {
      // A header goes out only for a function that was offered: anything else is content at
      // the end, and nothing about it must have been sent.
      const auto& names = cfg_.tool_names;
      if (!seen[k].has_name || std::find(names.begin(), names.end(), seen[k].name) == names.end()) break;
      out += call_chunk(k, &seen[k].name, "");
      ++headers_sent_;
      args_sent_.emplace_back();
    }
    if (seen[k].object_arguments) out += send_arguments(k, seen[k].arguments);
  }
  return out;
}

std::string ChoiceOutput::send_arguments(size_t k, const std::string& args) {
  std::string& sent = args_sent_[k];
  // Only ever extend what the client has (a model that writes its arguments twice gets the
  // first version).
  if (args.size() <= sent.size() || args.compare(0, sent.size(), sent) != 0) return "";
  std::string out = call_chunk(k, nullptr, args.substr(sent.size()));
  sent = args;
  return out;
}

std::string ChoiceOutput::finish(const FinishInfo& f) {
  finish_reason_ = f.reason == FinishReason::kLength ? "length" : "stop";
  std::string tail = f.text;
  if (mode_ != Mode::kContent) {
    held_ += tail;
    calls_ = parse_tool_calls(held_, cfg_.tool_names);
    if (!calls_.empty() || headers_sent_ > 0) {
      // Calls streamed are calls, even when the model broke off their JSON: what was sent
      // cannot be taken back (as with OpenAI, arguments may be invalid JSON).
      finish_reason_ = "tool_calls";
      std::string out;
      if (cfg_.stream) {
        out = stream_calls();
        for (size_t k = 0; k < calls_.size(); ++k) {
          if (k >= headers_sent_) {
            out += call_chunk(k, &calls_[k].name, "");
            ++headers_sent_;
            args_sent_.emplace_back();
          }
          out += send_arguments(k, calls_[k].arguments);
          calls_[k].arguments = args_sent_[k];  // what the client holds
        }
        out += content_chunk("", {}, finish_reason_.c_str());
      }
      held_.clear();
      return out;
    }
    // Not a call after all: everything held back is content.
    tail = std::move(held_);
    held_.clear();
  }
  text_ += tail;
  if (!cfg_.stream) return "";
  std::vector<TokenLogprob> lps(logprobs_.begin() + static_cast<long>(held_logprobs_), logprobs_.end());
  held_logprobs_ = logprobs_.size();
  return content_chunk(tail, lps, finish_reason_.c_str());
}

ojson ChoiceOutput::choice() const {
  ojson c = ojson::object();
  if (chat()) {
    c["index"] = cfg_.index;
    ojson msg = ojson::object();
    msg["role"] = "assistant";
    if (calls_.empty()) {
      msg["content"] = text_;
    } else {
      msg["content"] = nullptr;
      ojson calls = ojson::array();
      for (size_t k = 0; k < calls_.size(); ++k) {
        ojson fn = ojson::object();
        fn["name"] = calls_[k].name;
        fn["arguments"] = calls_[k].arguments;
        ojson call = ojson::object();
        call["id"] = call_id(k);
        call["type"] = "function";
        call["function"] = std::move(fn);
        calls.push_back(std::move(call));
      }
      msg["tool_calls"] = std::move(calls);
    }
    msg["refusal"] = nullptr;
    c["message"] = std::move(msg);
    c["logprobs"] = cfg_.logprobs ? chat_logprobs(logprobs_) : ojson(nullptr);
  } else {
    c["text"] = text_;
    c["index"] = cfg_.index;
    c["logprobs"] = cfg_.logprobs ? legacy_logprobs(logprobs_, !cfg_.echo_text.empty() || !cfg_.echo_tokens.empty()) : ojson(nullptr);
  }
  c["finish_reason"] = finish_reason_;
  return c;
}

}  // namespace ll3::server
