// Validated environment variables (see env.h).
#include "common/util/env.h"

#include <cerrno>
#include <cstdlib>

#include "common/error.h"

namespace pshard {

const char* process_getenv(const char* name) { return std::getenv(name); }

int64_t parse_env_count(const char* name, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || errno != 0 || *end != '\0' || v < 0 || value.find_first_of(" \t+-") != std::string::npos) {
    throw Error(std::string("environment variable ") + name + " must be a non-negative integer, got '" + value + "'");
  }
  return v;
}

std::optional<int64_t> env_count(const char* name, const Getenv& getenv) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return parse_env_count(name, v);
}

}  // namespace pshard
