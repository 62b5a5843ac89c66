#include "core/log.h"

#include <cstdio>
#include <mutex>

namespace ll3 {

namespace {

std::mutex& callback_mutex() {
  static std::mutex mu;
  return mu;
}

LogCallback& callback() {
  static LogCallback cb;
  return cb;
}

}  // namespace

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "info";
}

void set_log_callback(LogCallback cb) {
  std::lock_guard<std::mutex> lk(callback_mutex());
  callback() = std::move(cb);
}

void log_message(LogLevel level, const std::string& message) {
  LogCallback cb;
  {
    std::lock_guard<std::mutex> lk(callback_mutex());
    cb = callback();
  }
  // Called outside the lock, so that a callback may log or replace itself.
  if (cb) {
    cb(level, message);
  } else {
    std::fprintf(stderr, "ll3: %s\n", message.c_str());
  }
}

}  // namespace ll3
