// ll3 bench-serve against the test servers: 256 concurrent streaming clients end with no error,
// no lost, duplicated or changed token; the report has its columns; non-loopback targets are
// refused. And the flags around the server: --alias, LL3_API_KEY, idle and slow-header timeouts.
#include <gtest/gtest.h>

// clang-format off: <utility> first, Boost 1.74's asio/awaitable.hpp uses std::exchange without it (GCC 12)
#include <utility>
#include <boost/asio.hpp>
// clang-format on
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "server_harness.h"
#include "test_support.h"

namespace ll3::test {
namespace {

TEST(BenchServe, ManyStreamingClientsLoseNothing) {
  LL3_REQUIRE_SHARED();
  ASSERT_NE(main_server(), nullptr);
  CommandResult r = run_command(ll3_binary() + " bench-serve --url " + main_server()->url() +
                                    " --api-key test-key --clients 1,256 --requests 1 --max-tokens 4 --prompt-tokens 16 --prompts 4 --json",
                                true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  int runs = 0;
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    ++runs;
    EXPECT_EQ(j["requests"], j["clients"]) << line;
    EXPECT_EQ(j["errors"], 0) << line;
    EXPECT_EQ(j["lost_tokens"], 0) << line;
    EXPECT_EQ(j["duplicated_tokens"], 0) << line;
    EXPECT_EQ(j["mismatched_streams"], 0) << line;
    EXPECT_EQ(j["tokens"], 4 * j["clients"].get<int>()) << line;
    EXPECT_GT(j["ttft_p50_ms"].get<double>(), 0) << line;
    EXPECT_GE(j["itl_p99_ms"].get<double>(), j["itl_p50_ms"].get<double>()) << line;
  }
  EXPECT_EQ(runs, 2) << r.output;
  // The table, and its refusal to load anything but loopback.
  r = run_command(ll3_binary() + " bench-serve --url " + main_server()->url() + " --api-key test-key --clients 2 --requests 1 --max-tokens 2 --no-check", true);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ttft_p50"), std::string::npos) << r.output;
  r = run_command(ll3_binary() + " bench-serve --url http://10.1.2.3:8080", true);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("loopback"), std::string::npos) << r.output;
}

// The fairness scenario against a real server: gaps before and during a long prefill, and the
// long prompt's time to first token beside the streams and alone, all measured.
TEST(BenchServe, FairnessMeasuresGapsBeforeAndDuringAPrefill) {
  LL3_REQUIRE_SHARED();
  ASSERT_NE(main_server(), nullptr);
  const std::string base = ll3_binary() + " bench-serve --url " + main_server()->url() + " --api-key test-key --fairness";
  CommandResult r = run_command(base + " --fair-streams 2 --fair-prompt 600 --fair-baseline 4 --prompt-tokens 8 --duration 120 --json", true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json j;
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    json x = json::parse(line, nullptr, false);
    if (!x.is_discarded() && x.is_object()) j = x;
  }
  ASSERT_TRUE(j.is_object()) << r.output;
  EXPECT_EQ(j["streams"], 2);
  EXPECT_GT(j["intervals_before"].get<int64_t>(), 0) << r.output;
  EXPECT_GT(j["intervals_during"].get<int64_t>(), 0) << r.output;
  EXPECT_GT(j["itl_before_p50_ms"].get<double>(), 0);
  EXPECT_GE(j["itl_during_p99_ms"].get<double>(), j["itl_during_p50_ms"].get<double>());
  EXPECT_GT(j["ttft_s"].get<double>(), 0);
  EXPECT_GT(j["ttft_idle_s"].get<double>(), 0);
  EXPECT_NEAR(j["ttft_over_idle"].get<double>(), j["ttft_s"].get<double>() / j["ttft_idle_s"].get<double>(), 1e-9);
  // A long prompt the server's sequences cannot hold is refused before anything is sent.
  r = run_command(base + " --fair-prompt 100000", true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--fair-prompt"), std::string::npos) << r.output;
}

TEST(ServeFlags, AliasKeyFromEnvironmentAndTimeouts) {
  LL3_REQUIRE_SHARED();
  setenv("LL3_API_KEY", "env-key", 1);
  ServeProcess srv({"-m", small_model_path(), "-t", "1", "--ctx", "1024", "--alias", "my-model", "--timeout", "1", "--no-access-log"});
  unsetenv("LL3_API_KEY");
  ASSERT_TRUE(srv.ok()) << srv.log();
  HttpClient c(srv.port());
  EXPECT_EQ(c.request("GET", "/v1/models").status, 401);
  c.set_key("env-key");
  Reply m = c.request("GET", "/v1/models");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.body_json()["data"][0]["id"], "my-model");
  Reply r = post(c, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body_json()["model"], "my-model");
  // An idle kept-alive connection and a request whose headers never end are both closed.
  namespace net = boost::asio;
  net::io_context ioc;
  for (const std::string& partial : {std::string(), std::string("GET /health HTTP/1.1\r\nHost: x\r\n")}) {
    net::ip::tcp::socket s(ioc);
    s.connect({net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(srv.port())});
    if (!partial.empty()) net::write(s, net::buffer(partial));
    timeval tv{10, 0};
    setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const auto t0 = std::chrono::steady_clock::now();
    char buf[64];
    boost::system::error_code ec;
    s.read_some(net::buffer(buf), ec);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(ec, net::error::eof) << ec.message();
    EXPECT_GT(waited, 0.5);
    EXPECT_LT(waited, 5);
  }
}

}  // namespace
}  // namespace ll3::test
