// Trace windows and one process's trace file: spans land on the coordinator's clock.
#include "common/metrics/trace.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/util/json.h"
#include "tests/support/report_fixtures.h"

namespace pshard {
namespace {

std::string error_of(const std::string& text) {
  try {
    TraceWindow::parse(text, "trace.steps");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TraceWindow, ParsesFirstDashLastAndRefusesAnythingElse) {
  TraceWindow w = TraceWindow::parse("100-120", "trace.steps");
  EXPECT_EQ(w.first, 100);
  EXPECT_EQ(w.last, 120);
  EXPECT_TRUE(w.contains(100));
  EXPECT_TRUE(w.contains(120));
  EXPECT_FALSE(w.contains(99));
  EXPECT_FALSE(w.contains(121));
  EXPECT_TRUE(TraceWindow::parse("", "trace.steps").empty());
  EXPECT_FALSE(TraceWindow::parse("", "trace.steps").contains(0));
  EXPECT_TRUE(TraceWindow::parse("7-7", "trace.steps").contains(7));
  for (const char* bad : {"5", "5-", "-5", "a-b", "9-3", "1-2-3", " 1-2", "1e3-2e3", "99999999999999999-1"}) {
    const std::string e = error_of(bad);
    EXPECT_NE(e.find("trace.steps: '" + std::string(bad) + "' is not a window of steps"), std::string::npos)
        << bad << ": " << e;
  }
}

TEST(Tracer, WritesSpansOnTheCoordinatorsClock) {
  pshard::testing::TempDir tmp;
  Tracer t(TraceWindow::parse("2-3", "trace.steps"), "worker 1");
  Tracer::name_this_thread(&t, 4, "training");
  const Tracer::Clock::time_point t0(std::chrono::microseconds(1000000));
  const TraceName forward = t.name("forward fc1");
  EXPECT_EQ(t.name("forward fc1").id, forward.id);  // kept once
  t.span(forward, "layer", t0, t0 + std::chrono::microseconds(250),
         TraceArgs().set("step", 2).set("lr", 0.125).set("type", "push").set("tensor", t.name("fc1.weight")));
  t.span(t.name("push_pull fc1.weight"), "comm", t0, t0 + std::chrono::microseconds(10), TraceArgs(), 7);
  t.span(t.name("step"), "step", t0, t0 + std::chrono::microseconds(5),
         TraceArgs().set("keys", std::vector<TraceName>{t.name("a[slice 0]"), t.name("b \"q\"")}), 7, 12);
  Tracer::name_this_thread(nullptr, 0, "");
  ClockOffset offset;
  offset.offset_ns = -400000;  // the coordinator's clock is 400 us behind
  offset.rtt_ns = 60000;
  offset.samples = 3;
  const std::string path = tmp.path() + "/trace/worker-1.json";
  t.write(path, offset);
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  const Json doc = Json::parse(buf.str(), path);
  EXPECT_EQ(doc.at("pshard_process").as_string(), "worker 1");
  EXPECT_EQ(doc.at("trace_steps").as_string(), "2-3");
  EXPECT_DOUBLE_EQ(doc.at("clock_offset_us").as_number(), -400);
  EXPECT_DOUBLE_EQ(doc.at("clock_rtt_us").as_number(), 60);
  const std::vector<Json>& events = doc.at("traceEvents").elements();
  ASSERT_EQ(events.size(), 4u);  // the thread's name, three spans
  EXPECT_EQ(events[0].at("ph").as_string(), "M");
  EXPECT_EQ(events[0].at("args").at("name").as_string(), "training");
  EXPECT_EQ(events[1].at("name").as_string(), "forward fc1");
  EXPECT_EQ(events[1].at("tid").as_int(), 4);  // the naming thread's row
  EXPECT_DOUBLE_EQ(events[1].at("ts").as_number(), 1000000 - 400);
  EXPECT_DOUBLE_EQ(events[1].at("dur").as_number(), 250);
  EXPECT_EQ(events[1].at("args").at("step").as_int(), 2);
  EXPECT_DOUBLE_EQ(events[1].at("args").at("lr").as_number(), 0.125);
  EXPECT_EQ(events[1].at("args").at("type").as_string(), "push");
  EXPECT_EQ(events[1].at("args").at("tensor").as_string(), "fc1.weight");
  EXPECT_EQ(events[2].at("name").as_string(), "push_pull fc1.weight");
  EXPECT_EQ(events[2].at("tid").as_int(), 7);  // an explicit row
  EXPECT_FALSE(events[2].has("args"));
  EXPECT_EQ(events[3].at("name").as_string(), "step 12");  // a name followed by a number
  const std::vector<Json>& keys = events[3].at("args").at("keys").elements();
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0].as_string(), "a[slice 0]");
  EXPECT_EQ(keys[1].as_string(), "b \"q\"");  // names are escaped
}

TEST(TraceArgs, MoreArgumentsThanItHoldsIsAnError) {
  TraceArgs a;
  for (int i = 0; i < TraceArgs::kMax; ++i) a.set("k", i);
  EXPECT_THROW(a.set("one too many", 1), Error);
}

}  // namespace
}  // namespace pshard
