// Status and Result as the public API has them: a Result never holds an OK status, value() on
// an error stops with the error's message, an invalid input names its field, and the log goes
// to the process-wide callback (or stderr).
#include "core/status.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/log.h"

namespace ll3 {
namespace {

Result<int> half(int x) {
  if (x % 2 != 0) return Status::invalid("x must be even, got " + std::to_string(x), "x");
  return x / 2;
}

TEST(Status, InvalidNamesItsFieldAndKeepsItWithContext) {
  Status st = Status::invalid("too big", "max_tokens", StatusCode::kTooLong);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kTooLong);
  EXPECT_EQ(st.field(), "max_tokens");
  Status wrapped = st.with_context("request 3: ");
  EXPECT_EQ(wrapped.message(), "request 3: too big");
  EXPECT_EQ(wrapped.field(), "max_tokens");
  EXPECT_EQ(Status::error("x").field(), "");
}

TEST(Result, HoldsAValueOrAnError) {
  Result<int> a = half(8);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value(), 4);
  Result<int> b = half(3);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().field(), "x");
  EXPECT_EQ(b.message(), "x must be even, got 3");
}

TEST(Result, AnOkStatusBecomesAnErrorThatSaysSo) {
  Result<int> r = Status();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("OK status"), std::string::npos) << r.message();
  EXPECT_EQ(r.status().code(), StatusCode::kError);
}

TEST(ResultDeathTest, ValueOfAnErrorStopsWithItsMessage) {
  Result<int> r = half(5);
  EXPECT_DEATH((void)r.value(), "Result::value\\(\\) called on an error: x must be even, got 5");
  EXPECT_DEATH((void)*r, "x must be even");
}

TEST(Log, GoesToTheProcessCallbackElseStderr) {
  std::vector<std::string> got;
  set_log_callback([&](LogLevel level, const std::string& msg) { got.push_back(std::string(log_level_name(level)) + ": " + msg); });
  testing::internal::CaptureStderr();
  log_message(LogLevel::kWarning, "disk full");
  Logger own([&](LogLevel, const std::string& msg) { got.push_back("own: " + msg); });
  own.warn("mine");
  Logger shared;
  shared.info("theirs");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(got, (std::vector<std::string>{"warning: disk full", "own: mine", "info: theirs"}));
  set_log_callback({});
  testing::internal::CaptureStderr();
  log_message(LogLevel::kInfo, "back to stderr");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "ll3: back to stderr\n");
}

}  // namespace
}  // namespace ll3
