// Engine events -> OpenAI output, with synthetic events: stream chunks in OpenAI's order, the
// held-back tail, logprobs in both shapes, tool calls (bare JSON, after <|python_tag|>,
// several, not a call after all) streamed as deltas while the model writes them and not streamed,
// and the Prometheus exposition format.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <sstream>

#include "server/metrics.h"
#include "server/openai_output.h"
#include "server/tool_calls.h"

namespace ll3::server {
namespace {

using json = nlohmann::ordered_json;

std::string_view piece_of(int32_t id) {
  static const std::string pieces[] = {"a", "b", "{", "\"", "\xe2\x82", "x"};
  return pieces[id % 6];
}

TokenEvent ev(int32_t token, std::string piece, std::string text, float lp = -0.5f) {
  TokenEvent e;
  e.token = token;
  e.piece = std::move(piece);
  e.text = std::move(text);
  e.logprob = lp;
  e.top_logprobs = {{token, lp}, {5, lp - 1}};
  return e;
}

// The JSON payloads of an SSE text.
std::vector<json> events(const std::string& sse) {
  std::vector<json> out;
  size_t at = 0;
  while (at < sse.size()) {
    const size_t end = sse.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << sse;
    if (end == std::string::npos) break;
    const std::string e = sse.substr(at, end - at);
    EXPECT_EQ(e.rfind("data: ", 0), 0u) << e;
    out.push_back(json::parse(e.substr(6)));
    at = end + 2;
  }
  return out;
}

ResponseHeader chat_header() {
  ResponseHeader h;
  h.endpoint = Endpoint::kChatCompletions;
  h.id = "chatcmpl-abc";
  h.model = "m";
  h.created = 42;
  return h;
}

// A streamed chat choice with these tools offered.
ChoiceConfig streamed_tools(std::vector<std::string> names) {
  ChoiceConfig c;
  c.tools = true;
  c.tool_names = std::move(names);
  c.stream = true;
  return c;
}

FinishInfo fin(FinishReason r, std::string tail = "") {
  FinishInfo f;
  f.reason = r;
  f.text = std::move(tail);
  return f;
}

TEST(OpenAiOutput, ChatStreamChunksInOpenAisOrder) {
  ResponseHeader h = chat_header();
  h.include_usage = true;
  ChoiceConfig c;
  c.stream = true;
  ChoiceOutput o(&h, c, piece_of);
  // One statement per call: the operands of + are evaluated in no fixed order.
  std::string sse = o.start();
  sse += o.token(ev(0, "a", "a"));
  sse += o.token(ev(4, "\xe2\x82", ""));
  sse += o.token(ev(5, "\xac", "\xe2\x82\xac"));
  sse += o.finish(fin(FinishReason::kLength, "!"));
  std::vector<json> e = events(sse);
  ASSERT_EQ(e.size(), 5u);
  for (const json& j : e) {
    EXPECT_EQ(j["id"], "chatcmpl-abc");
    EXPECT_EQ(j["object"], "chat.completion.chunk");
    EXPECT_EQ(j["created"], 42);
    EXPECT_EQ(j["model"], "m");
    EXPECT_TRUE(j["usage"].is_null());  // include_usage: null until the usage chunk
    ASSERT_EQ(j["choices"].size(), 1u);
  }
  EXPECT_EQ(e[0]["choices"][0]["delta"], json::parse(R"({"role": "assistant", "content": ""})"));
  EXPECT_EQ(e[1]["choices"][0]["delta"]["content"], "a");
  EXPECT_EQ(e[2]["choices"][0]["delta"]["content"], "");  // one chunk per token, even when held back
  EXPECT_EQ(e[3]["choices"][0]["delta"]["content"], "\xe2\x82\xac");
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(e[i]["choices"][0]["finish_reason"].is_null());
  // The tail held back until the end goes out with the finish reason.
  EXPECT_EQ(e[4]["choices"][0]["delta"]["content"], "!");
  EXPECT_EQ(e[4]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(o.text(), "a\xe2\x82\xac!");
  EXPECT_EQ(o.tokens(), 3);
  // Without a tail the last chunk has an empty delta, as OpenAI's does.
  ChoiceOutput o2(&h, c, piece_of);
  std::vector<json> e2 = events(o2.finish(fin(FinishReason::kStop)));
  EXPECT_EQ(e2[0]["choices"][0]["delta"], json::object());
  EXPECT_EQ(e2[0]["choices"][0]["finish_reason"], "stop");
  std::vector<json> u = events(usage_chunk(h, Usage{5, 3, 2}));
  EXPECT_EQ(u[0]["choices"], json::array());
  EXPECT_EQ(u[0]["usage"], json::parse(R"({"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8,
                                            "prompt_tokens_details": {"cached_tokens": 2}})"));
}

TEST(OpenAiOutput, ChatLogprobsStreamedAndNot) {
  ResponseHeader h = chat_header();
  ChoiceConfig c;
  c.logprobs = true;
  c.top_logprobs = 2;
  c.stream = true;
  ChoiceOutput s(&h, c, piece_of);
  std::vector<json> e = events(s.token(ev(4, "\xe2\x82", "", -0.25f)));
  const json& lp = e[0]["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(lp["logprob"], -0.25);
  EXPECT_EQ(lp["bytes"], json::array({0xe2, 0x82}));  // exact bytes, though not UTF-8
  EXPECT_EQ(lp["top_logprobs"].size(), 2u);
  EXPECT_EQ(lp["top_logprobs"][1]["token"], "x");
  c.stream = false;
  ChoiceOutput n(&h, c, piece_of);
  n.token(ev(0, "a", "a"));
  n.token(ev(1, "b", "b"));
  n.finish(fin(FinishReason::kStop));
  json ch = n.choice();
  EXPECT_EQ(ch["message"]["content"], "ab");
  EXPECT_EQ(ch["message"]["role"], "assistant");
  EXPECT_EQ(ch["finish_reason"], "stop");
  ASSERT_EQ(ch["logprobs"]["content"].size(), 2u);
  EXPECT_EQ(ch["logprobs"]["content"][1]["token"], "b");
}

TEST(OpenAiOutput, CompletionsLegacyLogprobsAndEcho) {
  ResponseHeader h = chat_header();
  h.endpoint = Endpoint::kCompletions;
  h.id = "cmpl-1";
  ChoiceConfig c;
  c.logprobs = true;
  c.top_logprobs = 2;
  c.echo_text = "ab";
  c.echo_tokens = {0, 1};
  ChoiceOutput o(&h, c, piece_of);
  o.token(ev(5, "x", "x", -0.1f));
  o.token(ev(0, "a", "a", -0.2f));
  o.finish(fin(FinishReason::kLength));
  json ch = o.choice();
  EXPECT_EQ(ch["text"], "abxa");
  EXPECT_EQ(ch["finish_reason"], "length");
  const json& lp = ch["logprobs"];
  EXPECT_EQ(lp["tokens"], json::array({"a", "b", "x", "a"}));
  EXPECT_EQ(lp["token_logprobs"][0], nullptr);
  EXPECT_EQ(lp["token_logprobs"][1], nullptr);
  EXPECT_FLOAT_EQ(lp["token_logprobs"][2].get<float>(), -0.1f);
  EXPECT_EQ(lp["top_logprobs"][0], nullptr);
  EXPECT_EQ(lp["top_logprobs"][3].size(), 2u);
  EXPECT_EQ(lp["text_offset"], json::array({0, 1, 2, 3}));
  json resp = response_json(h, false, json::array({ch}), nullptr);
  EXPECT_EQ(resp["object"], "text_completion");
  // Streamed: the echo first, then one chunk per token.
  c.stream = true;
  ChoiceOutput s(&h, c, piece_of);
  std::string sse = s.start();
  sse += s.token(ev(5, "x", "x"));
  std::vector<json> e = events(sse);
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0]["choices"][0]["text"], "ab");
  EXPECT_EQ(e[1]["choices"][0]["text"], "x");
  EXPECT_EQ(e[1]["choices"][0]["logprobs"]["tokens"], json::array({"x"}));
  EXPECT_EQ(e[1]["object"], "text_completion");
}

TEST(ToolCalls, ParsesLlama31Calls) {
  const std::vector<std::string> names = {"get_weather", "f"};
  auto one = parse_tool_calls(" {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}} ", names);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].name, "get_weather");
  EXPECT_EQ(one[0].arguments, "{\"city\":\"Paris\"}");
  auto tagged = parse_tool_calls("<|python_tag|>{\"name\": \"f\", \"arguments\": {\"x\": [1, \"}\"]}}", names);
  ASSERT_EQ(tagged.size(), 1u);
  EXPECT_EQ(tagged[0].arguments, "{\"x\":[1,\"}\"]}");
  auto two = parse_tool_calls("{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"get_weather\"}", names);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].arguments, "{}");
  auto arr = parse_tool_calls("[{\"name\": \"f\", \"parameters\": {\"a\": 1}}, {\"name\": \"f\", \"parameters\": {\"a\": 2}}]", names);
  ASSERT_EQ(arr.size(), 2u);
  // Not calls: prose, unknown functions, built-in tool syntax, broken JSON, trailing prose.
  for (const char* t : {"Hello", "{\"name\": \"nope\", \"parameters\": {}}", "<|python_tag|>brave_search.call(query=\"x\")",
                        "{\"name\": \"f\", \"parameters\": {", "{\"name\": \"f\"} and more", "{\"parameters\": {}}", "",
                        "{\"name\": 5}", "[]", "{\"name\": \"f\", \"parameters\": 7}"}) {
    EXPECT_TRUE(parse_tool_calls(t, names).empty()) << t;
  }
  EXPECT_EQ(sniff_tool_call("  "), ToolSniff::kUndecided);
  EXPECT_EQ(sniff_tool_call(" <|pyth"), ToolSniff::kUndecided);
  EXPECT_EQ(sniff_tool_call("<|python_tag|>"), ToolSniff::kMaybeCall);
  EXPECT_EQ(sniff_tool_call("\n{\"na"), ToolSniff::kMaybeCall);
  EXPECT_EQ(sniff_tool_call("The"), ToolSniff::kContent);
  EXPECT_EQ(sniff_tool_call("<|eot"), ToolSniff::kContent);
}

TEST(OpenAiOutput, ToolCallsStreamedAsDeltasAndWhole) {
  ResponseHeader h = chat_header();
  ChoiceConfig c = streamed_tools({"get_weather"});
  const std::vector<std::string> pieces = {"<|python_tag|>", "{\"name\": \"get_weather\", ", "\"parameters\": {\"city\": ", "\"Paris\"}}"};
  ChoiceOutput s(&h, c, piece_of);
  std::string sse = s.start();
  // Each piece sends what it settles: nothing for the tag, the header once the name is
  // complete, then the arguments as they arrive (minified).
  const std::vector<size_t> chunks_per_piece = {0, 1, 1, 1};
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::string chunk = s.token(ev(static_cast<int32_t>(i), pieces[i], pieces[i]));
    EXPECT_EQ(events(chunk).size(), chunks_per_piece[i]) << "piece " << i << ": " << chunk;
    sse += chunk;
  }
  sse += s.finish(fin(FinishReason::kStop));
  std::vector<json> e = events(sse);
  ASSERT_EQ(e.size(), 5u);
  const json& first = e[1]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(first["index"], 0);
  EXPECT_EQ(first["type"], "function");
  EXPECT_EQ(first["function"]["name"], "get_weather");
  EXPECT_EQ(first["function"]["arguments"], "");
  EXPECT_EQ(first["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(e[2]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"], "{\"city\":");
  EXPECT_EQ(e[3]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"], "\"Paris\"}");
  EXPECT_FALSE(e[3]["choices"][0]["delta"]["tool_calls"][0].contains("id"));
  EXPECT_EQ(e[4]["choices"][0]["finish_reason"], "tool_calls");

  c.stream = false;
  ChoiceOutput n(&h, c, piece_of);
  n.token(ev(0, "{\"name\": \"get_weather\", \"parameters\": {}}", "{\"name\": \"get_weather\", \"parameters\": {}}"));
  n.finish(fin(FinishReason::kStop));
  json ch = n.choice();
  EXPECT_EQ(ch["finish_reason"], "tool_calls");
  EXPECT_TRUE(ch["message"]["content"].is_null());
  EXPECT_EQ(ch["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(ch["message"]["tool_calls"][0]["function"]["arguments"], "{}");

  // Prose with tools offered streams as content once it cannot be a call.
  c.stream = true;
  ChoiceOutput p(&h, c, piece_of);
  EXPECT_TRUE(p.token(ev(0, " ", " ")).empty());
  std::vector<json> pe = events(p.token(ev(1, "Hi", "Hi")));
  ASSERT_EQ(pe.size(), 1u);
  EXPECT_EQ(pe[0]["choices"][0]["delta"]["content"], " Hi");
  // Something that looked like a call and was not: it all comes out as content at the end.
  ChoiceOutput q(&h, c, piece_of);
  EXPECT_TRUE(q.token(ev(0, "{", "{")).empty());
  std::vector<json> qe = events(q.finish(fin(FinishReason::kLength, "oops")));
  EXPECT_EQ(qe.back()["choices"][0]["delta"]["content"], "{oops");
  EXPECT_EQ(qe.back()["choices"][0]["finish_reason"], "length");
}

// A streamed token's chunk (rendered once around a marker, the text set in) is byte for byte
// the chunk's JSON tree dumped, for texts that need escaping, invalid UTF-8 and the marker
// itself, on both endpoints.
TEST(OpenAiOutput, StreamedTokenChunksAreTheirJsonTreesDumped) {
  const std::vector<std::string> texts = {"a", "", "\"", "\\", "\n\t\r", "\x01", "\x7f\x1f", "\xff\xfe", "\xe2\x82",
                                          "\xe2\x80\xa8", "caf\xc3\xa9 \xf0\x9f\x99\x82", "\"content\":\"\\u0001\""};
  for (const Endpoint endpoint : {Endpoint::kChatCompletions, Endpoint::kCompletions}) {
    ResponseHeader h = chat_header();
    h.endpoint = endpoint;
    h.include_usage = endpoint == Endpoint::kCompletions;
    ChoiceConfig c;
    c.stream = true;
    c.index = 2;
    ChoiceOutput o(&h, c, piece_of);
    (void)o.start();
    for (const std::string& t : texts) {
      json choice = json::object();
      if (endpoint == Endpoint::kChatCompletions) {
        choice["index"] = 2;
        choice["delta"] = json({{"content", t}});
        choice["logprobs"] = nullptr;
      } else {
        choice["text"] = t;
        choice["index"] = 2;
        choice["logprobs"] = nullptr;
      }
      choice["finish_reason"] = nullptr;
      const std::string want = sse_event(response_json(h, true, json::array({choice}), nullptr));
      EXPECT_EQ(o.token(ev(0, t, t)), want) << testing::PrintToString(t);
    }
  }
}

TEST(OpenAiOutput, ErrorsAndInvalidUtf8) {
  ApiError e = invalid_request("bad", "temperature");
  EXPECT_EQ(error_json(e), json::parse(R"({"error": {"message": "bad", "type": "invalid_request_error", "param": "temperature", "code": null}})"));
  json j = json::object();
  j["s"] = std::string("\xff\xfe");
  EXPECT_EQ(dump_json(j), "{\"s\":\"\xef\xbf\xbd\xef\xbf\xbd\"}");
  EXPECT_EQ(make_id("cmpl-").size(), 5u + 24u);
  EXPECT_NE(make_id("x"), make_id("x"));
}

// The exposition format: HELP and TYPE before each family, cumulative buckets ending at +Inf
// with the count, _sum and _count.
TEST(Metrics, PrometheusExposition) {
  Metrics m;
  m.ttft.observe(0.003);
  m.ttft.observe(0.003);
  m.ttft.observe(100);
  m.count_request(200);
  m.count_request(429);
  EngineStats st;
  st.kv_blocks = 10;
  st.kv_blocks_used = 5;
  st.step_tokens[0] = 2;
  st.step_tokens[3] = 1;
  st.step_tokens_sum = 9;
  std::string out = m.render(&st, ServerGauges{});
  std::istringstream in(out);
  std::string line, family, type;
  std::map<std::string, std::string> types;
  double last_bucket = -1;
  while (std::getline(in, line)) {
    ASSERT_FALSE(line.empty());
    if (line.rfind("# HELP ", 0) == 0) {
      family = line.substr(7, line.find(' ', 7) - 7);
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      ASSERT_EQ(line.substr(7, family.size()), family) << "TYPE follows its HELP";
      types[family] = line.substr(8 + family.size());
      last_bucket = -1;
      continue;
    }
    ASSERT_EQ(line.rfind(family, 0), 0u) << line << " outside its family " << family;
    const double v = std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
    ASSERT_TRUE(std::isfinite(v)) << line;
    if (line.find("_bucket{le=") != std::string::npos) {
      EXPECT_GE(v, last_bucket) << "cumulative: " << line;
      last_bucket = v;
    }
  }
  for (const char* c : {"ll3_requests_total", "ll3_prompt_tokens_total", "ll3_generation_tokens_total", "ll3_prefix_cache_hits_total",
                        "ll3_prefix_cache_queries_total", "ll3_preemptions_total"}) {
    EXPECT_EQ(types[c], "counter") << c;
  }
  for (const char* h : {"ll3_time_to_first_token_seconds", "ll3_inter_token_latency_seconds", "ll3_request_duration_seconds",
                        "ll3_batch_tokens", "ll3_batch_sequences"}) {
    EXPECT_EQ(types[h], "histogram") << h;
  }
  for (const char* g : {"ll3_requests_running", "ll3_requests_waiting", "ll3_kv_cache_usage_ratio"}) EXPECT_EQ(types[g], "gauge") << g;
  EXPECT_NE(out.find("ll3_requests_total{status=\"429\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("ll3_time_to_first_token_seconds_bucket{le=\"0.005\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("ll3_time_to_first_token_seconds_bucket{le=\"80\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("ll3_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("ll3_time_to_first_token_seconds_count 3\n"), std::string::npos);
  EXPECT_NE(out.find("ll3_time_to_first_token_seconds_sum 100.006"), std::string::npos);
  EXPECT_NE(out.find("ll3_batch_tokens_bucket{le=\"1\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("ll3_batch_tokens_bucket{le=\"8\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("ll3_batch_tokens_count 3\n"), std::string::npos);
  EXPECT_NE(out.find("ll3_kv_cache_usage_ratio 0.5\n"), std::string::npos);
  // While loading: every family still there, at zero.
  std::string loading = m.render(nullptr, ServerGauges{});
  EXPECT_NE(loading.find("ll3_requests_running 0\n"), std::string::npos);
  EXPECT_NE(loading.find("ll3_model_loaded 0\n"), std::string::npos);
}

// The argument deltas of every call, concatenated by index, as a client assembles them.
static std::map<int, std::pair<std::string, std::string>> assemble_calls(const std::vector<json>& e, std::string* finish) {
  std::map<int, std::pair<std::string, std::string>> calls;
  for (const json& ev : e) {
    if (!ev.contains("choices") || ev["choices"].empty()) continue;
    const json& ch = ev["choices"][0];
    if (!ch["finish_reason"].is_null()) *finish = ch["finish_reason"];
    if (!ch["delta"].contains("tool_calls")) continue;
    for (const json& tc : ch["delta"]["tool_calls"]) {
      auto& [name, args] = calls[tc["index"].get<int>()];
      if (tc["function"].contains("name")) name += tc["function"]["name"].get<std::string>();
      args += tc["function"]["arguments"].get<std::string>();
    }
  }
  return calls;
}

TEST(OpenAiOutput, ToolCallDeltasAddUpToTheCallsWhateverThePieces) {
  ResponseHeader h = chat_header();
  ChoiceConfig c = streamed_tools({"get_weather", "get_time"});
  const std::string text =
      "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Par is\", \"days\": [1, 2], \"q\": \"a\\\"}\"}};"
      " {\"parameters\": {\"zone\": \"UTC\"}, \"name\": \"get_time\"}";
  const std::vector<ToolCall> want = parse_tool_calls(text, c.tool_names);
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(want[0].arguments, "{\"city\":\"Par is\",\"days\":[1,2],\"q\":\"a\\\"}\"}");
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    ChoiceOutput s(&h, c, piece_of);
    std::string sse = s.start();
    size_t i = 0;
    for (int32_t id = 0; i < text.size(); ++id) {
      const size_t n = 1 + rng() % 6;
      const std::string piece = text.substr(i, n);
      i += piece.size();
      sse += s.token(ev(id, piece, piece));
    }
    sse += s.finish(fin(FinishReason::kStop));
    std::string finish;
    auto calls = assemble_calls(events(sse), &finish);
    EXPECT_EQ(finish, "tool_calls");
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[0].first, "get_weather");
    EXPECT_EQ(calls[0].second, want[0].arguments);
    EXPECT_EQ(calls[1].first, "get_time");
    EXPECT_EQ(calls[1].second, want[1].arguments);
  }
}

TEST(OpenAiOutput, UnofferedFunctionStreamsNothingAndEndsAsContent) {
  ResponseHeader h = chat_header();
  ChoiceConfig c = streamed_tools({"get_weather"});
  ChoiceOutput s(&h, c, piece_of);
  s.start();
  EXPECT_TRUE(s.token(ev(0, "x", "{\"name\": \"rm_rf\", ")).empty());
  EXPECT_TRUE(s.token(ev(1, "x", "\"parameters\": {}}")).empty());
  std::vector<json> e = events(s.finish(fin(FinishReason::kStop)));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0]["choices"][0]["delta"]["content"], "{\"name\": \"rm_rf\", \"parameters\": {}}");
  EXPECT_EQ(e[0]["choices"][0]["finish_reason"], "stop");
}

TEST(OpenAiOutput, CallCutOffAfterItsHeaderStillEndsAsToolCalls) {
  ResponseHeader h = chat_header();
  ChoiceConfig c = streamed_tools({"get_weather"});
  ChoiceOutput s(&h, c, piece_of);
  s.start();
  std::string sse = s.token(ev(0, "x", "{\"name\": \"get_weather\", \"parameters\": {\"ci"));
  sse += s.finish(fin(FinishReason::kLength));
  std::string finish;
  auto calls = assemble_calls(events(sse), &finish);
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].second, "{\"ci");
}

TEST(ToolCalls, MinifyIsPrefixStable) {
  const std::string text = "{ \"a\" : [ 1 , \"x y\\\" \\\\\" ] ,\n\t\"b\": { \"c\" : null } }";
  const std::string whole = minify_json(text);
  EXPECT_EQ(whole, "{\"a\":[1,\"x y\\\" \\\\\"],\"b\":{\"c\":null}}");
  for (size_t n = 0; n <= text.size(); ++n) {
    const std::string part = minify_json(text.substr(0, n));
    EXPECT_EQ(whole.compare(0, part.size(), part), 0) << n;
  }
}

TEST(OpenAiOutput, ScoredEchoListsThePromptsLogprobsAndStreamsThemFirst) {
  ResponseHeader h;
  h.endpoint = Endpoint::kCompletions;
  h.id = "cmpl-1";
  ChoiceConfig c;
  c.logprobs = true;
  c.top_logprobs = 1;
  c.echo_text = "ab";
  c.echo_tokens = {0, 1};
  c.echo_scored = true;
  // Scores of prompt tokens 1 and 2.
  std::vector<PromptTokenLogprob> lps(2);
  lps[0] = {0, -1.5f, {{5, -0.25f}}};
  lps[1] = {1, -2.5f, {{1, -2.5f}}};
  for (int first : {1, 0}) {  // an added <|begin_of_text|> not echoed / token ids echoed whole
    c.echo_first = first;
    c.stream = false;
    ChoiceOutput o(&h, c, piece_of);
    EXPECT_EQ(o.prompt(lps), "");
    o.finish(fin(FinishReason::kLength));
    const json lp = o.choice()["logprobs"];
    EXPECT_EQ(lp["tokens"], json::array({"a", "b"}));
    if (first == 1) {
      EXPECT_FLOAT_EQ(lp["token_logprobs"][0].get<float>(), -1.5f);
      EXPECT_FLOAT_EQ(lp["top_logprobs"][0]["x"].get<float>(), -0.25f);
      EXPECT_FLOAT_EQ(lp["token_logprobs"][1].get<float>(), -2.5f);
    } else {
      EXPECT_TRUE(lp["token_logprobs"][0].is_null());
      EXPECT_TRUE(lp["top_logprobs"][0].is_null());
      EXPECT_FLOAT_EQ(lp["token_logprobs"][1].get<float>(), -1.5f);
    }
    EXPECT_EQ(lp["text_offset"], json::array({0, 1}));
  }
  c.echo_first = 1;
  c.stream = true;
  ChoiceOutput s(&h, c, piece_of);
  EXPECT_EQ(s.start(), "") << "the echo waits for its scores";
  std::vector<json> e = events(s.prompt(lps) + s.token(ev(5, "x", "x")));
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0]["choices"][0]["text"], "ab");
  EXPECT_FLOAT_EQ(e[0]["choices"][0]["logprobs"]["token_logprobs"][1].get<float>(), -2.5f);
  EXPECT_EQ(e[1]["choices"][0]["text"], "x");
}

}  // namespace
}  // namespace ll3::server
