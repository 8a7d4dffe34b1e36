// Measured phase times of real runs (docs/METRICS.md): every worker's phases add up to its epoch
// and step times, a simulated compute of 20 ms per step shows up as 20 ms of forward + backward,
// servers account for their threads' time, and `pshard report` reads it all back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics/metrics_reader.h"
#include "common/metrics/phases.h"
#include "report/report.h"
#include "tests/support/run_helpers.h"

namespace {

using namespace pshard;
using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::run_with_timeout;
using pshard::testing::source_dir;

std::vector<Json> events(const std::string& run_dir, const std::string& kind) {
  std::vector<Json> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    Json j = Json::parse(line, run_dir);
    if (j.at("event").as_string() == kind) out.push_back(j);
  }
  return out;
}

double field(const Json& j, const char* key) { return j.at(key).as_number(); }

// The five phases of an event (an epoch's worker entry or a step line) and their sum.
double phase_sum(const Json& j) { return WorkerPhaseSeconds::from_fields(j, "test").total(); }

TEST(PhaseTimes, SimulatedComputeIsForwardPlusBackwardAndPhasesAddUp) {
  const std::string dir = fresh_dir("phases-sim");
  const std::string run = dir + "/run";
  // 2 workers x batch 64, 40 steps of 20 ms simulated compute through 1 server.
  const int rc =
      run_with_timeout(pshard_bin() + " launch --servers 1 --workers 2 --timeout 240 --config " + source_dir() +
                           "/configs/fmnist_mlp.toml --set data.train_size=5120 --set data.test_size=256"
                           " --set train.epochs=1 --set train.eval=false --set train.batch_size=64"
                           " --set train.log_every=5 --set train.simulate_compute_ms=20"
                           " --set cluster.mode=sync --run-dir " +
                           run,
                       270, dir + "/launch.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/launch.log");

  double load = 0;
  ASSERT_EQ(getloadavg(&load, 1), 1);
  const double cores = static_cast<double>(std::max(1u, std::thread::hardware_concurrency()));
  const bool overloaded = load > cores;
  const std::vector<Json> epochs = events(run, "epoch");
  ASSERT_EQ(epochs.size(), 1u);
  const double steps = field(epochs[0], "step");
  ASSERT_EQ(steps, 40);
  // Nothing computed a training loss or accuracy: null in the event, "-" in the epoch line (not "0.0000 acc 0.00%").
  EXPECT_TRUE(epochs[0].has("train_loss") && epochs[0].at("train_loss").is_null()) << epochs[0].dump();
  EXPECT_TRUE(epochs[0].has("train_acc") && epochs[0].at("train_acc").is_null()) << epochs[0].dump();
  EXPECT_NE(read_file(dir + "/launch.log").find("train loss - acc -"), std::string::npos)
      << read_file(dir + "/launch.log");
  const Json& workers = epochs[0].at("workers");
  ASSERT_EQ(workers.size(), 2u);
  for (const Json& w : workers.elements()) {
    const double epoch_s = field(w, "epoch_s");
    SCOPED_TRACE("worker " + w.at("rank").dump() + ": " + w.dump());
    EXPECT_NEAR(phase_sum(w), epoch_s, 0.01 * epoch_s);
    // All of the simulated compute counts as forward + backward, and nothing else does. A sleep never
    // ends early; it ends late by the scheduler's wake-up delay, which an overloaded machine (more
    // runnable threads than cores: other jobs, this job's 4 processes on 2 cores) stretches far beyond
    // 1 ms (10 ms per step seen at 7 runnable threads per core): there only the lower bound and the sums
    // below are checked strictly.
    const double compute_ms = (field(w, "forward_s") + field(w, "backward_s")) / steps * 1e3;
    EXPECT_GE(compute_ms, 20.0 - 0.01);
    EXPECT_LE(compute_ms, overloaded ? 20.0 * (1 + load / cores) : 21.0) << "load average " << load;
    // forward : backward = 1 : 2 in a simulated step (each sleep's late wake-up blurs it under overload)
    if (!overloaded) {
      EXPECT_NEAR(field(w, "backward_s") / field(w, "forward_s"), 2.0, 0.2);
    }
    EXPECT_GT(field(w, "backward_s"), field(w, "forward_s"));
    // Data and the rest are small next to 20 ms (a starved prefetch thread makes data_s grow under overload).
    EXPECT_LT((field(w, "data_s") + field(w, "other_s")) / steps * 1e3, overloaded ? 0.25 * 20 : 2.0);
  }
  // The job's line: the mean over workers.
  EXPECT_NEAR(field(epochs[0], "forward_s"),
              (field(workers.elements()[0], "forward_s") + field(workers.elements()[1], "forward_s")) / 2, 1e-6);

  // Step lines of both workers (steps 0, 5, ..., 35), each adding up to its step time.
  const std::vector<Json> step_lines = events(run, "step");
  int per_rank[2] = {0, 0};
  for (const Json& s : step_lines) {
    const int64_t rank = s.at("rank").as_int();
    ASSERT_TRUE(rank == 0 || rank == 1) << s.dump();
    ++per_rank[rank];
    const double step_s = field(s, "step_s");
    EXPECT_NEAR(phase_sum(s), step_s, 0.01 * step_s) << s.dump();
    EXPECT_GE(step_s, 0.020) << s.dump();  // at least the simulated compute
  }
  EXPECT_EQ(per_rank[0], 8);
  EXPECT_EQ(per_rank[1], 8);

  // The server accounted for all of its threads' time.
  const Json summary = pshard::testing::read_summary(run);
  ASSERT_TRUE(summary.has("server_phases")) << summary.dump();
  ASSERT_EQ(summary.at("server_phases").size(), 1u);
  const Json& server = summary.at("server_phases").elements()[0];
  const double capacity = field(server, "threads") * field(server, "wall_s");
  EXPECT_NEAR(ServerPhaseSeconds::from_fields(server, "test").total(), capacity, 0.01 * capacity) << server.dump();
  EXPECT_GT(field(server, "update_s"), 0) << server.dump();
  EXPECT_GT(field(server, "recv_s"), 0) << server.dump();
  EXPECT_GT(field(server, "idle_s"), field(server, "update_s")) << server.dump();  // 20 ms of sleep per step

  // pshard report reads the real run back: measured phases per step and a step-time row per worker.
  report::ReportOptions o;
  o.out_dir = dir + "/report";
  o.python = "/nonexistent-python";  // tables only: the plots have tests of their own
  const report::ReportResult r = report::write_report({run}, o);
  ASSERT_EQ(r.step_times.size(), 2u);
  for (const report::StepTimeRow& row : r.step_times) {
    EXPECT_EQ(row.samples, 8u);
    EXPECT_GE(row.p99_s, row.p50_s);
    EXPECT_GE(row.p50_s, 0.020);
  }
  const std::string md = read_file(r.report_md);
  EXPECT_NE(md.find("## Where the time goes"), std::string::npos) << md;
  EXPECT_NE(md.find("| update |"), std::string::npos) << md;
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(PhaseTimes, LocalTrainingMeasuresRealForwardAndBackward) {
  const std::string dir = fresh_dir("phases-local");
  const std::string run = dir + "/run";
  const int rc = run_with_timeout(pshard_bin() + " train --config " + source_dir() +
                                      "/configs/fmnist_mlp.toml --set data.train_size=2048 --set data.test_size=256"
                                      " --set train.epochs=1 --set train.batch_size=64 --set train.log_every=4"
                                      " --set train.threads=1 --run-dir " +
                                      run,
                                  120, dir + "/train.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/train.log");
  const std::vector<Json> epochs = events(run, "epoch");
  ASSERT_EQ(epochs.size(), 1u);
  const Json& e = epochs[0];
  const double epoch_s = field(e, "epoch_s");
  EXPECT_NEAR(phase_sum(e), epoch_s, 0.01 * epoch_s) << e.dump();
  EXPECT_EQ(field(e, "comm_wait_s"), 0) << e.dump();  // nothing to wait for in-process
  EXPECT_GT(field(e, "forward_s"), 0) << e.dump();
  EXPECT_GT(field(e, "backward_s"), 0) << e.dump();
  // (Which phase dominates depends on the machine: with 64-sample MLP steps of well under a
  // millisecond, the first batch and a loaded machine's prefetch thread can make data_s the largest.)
  const RunMetrics back = read_run(run);
  ASSERT_EQ(back.steps.size(), 8u);  // steps 0, 4, ..., 28 of 32
  for (const StepRecord& s : back.steps) {
    ASSERT_TRUE(s.step_s && s.phases);
    EXPECT_NEAR(s.phases->total(), *s.step_s, 0.01 * *s.step_s);
  }
  ASSERT_TRUE(back.summary && back.summary->phases);
  EXPECT_NEAR(back.summary->phases->total(), epoch_s, 0.01 * epoch_s);
  pshard::testing::remove_dir_if_passed(dir);
}

}  // namespace
