// Recoverable errors as values. A Status carries a message that says what went wrong and where;
// Result<T> is a value or a Status. Library code never exits or throws for bad input.
#pragma once

#include <cstdarg>
#include <string>
#include <utility>
#include <variant>

namespace ll3 {

// printf into a std::string (libstdc++ 12 has no std::format).
std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vstrprintf(const char* fmt, va_list args);

// What kind of failure, for frontends that map errors to protocol codes (HTTP 400, 429, ...).
enum class StatusCode {
  kOk,
  kError,         // anything else (bad file, internal)
  kInvalid,       // the caller's input is malformed or out of range
  kTooLong,       // a request that can never fit the context or the KV pool
  kUnavailable,   // temporarily: the queue is full, the engine is shutting down
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  static Status error(std::string message, StatusCode code = StatusCode::kError) {
    return Status(std::move(message), code);
  }
  static Status errorf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }
  StatusCode code() const { return failed_ ? code_ : StatusCode::kOk; }

  // Prefix the message with context: "gguf: " + message.
  Status with_context(const std::string& prefix) const {
    return ok() ? *this : Status(prefix + message_, code_);
  }

 private:
  Status(std::string message, StatusCode code) : failed_(true), code_(code), message_(std::move(message)) {}
  bool failed_ = false;
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status ok_status() { return Status(); }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: must be an error

  bool ok() const { return v_.index() == 0; }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& value() const& { return std::get<0>(v_); }
  T& operator*() & { return value(); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  Status status() const { return ok() ? Status() : std::get<1>(v_); }
  const std::string& message() const {
    static const std::string empty;
    return ok() ? empty : std::get<1>(v_).message();
  }

 private:
  std::variant<T, Status> v_;
};

}  // namespace ll3

// Return early from a function returning Status or Result<T> when `expr` (a Status) failed.
#define LL3_RETURN_IF_ERROR(expr)          \
  do {                                     \
    ::ll3::Status ll3_status_ = (expr);    \
    if (!ll3_status_.ok()) return ll3_status_; \
  } while (0)
