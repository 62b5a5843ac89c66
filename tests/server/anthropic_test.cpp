// The Anthropic Messages API (POST /v1/messages, /v1/messages/count_tokens): the request's
// translation to the OpenAI chat body and its errors, the output's events from synthetic engine
// events (text, tool calls, stop sequences), and a real `ll3 serve`: greedy text equal to the
// engine's and to /v1/chat/completions', the stream's exact event sequence, stop reasons,
// tools, auth with X-Api-Key, errors in Anthropic's shape, count_tokens against usage.
#include <gtest/gtest.h>

#include "ll3/engine.h"
#include "server/anthropic_output.h"
#include "server/anthropic_request.h"
#include "server_harness.h"
#include "test_support.h"

namespace ll3::test {
namespace {

using server::ojson;

#define REQUIRE_SERVER() \
  LL3_REQUIRE_SHARED();  \
  ASSERT_NE(main_server(), nullptr) << "ll3 serve did not start"

// --- the request ----------------------------------------------------------------------------

ojson to_openai(const std::string& body, bool count_only = false) {
  ojson out;
  server::ApiError e = server::anthropic_to_openai(ojson::parse(body), count_only, &out);
  EXPECT_TRUE(e.ok()) << e.message;
  return out;
}

server::ApiError messages_error(const std::string& body) {
  server::ApiRequest r;
  return server::parse_messages_request(body, server::ModelInfo{}, &r);
}

TEST(AnthropicRequest, ConversationBecomesTheOpenAiChat) {
  const ojson o = to_openai(R"({
    "model": "claude-x", "max_tokens": 50, "metadata": {"user_id": "u"}, "unknown_field": 1,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "Be kind."}],
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18 C"}]},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "boom", "is_error": true},
        {"type": "text", "text": "Thanks"}]}],
    "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "any"}, "stop_sequences": ["END"], "temperature": 0.5, "top_p": 0.9, "top_k": 40,
    "stream": true})");
  const ojson want = ojson::parse(R"({
    "messages": [
      {"role": "system", "content": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}]},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": [{"type": "text", "text": "Let me look."}],
       "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "toolu_1", "content": [{"type": "text", "text": "18 C"}]},
      {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: boom"},
      {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}}],
    "tool_choice": "required",
    "max_tokens": 50, "stop": ["END"], "model": "claude-x", "temperature": 0.5, "top_p": 0.9, "top_k": 40, "stream": true})");
  EXPECT_EQ(o, want) << o.dump(2);
  EXPECT_EQ(to_openai(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f", "input_schema": {}}],
                          "tool_choice": {"type": "tool", "name": "f"}})")["tool_choice"],
            ojson::parse(R"({"type": "function", "function": {"name": "f"}})"));
  EXPECT_EQ(to_openai(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "none"}})")["tool_choice"], "none");
  // count_tokens needs no max_tokens and takes no sampling fields.
  const ojson c = to_openai(R"({"messages": [{"role": "user", "content": "x"}], "temperature": 3})", true);
  EXPECT_FALSE(c.contains("max_tokens"));
  EXPECT_FALSE(c.contains("temperature"));
}

TEST(AnthropicRequest, MistakesNameTheField) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"messages": [{"role": "user", "content": "x"}]})", "max_tokens"},
      {R"({"max_tokens": "ten", "messages": [{"role": "user", "content": "x"}]})", "max_tokens"},
      {R"({"max_tokens": 0, "messages": [{"role": "user", "content": "x"}]})", "max_tokens"},
      {R"({"max_tokens": 5})", "messages"},
      {R"({"max_tokens": 5, "messages": {}})", "messages"},
      {R"({"max_tokens": 5, "messages": []})", "messages"},
      {R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})", "messages[0].role"},
      {R"({"max_tokens": 5, "messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]})", "messages[0].content[0].type"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "f"}]}]})", "messages[0].content[0].type"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "text"}]}]})", "messages[0].content[0].text"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "is_error": 1}]}]})", "messages[0].content[0].is_error"},
      {R"({"max_tokens": 5, "system": 5, "messages": [{"role": "user", "content": "x"}]})", "system"},
      {R"({"max_tokens": 5, "temperature": "hot", "messages": [{"role": "user", "content": "x"}]})", "temperature"},
      {R"({"max_tokens": 5, "stop_sequences": "END", "messages": [{"role": "user", "content": "x"}]})", "stop_sequences"},
      {R"({"max_tokens": 5, "stop_sequences": [""], "messages": [{"role": "user", "content": "x"}]})", "stop_sequences[0]"},
      {R"({"max_tokens": 5, "tools": [{"name": "f"}], "messages": [{"role": "user", "content": "x"}]})", "tools[0].input_schema"},
      {R"({"max_tokens": 5, "tools": [{"type": "web_search_20250305", "name": "w"}], "messages": [{"role": "user", "content": "x"}]})", "tools[0].type"},
      {R"({"max_tokens": 5, "tool_choice": {"type": "sometimes"}, "messages": [{"role": "user", "content": "x"}]})", "tool_choice.type"},
      {R"({"max_tokens": 5, "tool_choice": {"type": "tool"}, "messages": [{"role": "user", "content": "x"}]})", "tool_choice.name"},
      {R"({"max_tokens": 5, "stream": "yes", "messages": [{"role": "user", "content": "x"}]})", "stream"},
      {R"([1])", ""},
      {R"({"max_tokens": )", ""},
  };
  for (const Case& c : cases) {
    const server::ApiError e = messages_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.message;
  }
  // OpenAI's names do not leak into Anthropic's messages.
  EXPECT_NE(messages_error(R"({"max_tokens": 5, "stop_sequences": [""], "messages": [{"role": "user", "content": "x"}]})").message.find("'stop_sequences[0]'"),
            std::string::npos);
}

TEST(AnthropicRequest, ErrorShape) {
  server::ApiError e;
  e.status = 429;
  e.message = "queue full";
  EXPECT_EQ(server::anthropic_error_json(e), ojson::parse(R"({"type": "error", "error": {"type": "rate_limit_error", "message": "queue full"}})"));
  const std::pair<int, const char*> types[] = {{400, "invalid_request_error"}, {401, "authentication_error"}, {403, "permission_error"},
                                               {404, "not_found_error"},       {405, "invalid_request_error"}, {413, "request_too_large"},
                                               {500, "api_error"},             {503, "overloaded_error"}};
  for (const auto& [status, type] : types) EXPECT_STREQ(server::anthropic_error_type(status), type) << status;
  EXPECT_TRUE(server::is_anthropic_path("/v1/messages"));
  EXPECT_TRUE(server::is_anthropic_path("/v1/messages/count_tokens"));
  EXPECT_FALSE(server::is_anthropic_path("/v1/messagesx"));
  EXPECT_FALSE(server::is_anthropic_path("/v1/chat/completions"));
}

// --- the output, from synthetic engine events --------------------------------------------------

TokenEvent token_event(const std::string& text) {
  TokenEvent ev;
  ev.piece = text;
  ev.text = text;
  return ev;
}

FinishInfo finish_info(FinishReason reason, const std::string& tail = "", const std::string& stop = "") {
  FinishInfo f;
  f.reason = reason;
  f.text = tail;
  f.stop_string = stop;
  return f;
}

// A stream's events as (name, data), checking each is `event: NAME` + `data: JSON` with a
// matching "type".
std::vector<std::pair<std::string, json>> parse_events(const std::string& sse) {
  std::vector<std::pair<std::string, json>> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << sse.substr(pos);
    if (end == std::string::npos) break;
    const std::string block = sse.substr(pos, end - pos);
    pos = end + 2;
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    const size_t nl = block.find('\n');
    EXPECT_EQ(block.compare(nl + 1, 6, "data: "), 0) << block;
    const std::string name = block.substr(7, nl - 7);
    json data = json::parse(block.substr(nl + 7));
    EXPECT_EQ(data["type"], name) << block;
    out.emplace_back(name, std::move(data));
  }
  return out;
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, json>>& events) {
  std::vector<std::string> n;
  for (const auto& e : events) n.push_back(e.first);
  return n;
}

struct Synthetic {
  server::ResponseHeader header;
  server::ChoiceOutput out;
  server::AnthropicOutput dialect;
  std::string sse;
  explicit Synthetic(bool tools)
      : header{server::Endpoint::kChatCompletions, "msg_1", "m", 0, false},
        out(&header, config(tools), [](int32_t) { return std::string_view(); }),
        dialect(tools) {
    sse = dialect.start(header, 7);
  }
  static server::ChoiceConfig config(bool tools) {
    server::ChoiceConfig c;
    c.tools = tools;
    c.tool_names = {"get_weather"};
    return c;
  }
  void token(const std::string& text) {
    out.token(token_event(text));
    sse += dialect.token(out);
  }
  void finish(const FinishInfo& f, int64_t completion_tokens) {
    out.finish(f);
    sse += dialect.finish(out, f);
    server::Usage u;
    u.prompt_tokens = 7;
    u.cached_tokens = 3;
    u.completion_tokens = completion_tokens;
    sse += dialect.end(u);
  }
};

TEST(AnthropicOutput, TextStreamsInAnthropicsEventOrder) {
  Synthetic s(false);
  s.token("Hel");
  s.token("");  // held back by the engine: nothing to send
  s.token("lo");
  s.finish(finish_info(FinishReason::kStop, " w", "END"), 4);
  const auto e = parse_events(s.sse);
  const std::vector<std::string> want = {"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta",
                                         "content_block_delta", "content_block_stop", "message_delta", "message_stop"};
  ASSERT_EQ(names_of(e), want) << s.sse;
  const json& msg = e[0].second["message"];
  EXPECT_EQ(msg["id"], "msg_1");
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["content"], json::array());
  EXPECT_EQ(msg["usage"]["input_tokens"], 7);
  EXPECT_EQ(e[1].second["content_block"], json::parse(R"({"type": "text", "text": ""})"));
  EXPECT_EQ(e[3].second["delta"], json::parse(R"({"type": "text_delta", "text": "Hel"})"));
  EXPECT_EQ(e[5].second["delta"]["text"], " w");
  EXPECT_EQ(e[6].second["index"], 0);
  EXPECT_EQ(e[7].second["delta"], json::parse(R"({"stop_reason": "stop_sequence", "stop_sequence": "END"})"));
  EXPECT_EQ(e[7].second["usage"], json::parse(R"({"input_tokens": 4, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 3, "output_tokens": 4})"));
  // The same output, not streamed.
  server::Usage u;
  u.prompt_tokens = 7;
  const ojson r = ojson::parse(s.dialect.response(s.header, s.out, finish_info(FinishReason::kStop, "", "END"), u));
  EXPECT_EQ(r["type"], "message");
  EXPECT_EQ(r["content"], ojson::parse(R"([{"type": "text", "text": "Hello w"}])"));
  EXPECT_EQ(r["stop_reason"], "stop_sequence");
  EXPECT_EQ(r["stop_sequence"], "END");
  EXPECT_EQ(r["usage"]["input_tokens"], 7);
}

TEST(AnthropicOutput, ToolCallBecomesToolUseBlock) {
  Synthetic s(true);
  for (const char* p : {"<|python_tag|>", "{\"name\": \"get_weather\", ", "\"parameters\": {\"city\": ", "\"Paris\"}}"}) s.token(p);
  s.finish(finish_info(FinishReason::kStop), 4);
  const auto e = parse_events(s.sse);
  const std::vector<std::string> want = {"message_start", "content_block_start", "ping", "content_block_delta", "content_block_stop",
                                         "message_delta", "message_stop"};
  ASSERT_EQ(names_of(e), want) << s.sse;
  const json& block = e[1].second["content_block"];
  EXPECT_EQ(block["type"], "tool_use");
  EXPECT_EQ(block["name"], "get_weather");
  EXPECT_EQ(block["input"], json::object());
  EXPECT_EQ(block["id"].get<std::string>().rfind("toolu_", 0), 0u);
  EXPECT_EQ(e[3].second["delta"], json::parse(R"({"type": "input_json_delta", "partial_json": "{\"city\":\"Paris\"}"})"));
  EXPECT_EQ(e[5].second["delta"]["stop_reason"], "tool_use");
  EXPECT_TRUE(e[5].second["delta"]["stop_sequence"].is_null());
  const ojson content = server::anthropic_content(s.out);
  ASSERT_EQ(content.size(), 1u);
  EXPECT_EQ(content[0]["input"], ojson::parse(R"({"city": "Paris"})"));
}

TEST(AnthropicOutput, ProseWithToolsAndEmptyOutputsAndLength) {
  Synthetic prose(true);
  prose.token(" ");
  EXPECT_EQ(names_of(parse_events(prose.sse)), std::vector<std::string>{"message_start"}) << "nothing while it may be a call";
  prose.token("Sunny");
  prose.finish(finish_info(FinishReason::kLength), 2);
  auto e = parse_events(prose.sse);
  ASSERT_EQ(e.size(), 7u) << prose.sse;
  EXPECT_EQ(e[1].first, "content_block_start");
  EXPECT_EQ(e[2].first, "ping");
  EXPECT_EQ(e[3].second["delta"]["text"], " Sunny");
  EXPECT_EQ(e[5].second["delta"]["stop_reason"], "max_tokens");

  Synthetic empty(true);
  empty.finish(finish_info(FinishReason::kStop), 0);
  e = parse_events(empty.sse);
  const std::vector<std::string> want = {"message_start", "content_block_start", "ping", "content_block_stop", "message_delta", "message_stop"};
  EXPECT_EQ(names_of(e), want) << empty.sse;
  EXPECT_EQ(e[4].second["delta"]["stop_reason"], "end_turn");
  EXPECT_EQ(server::anthropic_content(empty.out), ojson::parse(R"([{"type": "text", "text": ""}])"));

  server::ApiError err;
  err.status = 503;
  err.message = "stopping";
  e = parse_events(empty.dialect.error(err));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].second["error"]["type"], "overloaded_error");
}

// --- a real server -------------------------------------------------------------------------

Reply post_messages(HttpClient& c, const json& body, const std::string& path = "/v1/messages") { return post(c, path, body); }

// Bodies whose keys keep their order: the template writes tools with tojson, key by key, so an
// OpenAI tool is rendered as the client ordered it ({type, function: {name, description,
// parameters}}, which is also the order /v1/messages converts to).
ojson ordered(const json& j) { return ojson::parse(j.dump()); }
Reply post_ordered(HttpClient& c, const std::string& path, const ojson& body) { return c.request("POST", path, body.dump()); }

json user_turn(const std::string& text) { return json::array({{{"role", "user"}, {"content", text}}}); }

// The engine's greedy output for the chat template's tokens of OpenAI `messages` (and tools).
struct Expected {
  std::vector<int32_t> prompt;
  Engine::Completion out;
};
Expected expected(HttpClient& c, const ojson& messages, int64_t max_tokens, const ojson& tools = nullptr) {
  ojson b = {{"messages", messages}};
  if (!tools.is_null()) b["tools"] = tools;
  Reply t = post_ordered(c, "/tokenize", b);
  EXPECT_EQ(t.status, 200) << t.body;
  Expected x;
  x.prompt = t.body_json()["tokens"].get<std::vector<int32_t>>();
  EXPECT_FALSE(x.prompt.empty()) << t.body;
  Request r;
  r.tokens = x.prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  Result<Engine::Completion> out = reference_engine().generate(std::move(r));
  EXPECT_TRUE(out.ok()) << out.message();
  if (out.ok()) x.out = std::move(out.value());
  return x;
}

std::string text_of(const json& message) {
  std::string s;
  for (const json& b : message["content"]) {
    if (b["type"] == "text") s += b["text"].get<std::string>();
  }
  return s;
}

void expect_anthropic_error(const Reply& r, int status, const char* type) {
  EXPECT_EQ(r.status, status) << r.body;
  const json j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.body;
  EXPECT_EQ(j["type"], "error") << r.body;
  EXPECT_EQ(j["error"]["type"], type) << r.body;
  EXPECT_TRUE(j["error"]["message"].is_string()) << r.body;
}

TEST(AnthropicServer, GreedyTextEqualsTheEngineAndChatCompletions) {
  REQUIRE_SERVER();
  HttpClient c = main_client();
  const json body = {{"model", "claude-test"}, {"max_tokens", 12}, {"temperature", 0}, {"system", "You are terse."},
                     {"messages", user_turn("Name three rivers of Europe.")}, {"metadata", {{"user_id", "x"}}}};
  const json openai_messages = {{{"role", "system"}, {"content", "You are terse."}}, {{"role", "user"}, {"content", "Name three rivers of Europe."}}};
  const Expected want = expected(c, ordered(openai_messages), 12);
  ASSERT_FALSE(want.out.text.empty()) << "the engine's greedy answer is the reference: it must say something";
  Reply r = post_messages(c, body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json m = r.body_json();
  EXPECT_EQ(m["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_TRUE(m["model"].is_string());
  ASSERT_EQ(m["content"].size(), 1u);
  EXPECT_EQ(m["content"][0]["type"], "text");
  EXPECT_EQ(m["content"][0]["text"], want.out.text);
  EXPECT_EQ(m["stop_reason"], want.out.finish.reason == FinishReason::kLength ? "max_tokens" : "end_turn");
  EXPECT_TRUE(m["stop_sequence"].is_null());
  const json& u = m["usage"];
  EXPECT_EQ(u["input_tokens"].get<int64_t>() + u["cache_read_input_tokens"].get<int64_t>(), static_cast<int64_t>(want.prompt.size()));
  EXPECT_EQ(u["output_tokens"], want.out.finish.completion_tokens);
  // The OpenAI route with the same conversation says the same.
  Reply o = post(c, "/v1/chat/completions", {{"messages", openai_messages}, {"max_tokens", 12}, {"temperature", 0}});
  ASSERT_EQ(o.status, 200) << o.body;
  EXPECT_EQ(o.body_json()["choices"][0]["message"]["content"], m["content"][0]["text"]);
  EXPECT_EQ(o.body_json()["usage"]["prompt_tokens"], want.prompt.size());
  // count_tokens counts that prompt.
  Reply n = post_messages(c, {{"model", "claude-test"}, {"system", "You are terse."}, {"messages", user_turn("Name three rivers of Europe.")}},
                          "/v1/messages/count_tokens");
  ASSERT_EQ(n.status, 200) << n.body;
  EXPECT_EQ(n.body_json(), json({{"input_tokens", want.prompt.size()}}));
}

TEST(AnthropicServer, StreamIsAnthropicsEventSequence) {
  REQUIRE_SERVER();
  HttpClient c = main_client();
  json body = {{"max_tokens", 10}, {"temperature", 0}, {"messages", user_turn("Tell me about rivers.")}};
  Reply plain = post_messages(c, body);
  ASSERT_EQ(plain.status, 200) << plain.body;
  body["stream"] = true;
  // The raw stream (event lines included) through a plain request.
  Reply raw = c.request("POST", "/v1/messages", body.dump(), {{"anthropic-version", "2023-06-01"}});
  ASSERT_EQ(raw.status, 200) << raw.body;
  EXPECT_EQ(raw.headers["content-type"].rfind("text/event-stream", 0), 0u);
  const auto e = parse_events(raw.body);
  ASSERT_GE(e.size(), 7u) << raw.body;
  const size_t n = e.size();
  EXPECT_EQ(e[0].first, "message_start");
  EXPECT_EQ(e[1].first, "content_block_start");
  EXPECT_EQ(e[2].first, "ping");
  std::string text;
  for (size_t i = 3; i + 3 < n; ++i) {
    ASSERT_EQ(e[i].first, "content_block_delta") << i;
    EXPECT_EQ(e[i].second["index"], 0);
    EXPECT_EQ(e[i].second["delta"]["type"], "text_delta");
    text += e[i].second["delta"]["text"].get<std::string>();
  }
  EXPECT_EQ(e[n - 3].first, "content_block_stop");
  EXPECT_EQ(e[n - 2].first, "message_delta");
  EXPECT_EQ(e[n - 1].first, "message_stop");
  const json p = plain.body_json();
  ASSERT_FALSE(text_of(p).empty()) << plain.body;
  EXPECT_EQ(text, text_of(p));
  EXPECT_EQ(e[n - 2].second["delta"]["stop_reason"], p["stop_reason"]);
  EXPECT_EQ(e[n - 2].second["usage"]["output_tokens"], p["usage"]["output_tokens"]);
  const json& start_usage = e[0].second["message"]["usage"];
  const json& end_usage = e[n - 2].second["usage"];
  EXPECT_EQ(start_usage["input_tokens"], end_usage["input_tokens"].get<int64_t>() + end_usage["cache_read_input_tokens"].get<int64_t>());
}

TEST(AnthropicServer, StopSequencesAndMaxTokens) {
  REQUIRE_SERVER();
  HttpClient c = main_client();
  const json messages = user_turn("Count to twenty.");
  const Expected want = expected(c, ordered(messages), 16);
  const std::string& t = want.out.text;
  // A stop string from the middle of the greedy output, on character boundaries: the text
  // before it comes back, and the string.
  auto boundary = [&](size_t i) { return i >= t.size() || (static_cast<unsigned char>(t[i]) & 0xC0) != 0x80; };
  size_t b = t.size() / 2;
  while (b > 1 && !boundary(b)) --b;
  size_t e = b + 3;
  while (e < t.size() && !boundary(e)) ++e;
  ASSERT_LT(e, t.size()) << "the greedy output is too short to cut: " << t;
  const std::string stop = t.substr(b, e - b);
  const std::string before = t.substr(0, t.find(stop));
  json body = {{"max_tokens", 16}, {"temperature", 0}, {"messages", messages}, {"stop_sequences", {stop}}};
  Reply r = post_messages(c, body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(text_of(r.body_json()), before);
  EXPECT_EQ(r.body_json()["stop_reason"], "stop_sequence");
  EXPECT_EQ(r.body_json()["stop_sequence"], stop);
  body["stream"] = true;
  Reply s = c.stream("/v1/messages", body.dump());
  ASSERT_EQ(s.status, 200);
  std::string text;
  json delta;
  for (const std::string& ev : s.events) {
    const json j = json::parse(ev);
    if (j["type"] == "content_block_delta") text += j["delta"]["text"].get<std::string>();
    if (j["type"] == "message_delta") delta = j["delta"];
  }
  EXPECT_EQ(text, before);
  EXPECT_EQ(delta, json({{"stop_reason", "stop_sequence"}, {"stop_sequence", stop}}));
  // max_tokens reached.
  Reply m = post_messages(c, {{"max_tokens", 2}, {"temperature", 0}, {"messages", messages}});
  ASSERT_EQ(m.status, 200) << m.body;
  ASSERT_GT(want.out.finish.completion_tokens, 2) << "the answer must be longer than the cut";
  EXPECT_EQ(m.body_json()["stop_reason"], "max_tokens");
  EXPECT_EQ(m.body_json()["usage"]["output_tokens"], 2);
}

const ojson& weather_tool_openai() {
  static const ojson t = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  return t;
}
const ojson& weather_tool() {
  static const ojson t = ojson::parse(R"([{"name": "get_weather", "description": "Current weather",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}])");
  return t;
}

// /v1/messages' answer is /v1/chat/completions' answer to the same conversation: the same text,
// or the same calls as tool_use blocks.
void expect_same_answer(const json& message, const json& choice) {
  if (choice["finish_reason"] == "tool_calls") {
    EXPECT_EQ(message["stop_reason"], "tool_use") << message.dump();
    const json& calls = choice["message"]["tool_calls"];
    ASSERT_FALSE(calls.empty()) << choice.dump();
    std::vector<json> uses;
    for (const json& b : message["content"]) {
      if (b["type"] == "tool_use") uses.push_back(b);
    }
    ASSERT_EQ(uses.size(), calls.size()) << message.dump();
    for (size_t k = 0; k < uses.size(); ++k) {
      EXPECT_EQ(uses[k]["name"], calls[k]["function"]["name"]);
      EXPECT_EQ(uses[k]["input"], json::parse(calls[k]["function"]["arguments"].get<std::string>()));
      EXPECT_EQ(uses[k]["id"].get<std::string>().rfind("toolu_", 0), 0u);
    }
  } else {
    EXPECT_EQ(text_of(message), choice["message"]["content"]) << message.dump();
    EXPECT_EQ(message["stop_reason"], choice["finish_reason"] == "length" ? "max_tokens" : "end_turn");
  }
}

TEST(AnthropicServer, ToolsRenderAndAnswer) {
  REQUIRE_SERVER();
  HttpClient c = main_client();
  const json messages = user_turn("Weather in Paris?");
  const Expected want = expected(c, ordered(messages), 8, weather_tool_openai());
  for (const json& choice : {json{{"type", "auto"}}, json{{"type", "any"}}, json{{"type", "tool"}, {"name", "get_weather"}}}) {
    const int max_tokens = choice["type"] == "auto" ? 8 : 64;  // room for a whole forced call
    ojson body = {{"max_tokens", max_tokens}, {"temperature", 0}, {"messages", ordered(messages)}, {"tools", weather_tool()}, {"tool_choice", ordered(choice)}};
    ojson openai = {{"max_tokens", max_tokens}, {"temperature", 0}, {"messages", ordered(messages)}, {"tools", weather_tool_openai()}};
    openai["tool_choice"] = choice["type"] == "auto" ? ojson("auto")
                            : choice["type"] == "any" ? ojson("required")
                                                      : ojson{{"type", "function"}, {"function", {{"name", "get_weather"}}}};
    Reply o = post_ordered(c, "/v1/chat/completions", openai);
    ASSERT_EQ(o.status, 200) << o.body;
    Reply r = post_ordered(c, "/v1/messages", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json m = r.body_json();
    EXPECT_EQ(m["usage"]["input_tokens"].get<int64_t>() + m["usage"]["cache_read_input_tokens"].get<int64_t>(),
              static_cast<int64_t>(want.prompt.size()))
        << "the tools are in the prompt, as on the OpenAI route";
    if (choice["type"] != "auto") {
      // A forced call is enforced while sampling: both routes make it.
      EXPECT_EQ(o.body_json()["choices"][0]["finish_reason"], "tool_calls") << o.body;
      EXPECT_EQ(m["stop_reason"], "tool_use") << r.body;
    }
    expect_same_answer(m, o.body_json()["choices"][0]);
    // Streamed: the same blocks.
    body["stream"] = true;
    Reply s = c.stream("/v1/messages", body.dump());
    ASSERT_EQ(s.status, 200);
    std::string text, input, stop;
    for (const std::string& ev : s.events) {
      const json j = json::parse(ev);
      if (j["type"] == "content_block_delta") {
        text += j["delta"].value("text", "");
        input += j["delta"].value("partial_json", "");
      }
      if (j["type"] == "message_delta") stop = j["delta"]["stop_reason"];
    }
    EXPECT_EQ(stop, m["stop_reason"]);
    EXPECT_EQ(text, text_of(m));
    if (choice["type"] != "auto") EXPECT_EQ(stop, "tool_use");
    if (stop == "tool_use") EXPECT_EQ(json::parse(input), m["content"].back()["input"]);
  }
  Reply n = post_ordered(c, "/v1/messages/count_tokens", {{"messages", ordered(messages)}, {"tools", weather_tool()}});
  ASSERT_EQ(n.status, 200) << n.body;
  EXPECT_EQ(n.body_json()["input_tokens"], want.prompt.size());
  // A forced tool that is not offered.
  ojson body = {{"max_tokens", 8}, {"messages", ordered(messages)}, {"tools", weather_tool()}, {"tool_choice", {{"type", "tool"}, {"name", "nope"}}}};
  expect_anthropic_error(post_ordered(c, "/v1/messages", body), 400, "invalid_request_error");
}

TEST(AnthropicServer, ToolResultRoundTripRendersAsTheOpenAiConversation) {
  REQUIRE_SERVER();
  HttpClient c = main_client();
  const ojson anthropic = ojson::parse(R"([{"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18 C, sunny"}]}]}])");
  const ojson openai = ojson::parse(R"([{"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "toolu_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "18 C, sunny"}])");
  const Expected want = expected(c, openai, 6, weather_tool_openai());
  Reply d = post(c, "/detokenize", {{"tokens", want.prompt}});
  ASSERT_EQ(d.status, 200) << d.body;
  const std::string prompt = d.body_json()["content"];
  EXPECT_NE(prompt.find("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<|start_header_id|>ipython<|end_header_id|>\n\n\"18 C, sunny\"<|eot_id|>"), std::string::npos) << prompt;
  Reply n = post_ordered(c, "/v1/messages/count_tokens", {{"messages", anthropic}, {"tools", weather_tool()}});
  ASSERT_EQ(n.status, 200) << n.body;
  EXPECT_EQ(n.body_json()["input_tokens"], want.prompt.size());
  // The same prompt, so the same answer as the chat route's.
  const ojson chat = {{"max_tokens", 6}, {"temperature", 0}, {"messages", openai}, {"tools", weather_tool_openai()}};
  Reply o = post_ordered(c, "/v1/chat/completions", chat);
  ASSERT_EQ(o.status, 200) << o.body;
  Reply r = post_ordered(c, "/v1/messages", {{"max_tokens", 6}, {"temperature", 0}, {"messages", anthropic}, {"tools", weather_tool()}});
  ASSERT_EQ(r.status, 200) << r.body;
  expect_same_answer(r.body_json(), o.body_json()["choices"][0]);
  // is_error reaches the model as words.
  ojson failed = anthropic;
  failed[2]["content"][0]["is_error"] = true;
  Reply f = post_ordered(c, "/v1/messages/count_tokens", {{"messages", failed}, {"tools", weather_tool()}});
  ASSERT_EQ(f.status, 200) << f.body;
  EXPECT_GT(f.body_json()["input_tokens"].get<size_t>(), want.prompt.size());
}

TEST(AnthropicServer, ApiKeyAsXApiKeyAndErrorsInAnthropicsShape) {
  REQUIRE_SERVER();
  HttpClient c(main_server()->port());  // no bearer key
  const std::string body = json({{"max_tokens", 1}, {"messages", user_turn("hi")}}).dump();
  Reply ok = c.request("POST", "/v1/messages", body, {{"x-api-key", kKey}, {"anthropic-version", "2023-06-01"}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  expect_anthropic_error(c.request("POST", "/v1/messages", body), 401, "authentication_error");
  expect_anthropic_error(c.request("POST", "/v1/messages", body, {{"x-api-key", "wrong"}}), 401, "authentication_error");
  expect_anthropic_error(c.request("POST", "/v1/messages/count_tokens", body), 401, "authentication_error");
  // The OpenAI routes keep OpenAI's shape, and take X-Api-Key too.
  Reply models = c.request("GET", "/v1/models", "", {{"x-api-key", kKey}});
  EXPECT_EQ(models.status, 200);
  Reply openai = c.request("GET", "/v1/models");
  EXPECT_EQ(openai.status, 401);
  EXPECT_TRUE(openai.body_json()["error"].is_object());

  HttpClient k = main_client();
  auto raw = [&](const std::string& b) { return k.request("POST", "/v1/messages", b); };
  expect_anthropic_error(raw("{\"max_tokens\": "), 400, "invalid_request_error");
  expect_anthropic_error(raw("[]"), 400, "invalid_request_error");
  expect_anthropic_error(raw(json({{"messages", user_turn("hi")}}).dump()), 400, "invalid_request_error");
  expect_anthropic_error(raw(json({{"max_tokens", "ten"}, {"messages", user_turn("hi")}}).dump()), 400, "invalid_request_error");
  expect_anthropic_error(raw(json({{"max_tokens", 5}, {"messages", "hi"}}).dump()), 400, "invalid_request_error");
  expect_anthropic_error(raw(json({{"max_tokens", 5}, {"temperature", -1}, {"messages", user_turn("hi")}}).dump()), 400,
                         "invalid_request_error");
  Reply missing = raw(json({{"messages", user_turn("hi")}}).dump());
  EXPECT_NE(missing.body_json()["error"]["message"].get<std::string>().find("max_tokens"), std::string::npos);
  // Too long for the context, streamed or not: a 400, not a stream.
  json long_body = {{"max_tokens", 9000}, {"messages", user_turn("hi")}};
  expect_anthropic_error(raw(long_body.dump()), 400, "invalid_request_error");
  long_body["stream"] = true;
  expect_anthropic_error(k.stream("/v1/messages", long_body.dump()), 400, "invalid_request_error");
  // Routes and methods.
  expect_anthropic_error(k.request("POST", "/v1/messages/batches", "{}"), 404, "not_found_error");
  expect_anthropic_error(k.request("GET", "/v1/messages"), 405, "invalid_request_error");
  expect_anthropic_error(k.request("POST", "/v1/messages/count_tokens", "{\"messages\": 3}"), 400, "invalid_request_error");
}

TEST(AnthropicServer, CountedInMetrics) {
  REQUIRE_SERVER();
  HttpClient c = main_client();
  auto durations = [&] { return metric(c.request("GET", "/metrics").body, "ll3_request_duration_seconds_count"); };
  const double before = durations();
  Reply r = post_messages(c, {{"max_tokens", 1}, {"messages", user_turn("hi")}});
  ASSERT_EQ(r.status, 200) << r.body;
  // The access log records a request once its response has ended: poll briefly.
  double after = before;
  for (int i = 0; i < 100 && after <= before; ++i) after = durations();
  EXPECT_GT(after, before);
}

}  // namespace
}  // namespace ll3::test
