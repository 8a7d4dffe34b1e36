// Implementation of the stderr line logger.
#include "common/util/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

#include "common/error.h"

namespace pshard::log {
namespace {

struct LoggerState {
  std::mutex mu;
  std::string role = "pshard";
  std::atomic<int> min_level{static_cast<int>(Level::kInfo)};
};

LoggerState& state() {
  static LoggerState s;
  return s;
}

const char* level_name(Level level) {
  switch (level) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
  }
  return "?";
}

}  // namespace

void configure(const std::string& role, Level min_level) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().role = role;
  state().min_level = static_cast<int>(min_level);
}

Level level_from_string(const std::string& name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warn") return Level::kWarn;
  if (name == "error") return Level::kError;
  throw Error("unknown log level '" + name + "' (expected debug, info, warn or error)");
}

bool enabled(Level level) { return static_cast<int>(level) >= state().min_level.load(); }

void write(Level level, const std::string& line) {
  std::string role;
  {
    std::lock_guard<std::mutex> lock(state().mu);
    role = state().role;
  }
  std::string out = "[" + role + "] " + level_name(level) + ": " + line + "\n";
  // One write() per line so lines of concurrent threads never interleave.
  ssize_t ignored = ::write(STDERR_FILENO, out.data(), out.size());
  (void)ignored;
}

}  // namespace pshard::log
