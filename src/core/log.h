// The library side of include/ll3/log.h: a Logger sends a message to its own callback when it
// has one (an engine's EngineOptions::log), else to the process-wide one.
#pragma once

#include <string>

#include "ll3/log.h"

namespace ll3 {

// The process-wide callback (set_log_callback), else stderr.
void log_message(LogLevel level, const std::string& message);

class Logger {
 public:
  Logger() = default;
  explicit Logger(LogCallback own) : own_(std::move(own)) {}
  void operator()(LogLevel level, const std::string& message) const {
    if (own_) {
      own_(level, message);
    } else {
      log_message(level, message);
    }
  }
  void info(const std::string& message) const { (*this)(LogLevel::kInfo, message); }
  void warn(const std::string& message) const { (*this)(LogLevel::kWarning, message); }

 private:
  LogCallback own_;
};

}  // namespace ll3
