// Recoverable errors as values. A Status carries a message that says what went wrong and where;
// Result<T> is a value or a Status. Library code never exits or throws for bad input.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
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
  kNotFound,      // a named thing (a LoRA adapter) is not there
  kConflict,      // the thing is in a state that refuses it: an adapter in use cannot be unloaded
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  static Status error(std::string message, StatusCode code = StatusCode::kError) {
    return Status(std::move(message), code);
  }
  static Status errorf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
  // The caller's input is wrong, and `field` names what (a Request member, a flag), so that a
  // frontend can point at it in its own terms without reading the message.
  static Status invalid(std::string message, std::string field, StatusCode code = StatusCode::kInvalid) {
    Status st(std::move(message), code);
    st.field_ = std::move(field);
    return st;
  }

  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }
  StatusCode code() const { return failed_ ? code_ : StatusCode::kOk; }
  // The input field at fault (Status::invalid), else empty.
  const std::string& field() const { return field_; }

  // Prefix the message with context: "gguf: " + message.
  Status with_context(const std::string& prefix) const {
    if (ok()) return *this;
    Status st(prefix + message_, code_);
    st.field_ = field_;
    return st;
  }

 private:
  Status(std::string message, StatusCode code) : failed_(true), code_(code), message_(std::move(message)) {}
  bool failed_ = false;
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string field_;
};

inline Status ok_status() { return Status(); }

// A value, or the Status that says why there is none. It never holds an OK status: one passed
// in by mistake becomes an error that says so. value() on an error is a bug in the caller and
// stops the program with the error's message (check ok() first).
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status)  // NOLINT: implicit by design; must be an error
      : v_(status.ok() ? Status::error("internal error: a Result was made from an OK status") : std::move(status)) {}

  bool ok() const { return v_.index() == 0; }
  T& value() & { return checked(); }
  T&& value() && { return std::move(checked()); }
  const T& value() const& { return const_cast<Result*>(this)->checked(); }
  T& operator*() & { return value(); }
  T* operator->() { return &checked(); }
  const T* operator->() const { return &value(); }
  Status status() const { return ok() ? Status() : std::get<1>(v_); }
  const std::string& message() const {
    static const std::string empty;
    return ok() ? empty : std::get<1>(v_).message();
  }

 private:
  T& checked() {
    if (!ok()) {
      std::fprintf(stderr, "ll3: Result::value() called on an error: %s\n", std::get<1>(v_).message().c_str());
      std::abort();
    }
    return std::get<0>(v_);
  }
  std::variant<T, Status> v_;
};

}  // namespace ll3

// Return early from a function returning Status or Result<T> when `expr` (a Status) failed.
#define LL3_RETURN_IF_ERROR(expr)          \
  do {                                     \
    ::ll3::Status ll3_status_ = (expr);    \
    if (!ll3_status_.ok()) return ll3_status_; \
  } while (0)
