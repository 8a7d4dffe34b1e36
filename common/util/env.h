// Reading the process environment with validation: a malformed value is an error naming the variable.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace pshard {

// How a variable is looked up: std::getenv in production, a map in tests.
using Getenv = std::function<const char*(const char*)>;
// std::getenv as a Getenv.
const char* process_getenv(const char* name);

// The non-negative integer in `value`, read from the variable `name`; Error
// "environment variable NAME must be a non-negative integer, got 'VALUE'" otherwise.
int64_t parse_env_count(const char* name, const std::string& value);

// The non-negative integer in variable `name`, nullopt when it is unset or
// empty; an Error naming the variable when it is set to anything else.
//
//   std::optional<int64_t> rank = env_count("PSHARD_RANK");  // PSHARD_RANK=abc throws
std::optional<int64_t> env_count(const char* name, const Getenv& getenv = process_getenv);

}  // namespace pshard
