// How config errors are worded, shared by the loader (config.cc) and the job rules (job_shape.cc).
#pragma once

#include <string>

namespace pshard {

// Throws Error("config ORIGIN: key 'KEY': WHY").
[[noreturn]] void config_fail(const std::string& origin, const std::string& key, const std::string& why);
// A double as the messages and config.toml write it: shortest text that reads back exactly (17 digits at most).
std::string config_double_text(double v);

}  // namespace pshard
