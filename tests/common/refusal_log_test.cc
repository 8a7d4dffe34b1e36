// RefusalLog: a flood of refusals from a few peers becomes a few lines, each peer named, with counts.
#include "common/transport/refusal_log.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include "common/util/log.h"

namespace pshard {
namespace {

size_t count_lines(const std::string& text, const std::string& needle) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

TEST(RefusalLog, AFloodIsOneLinePerPeerAndKindThenOneSummaryPerInterval) {
  log::configure("test", log::Level::kInfo);
  transport::RefusalLog refusals("server 0", std::chrono::milliseconds(200));
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 10000; ++i) {
    refusals.add("10.0.0.7", "badHeader", "refused a message from 10.0.0.7: badHeader");
    refusals.add("10.0.0.8", "badToken", "refused a message from 10.0.0.8: badToken");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  refusals.flush();
  refusals.flush();  // nothing new: no line
  const std::string out = ::testing::internal::GetCapturedStderr();

  EXPECT_EQ(refusals.refusals(), 20000u);
  EXPECT_EQ(refusals.lines(), 4u) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 4) << out;
  EXPECT_EQ(count_lines(out, "server 0: refused a message from 10.0.0.7: badHeader"), 1u) << out;
  EXPECT_EQ(count_lines(out, "server 0: refused 9999 more from 10.0.0.7 (badHeader) in the last"), 1u) << out;
  EXPECT_EQ(count_lines(out, "server 0: refused 9999 more from 10.0.0.8 (badToken) in the last"), 1u) << out;
}

TEST(RefusalLog, APeerQuietForAnIntervalIsLoggedInFullAgain) {
  log::configure("test", log::Level::kInfo);
  transport::RefusalLog refusals("coordinator", std::chrono::milliseconds(100));
  ::testing::internal::CaptureStderr();
  refusals.add("10.0.0.7", "malformed", "malformed control message from 10.0.0.7");
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  refusals.add("10.0.0.7", "malformed", "malformed control message from 10.0.0.7");
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_lines(out, "coordinator: malformed control message from 10.0.0.7"), 2u) << out;
  EXPECT_EQ(count_lines(out, "more from"), 0u) << out;
}

TEST(RefusalLog, ManyPeersShareOneEntryBeyondTheTrackedLimit) {
  log::configure("test", log::Level::kInfo);
  transport::RefusalLog refusals("server 0");
  ::testing::internal::CaptureStderr();
  for (size_t i = 0; i < transport::RefusalLog::kMaxTracked + 500; ++i) {
    refusals.add("peer " + std::to_string(i), "badHeader", "refused");
  }
  (void)::testing::internal::GetCapturedStderr();
  EXPECT_EQ(refusals.lines(), transport::RefusalLog::kMaxTracked + 1);  // the last 499 are counted, not logged
}

}  // namespace
}  // namespace pshard
