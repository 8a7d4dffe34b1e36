// The timeline of a real 2 x 2 job (trace.steps): every process writes its trace, `pshard report`
// merges them into one trace.json that reads back with one row per process, and the clocks agree:
// a push's receive on its server comes after the worker handed it over and before the worker
// had the reply.
#include "report/timeline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "report/report.h"
#include "tests/support/run_helpers.h"

namespace {

using namespace pshard;
using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::run_with_timeout;
using pshard::testing::source_dir;

TEST(Timeline, TwoByTwoJobMergesIntoOneConsistentTrace) {
  const std::string dir = fresh_dir("timeline");
  const std::string run = dir + "/run";
  // The tests' three-layer profile (tests/models/profiles/three_layers.json) at batch 16: a 67.5 ms step whose last
  // layer's gradients go out 25 ms before its end, so the servers' work of a step lies inside it by far more than
  // the clock offsets' error on a loaded machine (a sub-millisecond MLP step would not). 192 samples / (2 x 16) = 6
  // steps; steps 3..5 traced.
  const int rc =
      run_with_timeout(pshard_bin() + " launch --servers 2 --workers 2 --timeout 240 --trace 3-5 --config " +
                           source_dir() + "/configs/profile_resnet50_sync.toml --set model.profile=" + source_dir() +
                           "/tests/models/profiles/three_layers.json --set data.classes=10"
                           " --set data.train_size=192 --set data.test_size=16 --set train.batch_size=16"
                           " --set train.log_every=1 --run-dir " +
                           run,
                       270, dir + "/launch.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/launch.log");
  ASSERT_TRUE(report::has_trace(run));

  report::ReportOptions o;
  o.out_dir = dir + "/report";
  o.python = "/nonexistent-python";  // tables only
  const report::ReportResult r = report::write_report({run}, o);
  ASSERT_EQ(r.timelines.size(), 1u);
  const report::Timeline t = report::read_timeline(r.timelines[0]);  // the merged file parses as JSON

  // One row per process, in order, each with events.
  std::vector<std::string> names;
  for (const report::TraceProcess& p : t.processes) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"coordinator", "server 0", "server 1", "worker 0", "worker 1"}));
  std::map<int, int> spans;
  for (const report::TraceEvent& e : t.events) {
    if (e.ph == "X") ++spans[e.pid];
  }
  for (const report::TraceProcess& p : t.processes) EXPECT_GT(spans[p.pid], 0) << p.name;

  // Same machine: the true offset is 0 (one monotonic clock), so each estimate must be within its
  // error bound, half the round trip.
  for (const report::TraceProcess& p : t.processes) {
    if (p.name == "coordinator") continue;
    ASSERT_TRUE(p.clock_rtt_us) << p.name << " has no clock offset estimate";
    EXPECT_LE(std::fabs(p.clock_offset_us), *p.clock_rtt_us / 2 + 1) << p.name;
  }

  // Workers: the traced steps, their phases and layers; nothing outside the window.
  std::set<std::string> worker_names;
  for (const report::TraceEvent& e : t.events) {
    if (e.ph != "X" || e.pid < 4) continue;
    worker_names.insert(e.name);
    if (e.args.is_object() && e.args.has("step")) {
      const int64_t step = e.args.at("step").as_int();
      EXPECT_TRUE(step >= 3 && step <= 5) << e.name << " of step " << step;
    }
  }
  for (const char* n :
       {"step 3", "step 4", "step 5", "data", "forward", "backward", "comm_wait", "push_pull fc1.weight"}) {
    EXPECT_TRUE(worker_names.count(n)) << n;
  }

  // Every traced push_pull: its server's receive of the same tensor, worker and step lies between
  // the worker's hand-off and the end of its wait for the reply, up to the clock offsets' stated
  // error (half the round trip of each side's best heartbeat echo, well under the 20 ms allowed).
  std::map<int, double> error_us;
  for (const report::TraceProcess& p : t.processes) {
    error_us[p.pid] = p.clock_rtt_us ? *p.clock_rtt_us / 2 : 0.0;
    EXPECT_LT(error_us[p.pid], 20000) << p.name;
  }
  int matched = 0;
  for (const report::TraceEvent& push : t.events) {
    if (push.cat != "comm") continue;
    const std::string tensor = push.args.at("tensor").as_string();
    const int64_t worker = push.args.at("worker").as_int(), step = push.args.at("step").as_int();
    for (const report::TraceEvent& recv : t.events) {
      if (recv.name != "receive" || recv.args.at("worker").as_int() != worker ||
          recv.args.at("step").as_int() != step) {
        continue;
      }
      bool same_tensor = false;
      for (const Json& k : recv.args.at("keys").elements()) {
        same_tensor = same_tensor || k.as_string().rfind(tensor + "[", 0) == 0;
      }
      if (!same_tensor) continue;
      ++matched;
      const double slack = error_us[push.pid] + error_us[recv.pid];
      EXPECT_GE(recv.ts + slack, push.ts) << tensor << " step " << step << " worker " << worker;
      EXPECT_LE(recv.ts, push.ts + push.dur + slack) << tensor << " step " << step << " worker " << worker;
    }
  }
  EXPECT_GE(matched, 2 * 3 * 6) << "2 workers x 3 steps x 6 tensors";

  // Servers: receive, aggregate and update per slice, reply.
  std::set<std::string> server_kinds;
  for (const report::TraceEvent& e : t.events) {
    if (e.ph == "X" && (e.pid == 2 || e.pid == 3)) server_kinds.insert(e.name.substr(0, e.name.find(' ')));
  }
  EXPECT_EQ(server_kinds, (std::set<std::string>{"aggregate", "receive", "reply", "update"}));

  // The picture's table: the middle traced step (4), spans of the servers and workers, clipped to it.
  const std::string step_csv = read_file(o.out_dir + "/timeline_step.csv");
  EXPECT_EQ(step_csv.rfind("lane,name,what,start_ms,dur_ms\n", 0), 0u) << step_csv;
  for (const char* lane : {"\nworker 0 / steps,step 4,step,", "\nworker 1 / steps,step 4,step,"}) {
    EXPECT_NE(step_csv.find(lane), std::string::npos) << lane << " in\n" << step_csv;
  }
  // Both servers receive gradients of step 4 well inside it.
  for (const char* lane : {"\n\"server 0 / ", "\n\"server 1 / "}) {
    EXPECT_NE(step_csv.find(lane), std::string::npos) << lane << " in\n" << step_csv;
  }
  EXPECT_EQ(step_csv.find(",-"), std::string::npos) << "nothing starts before the step or has a negative length";

  const std::string md = read_file(r.report_md);
  EXPECT_NE(md.find("### Timeline"), std::string::npos) << md;
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(Timeline, BadWindowIsRefusedBeforeAnyProcessStarts) {
  const std::string dir = fresh_dir("timeline-bad");
  const int rc = run_with_timeout(pshard_bin() + " launch --servers 1 --workers 1 --trace 9-3 --config " +
                                      source_dir() + "/configs/fmnist_mlp.toml --run-dir " + dir + "/run",
                                  60, dir + "/launch.log");
  EXPECT_NE(rc, 0);
  const std::string log = read_file(dir + "/launch.log");
  EXPECT_NE(log.find("key 'trace.steps': '9-3' is not a window of steps"), std::string::npos) << log;
  pshard::testing::remove_dir_if_passed(dir);
}

}  // namespace
