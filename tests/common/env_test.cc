// Environment variables are validated, never silently turned into 0.
#include "common/util/env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "common/error.h"

namespace {

pshard::Getenv from(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    pshard::env_count("PSHARD_RANK", from(vars));
  } catch (const pshard::Error& e) {
    return e.what();
  }
  return "";
}

TEST(EnvCount, UnsetOrEmptyIsNothing) {
  EXPECT_FALSE(pshard::env_count("PSHARD_RANK", from({})).has_value());
  EXPECT_FALSE(pshard::env_count("PSHARD_RANK", from({{"PSHARD_RANK", ""}})).has_value());
}

TEST(EnvCount, ReadsNonNegativeIntegers) {
  EXPECT_EQ(pshard::env_count("PSHARD_RANK", from({{"PSHARD_RANK", "0"}})), 0);
  EXPECT_EQ(pshard::env_count("PSHARD_RANK", from({{"PSHARD_RANK", "17"}})), 17);
}

TEST(EnvCount, RefusesAnythingElseNamingTheVariable) {
  EXPECT_EQ(error_of({{"PSHARD_RANK", "abc"}}),
            "environment variable PSHARD_RANK must be a non-negative integer, got 'abc'");
  for (const char* bad : {"-1", "1x", " 1", "+1", "1.5", "99999999999999999999999"}) {
    EXPECT_NE(error_of({{"PSHARD_RANK", bad}}).find(std::string("got '") + bad + "'"), std::string::npos) << bad;
  }
}

}  // namespace
