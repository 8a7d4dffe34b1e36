// Line-oriented logging to stderr, each line prefixed with the process role.
#pragma once

#include <sstream>
#include <string>

namespace pshard::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Sets the prefix of every line (e.g. "server 1") and the minimum level.
// Call once at process start; lines are written whole (one write per line).
void configure(const std::string& role, Level min_level);
Level level_from_string(const std::string& name);  // debug|info|warn|error
bool enabled(Level level);
void write(Level level, const std::string& line);

}  // namespace pshard::log

// Usage: PSHARD_LOG(kWarn) << "bad message from " << peer << ": " << why;
#define PSHARD_LOG(level)                                                                                           \
  for (bool pshard_once_ = ::pshard::log::enabled(::pshard::log::Level::level); pshard_once_; pshard_once_ = false) \
  ::pshard::log::LineStream(::pshard::log::Level::level).stream()

namespace pshard::log {
// Collects one line and writes it on destruction.
class LineStream {
 public:
  explicit LineStream(Level level) : level_(level) {}
  ~LineStream() { write(level_, out_.str()); }
  std::ostringstream& stream() { return out_; }

 private:
  Level level_;
  std::ostringstream out_;
};
}  // namespace pshard::log
