// Where ll3's library code sends what it has to say: which device an engine runs on, a session
// file it could not read or write, a weight type a GPU kernel does not read. By default each
// message is one line on stderr ("ll3: <message>"); a program that embeds ll3 routes or silences
// them with a callback, for the whole process or for one engine (EngineOptions::log).
#pragma once

#include <functional>
#include <string>

namespace ll3 {

enum class LogLevel { kInfo, kWarning, kError };
const char* log_level_name(LogLevel level);  // "info", "warning", "error"

// Called on whichever thread has the message (often the engine's): keep it short and thread-safe.
using LogCallback = std::function<void(LogLevel level, const std::string& message)>;

// Replaces the process-wide callback; an empty one restores the default (stderr). Thread-safe.
void set_log_callback(LogCallback callback);

}  // namespace ll3
