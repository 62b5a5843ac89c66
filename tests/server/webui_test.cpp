// The chat page at / (src/server/webui.cpp, webui/): served without a key, the same bytes as the
// committed webui/dist/index.html, with an ETag (304), gzip when asked, a Content-Security-Policy,
// 405 for other methods and 404 with --no-webui; and the page itself in a real browser
// (tests/server/js/webui_test.mjs: playwright-core driving Debian's chromium).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "server_harness.h"
#include "test_support.h"

namespace ll3::test {
namespace {

#define REQUIRE_SERVER() \
  LL3_REQUIRE_SHARED();  \
  ASSERT_NE(main_server(), nullptr) << "ll3 serve did not start"

std::string header(const Reply& r, const std::string& name) {
  auto it = r.headers.find(name);
  return it == r.headers.end() ? "" : it->second;
}

TEST(WebUiHttp, ServesTheCommittedPageWithoutAKey) {
  REQUIRE_SERVER();
  HttpClient c(main_server()->port());  // no key: the page is public, like llama-server's
  const std::string want = read_file(source_dir() + "/webui/dist/index.html");
  ASSERT_FALSE(want.empty());
  for (const char* path : {"/", "/index.html"}) {
    Reply r = c.request("GET", path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(header(r, "content-type"), "text/html; charset=utf-8");
    EXPECT_EQ(header(r, "cache-control"), "no-cache");
    EXPECT_EQ(header(r, "content-encoding"), "");
    EXPECT_NE(r.body.find("<meta name=\"generator\" content=\"ll3-webui\">"), std::string::npos);
    EXPECT_TRUE(r.body == want)
        << "the binary's page differs from webui/dist/index.html (rebuild ll3)";
    const std::string csp = header(r, "content-security-policy");
    EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << csp;
    EXPECT_NE(csp.find("script-src 'sha256-"), std::string::npos) << csp;
    EXPECT_NE(csp.find("style-src 'sha256-"), std::string::npos) << csp;
    EXPECT_NE(csp.find("connect-src 'self'"), std::string::npos) << csp;
    EXPECT_EQ(csp.find("unsafe"), std::string::npos) << csp;
    EXPECT_EQ(header(r, "x-content-type-options"), "nosniff");
  }
  // The API itself still wants the key.
  EXPECT_EQ(c.request("GET", "/v1/models").status, 401);
}

TEST(WebUiHttp, ETagAndGzip) {
  REQUIRE_SERVER();
  HttpClient c(main_server()->port());
  Reply r = c.request("GET", "/");
  const std::string etag = header(r, "etag");
  ASSERT_GE(etag.size(), 3u);
  EXPECT_EQ(etag.front(), '"');
  Reply again = c.request("GET", "/", "", {{"If-None-Match", etag}});
  EXPECT_EQ(again.status, 304);
  EXPECT_TRUE(again.body.empty());
  EXPECT_EQ(header(again, "etag"), etag);
  EXPECT_EQ(c.request("GET", "/", "", {{"If-None-Match", "\"other\", W/" + etag}}).status, 304);
  EXPECT_EQ(c.request("GET", "/", "", {{"If-None-Match", "\"stale\""}}).status, 200);

  Reply gz = c.request("GET", "/", "", {{"Accept-Encoding", "br, gzip;q=0.8"}});
  EXPECT_EQ(gz.status, 200);
  EXPECT_EQ(header(gz, "content-encoding"), "gzip");
  EXPECT_NE(header(gz, "vary").find("Accept-Encoding"), std::string::npos);
  ASSERT_GE(gz.body.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz.body[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz.body[1]), 0x8b);
  EXPECT_LT(gz.body.size(), r.body.size() / 2);
  EXPECT_NE(header(gz, "etag"), etag);  // another representation, another tag
  EXPECT_EQ(c.request("GET", "/", "",
                      {{"Accept-Encoding", "gzip"}, {"If-None-Match", header(gz, "etag")}})
                .status,
            304);
  EXPECT_EQ(header(c.request("GET", "/", "", {{"Accept-Encoding", "gzip;q=0, identity"}}),
                   "content-encoding"),
            "");

  // What a browser gets when it unpacks it: the page.
  const std::string dir = temp_dir();
  write_file(dir + "/page.gz", gz.body);
  CommandResult un = run_command("gzip -dc " + dir + "/page.gz");
  EXPECT_EQ(un.exit_code, 0);
  EXPECT_TRUE(un.output == r.body);
}

TEST(WebUiHttp, OnlyGet) {
  REQUIRE_SERVER();
  HttpClient c(main_server()->port());
  for (const char* m : {"POST", "PUT", "DELETE"}) {
    Reply r = c.request(m, "/", "{}", {{"Content-Type", "application/json"}});
    EXPECT_EQ(r.status, 405) << m;
    EXPECT_EQ(header(r, "allow"), "GET");
    json j = r.body_json();
    ASSERT_TRUE(j.contains("error")) << r.body;
    EXPECT_EQ(j["error"]["code"], "method_not_allowed");
  }
  // Other paths are the API's, as before.
  EXPECT_EQ(c.request("GET", "/index.htm").status, 404);
  EXPECT_EQ(c.request("GET", "/app.js").status, 404);
}

TEST(WebUiHttp, NoWebUiFlag) {
  LL3_REQUIRE_SHARED();
  // The page needs no model, so there is no need to wait for it to load.
  ServeProcess off(
      {"-m", small_model_path(), "-t", "1", "--ctx", "256", "--no-webui", "--no-access-log"},
      false);
  ASSERT_TRUE(off.ok()) << off.log();
  HttpClient c(off.port());
  for (const char* path : {"/", "/index.html"}) {
    Reply r = c.request("GET", path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(r.body_json()["error"]["code"], "not_found") << r.body;
  }
  ServeProcess on({"-m", small_model_path(), "-t", "1", "--ctx", "256", "--no-access-log"}, false);
  ASSERT_TRUE(on.ok()) << on.log();
  HttpClient c2(on.port());
  EXPECT_EQ(c2.request("GET", "/").status, 200);  // also while the model loads
}

// webui/dist/index.html is what webui/build.mjs makes from webui/src (the build is
// deterministic), so a change to the sources without a rebuild is caught. Needs webui's packages
// (webui/build.sh installs them), which building and serving do not: skipped without them.
TEST(WebUiBuild, DistIsCurrent) {
  const std::string dir = source_dir() + "/webui";
  if (run_command("command -v node").exit_code != 0 ||
      !std::filesystem::exists(dir + "/node_modules/esbuild/package.json")) {
    if (in_ci()) FAIL() << "node or webui/node_modules is missing (scripts/setup.sh --tests runs npm ci in webui)";
    GTEST_SKIP() << "node or webui/node_modules is missing; run webui/build.sh";
  }
  const std::string out = temp_dir() + "/index.html";
  CommandResult res = run_command("node " + dir + "/build.mjs " + out, true);
  ASSERT_EQ(res.exit_code, 0) << res.output;
  EXPECT_TRUE(read_file(out) == read_file(dir + "/dist/index.html"))
      << "webui/dist/index.html is not the build of webui/src: run webui/build.sh and commit "
         "webui/dist";
}

// Where the screenshots go: $LL3_ARTIFACT_DIR, else test-artifacts/webui beside the ll3 binary
// (the build directory), where they outlive the test's temporary directory.
std::string artifact_dir() {
  const char* env = std::getenv("LL3_ARTIFACT_DIR");
  if (env != nullptr && *env != '\0') return std::string(env) + "/webui";
  return (std::filesystem::path(ll3_binary()).parent_path() / "test-artifacts" / "webui").string();
}

// Debian's chromium (or $LL3_CHROMIUM) when it and playwright-core are there; "" otherwise.
std::string browser() {
  const char* env = std::getenv("LL3_CHROMIUM");
  const std::string chromium = env != nullptr && *env != '\0' ? env : "/usr/bin/chromium";
  const std::string js = source_dir() + "/tests/server/js";
  if (run_command("command -v node").exit_code != 0 || !std::filesystem::exists(js + "/node_modules/playwright-core/package.json") ||
      !std::filesystem::exists(chromium)) {
    return "";
  }
  return chromium;
}

#define REQUIRE_BROWSER(chromium)                                                                            \
  const std::string chromium = browser();                                                                    \
  if (chromium.empty()) {                                                                                    \
    if (in_ci()) FAIL() << "node, playwright-core or chromium is missing (scripts/setup.sh installs them)"; \
    GTEST_SKIP() << "node, tests/server/js/node_modules (npm ci) or chromium is missing";                    \
  }

TEST(WebUiBrowser, ChatInChromium) {
  REQUIRE_SERVER();
  REQUIRE_BROWSER(chromium);
  const std::string out = artifact_dir();
  CommandResult res = run_command("LL3_CHROMIUM=" + chromium + " node " + source_dir() + "/tests/server/js/webui_test.mjs " +
                                      main_server()->url() + " " + kKey + " " + out,
                                  true, 420);
  std::printf("%s", res.output.c_str());
  EXPECT_EQ(res.exit_code, 0) << res.output;
  EXPECT_EQ(res.output.find("FAIL"), std::string::npos) << res.output;
  EXPECT_NE(
      res.output.find("ok   an answer streams (its text grows) and stop keeps the partial answer"),
      std::string::npos)
      << res.output;
  EXPECT_TRUE(std::filesystem::exists(out + "/webui.png"));
}

// The page on the shared trained model, whose context is 256 tokens (its own, no --ctx): it
// keeps to the context (tests/server/js/webui_context_test.mjs says how).
TEST(WebUiBrowser, ShortContextModel) {
  LL3_REQUIRE_SHARED();
  REQUIRE_BROWSER(chromium);
  ServeProcess srv({"-m", shared_dir() + "/models/trained-llama3-4l-f16.gguf", "-t", "2", "--no-access-log"});
  ASSERT_TRUE(srv.ok()) << srv.log();
  const std::string out = artifact_dir();
  CommandResult res = run_command(
      "LL3_CHROMIUM=" + chromium + " node " + source_dir() + "/tests/server/js/webui_context_test.mjs " + srv.url() + " " + out, true,
      400);
  std::printf("%s", res.output.c_str());
  EXPECT_EQ(res.exit_code, 0) << res.output;
  EXPECT_EQ(res.output.find("FAIL"), std::string::npos) << res.output;
  for (const char* check : {"ok   an answer that fills the context says so", "ok   a message that no longer fits is not sent",
                            "ok   leaving out the oldest turns answers the message", "ok   a max_tokens larger than the context"}) {
    EXPECT_NE(res.output.find(check), std::string::npos) << check;
  }
}

}  // namespace
}  // namespace ll3::test
