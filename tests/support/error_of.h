// The message of the pshard::Error a call throws: what the tests of bad input compare with the text they expect.
#pragma once

#include <string>

#include "common/error.h"

namespace pshard::testing {

// The message of the pshard::Error `fn` throws, or "" when it throws none.
//
//   EXPECT_NE(error_of([&] { parse_hosts("a:x"); }).find("must be a number"), std::string::npos);
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace pshard::testing
