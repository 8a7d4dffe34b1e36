// Scaling, bandwidth bounds, labels and batch rows computed from fixture runs with known numbers.
#include <gtest/gtest.h>

#include <cmath>

#include "report/phase_tables.h"
#include "report/tables.h"
#include "tests/support/report_fixtures.h"

namespace pshard::report {
namespace {

using testing::TempDir;

std::vector<RunMetrics> read_all(const std::vector<std::string>& dirs) {
  std::vector<RunMetrics> runs;
  for (const std::string& d : dirs) runs.push_back(read_run(d));
  return runs;
}

TEST(ReportScaling, SpeedupEfficiencyAndTimePerStepFromEpochLines) {
  TempDir tmp;
  std::vector<RunMetrics> runs = read_all(testing::write_scaling_fixture(tmp.path()));
  std::vector<ScalingGroup> groups = scaling_groups(runs);
  ASSERT_EQ(groups.size(), 1u);
  const std::vector<ScalingRow>& r = groups[0].rows;
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].workers, 1);
  EXPECT_EQ(r[1].workers, 2);
  EXPECT_EQ(r[2].workers, 4);
  EXPECT_EQ(r[2].servers, 2);
  EXPECT_EQ(r[0].steps, 200);
  EXPECT_EQ(r[2].steps, 50);

  EXPECT_DOUBLE_EQ(r[0].epoch_s, 10.0);
  EXPECT_DOUBLE_EQ(r[1].epoch_s, 5.0);  // (6 + 4) / 2
  EXPECT_DOUBLE_EQ(r[2].epoch_s, 4.0);
  EXPECT_DOUBLE_EQ(r[0].speedup, 1.0);
  EXPECT_DOUBLE_EQ(r[1].speedup, 2.0);
  EXPECT_DOUBLE_EQ(r[2].speedup, 2.5);
  EXPECT_DOUBLE_EQ(r[0].efficiency, 1.0);
  EXPECT_DOUBLE_EQ(r[1].efficiency, 1.0);
  EXPECT_DOUBLE_EQ(r[2].efficiency, 0.625);

  // W=4: 8 s over 50 steps = 0.16 s/step, split as measured: 0.5 s data, 1 forward, 3 backward, 3 comm,
  // 0.5 other over the two epochs.
  EXPECT_DOUBLE_EQ(r[2].step_s, 0.16);
  EXPECT_DOUBLE_EQ(r[2].phases_per_step[WorkerPhase::kData], 0.01);
  EXPECT_DOUBLE_EQ(r[2].phases_per_step[WorkerPhase::kForward], 0.02);
  EXPECT_DOUBLE_EQ(r[2].phases_per_step[WorkerPhase::kBackward], 0.06);
  EXPECT_DOUBLE_EQ(r[2].phases_per_step[WorkerPhase::kCommWait], 0.06);
  EXPECT_DOUBLE_EQ(r[2].phases_per_step[WorkerPhase::kOther], 0.01);
  EXPECT_NEAR(r[2].phases_per_step.total(), r[2].step_s, 1e-15);
  EXPECT_DOUBLE_EQ(r[0].phases_per_step[WorkerPhase::kBackward], 0.05);  // 10 s / 200 steps
  EXPECT_DOUBLE_EQ(r[0].phases_per_step[WorkerPhase::kCommWait], 0.0);
  EXPECT_DOUBLE_EQ(r[1].samples_per_s, 640.0);  // summary: 6400 / 10
}

TEST(ReportScaling, TrafficAgainstParameterServerAndRingBounds) {
  TempDir tmp;
  std::vector<RunMetrics> runs = read_all(testing::write_scaling_fixture(tmp.path()));
  std::vector<ScalingGroup> groups = scaling_groups(runs);
  ASSERT_FALSE(groups.empty());
  const std::vector<ScalingRow>& r = groups[0].rows;
  for (const ScalingRow& row : r) EXPECT_DOUBLE_EQ(row.model_bytes, 1e6);

  // Parameter-server bound: 2 x model x W bytes per step (all workers).
  EXPECT_DOUBLE_EQ(r[0].ps_bound_bytes_per_step, 2e6);
  EXPECT_DOUBLE_EQ(r[1].ps_bound_bytes_per_step, 4e6);
  EXPECT_DOUBLE_EQ(r[2].ps_bound_bytes_per_step, 8e6);
  // Measured: (2e8 sent + 2e8 received) / steps.
  EXPECT_DOUBLE_EQ(r[0].traffic_bytes_per_step, 2e6);  // 4e8 / 200
  EXPECT_DOUBLE_EQ(r[1].traffic_bytes_per_step, 4e6);  // 4e8 / 100
  EXPECT_DOUBLE_EQ(r[2].traffic_bytes_per_step, 8e6);  // 4e8 / 50
  // Against the same payloads as float32 (8e8 per run): what compression saved.
  EXPECT_DOUBLE_EQ(r[0].fp32_traffic_bytes_per_step, 4e6);
  EXPECT_DOUBLE_EQ(r[2].fp32_traffic_bytes_per_step, 16e6);
  for (const ScalingRow& row : r) EXPECT_DOUBLE_EQ(row.traffic_vs_fp32, 0.5);
  // The busiest host's bytes per step, from the summary (one push per host: about 2 x model); NaN for runs recorded
  // without hosts.
  EXPECT_DOUBLE_EQ(r[2].host_network_bytes_per_step, 2.1e6);
  EXPECT_DOUBLE_EQ(r[2].host_shm_bytes_per_step, 6e6);
  EXPECT_TRUE(std::isnan(r[0].host_network_bytes_per_step));
  // Ring all-reduce: 2 (W-1)/W x model per worker per step.
  EXPECT_DOUBLE_EQ(r[0].ring_bytes_per_worker_step, 0.0);
  EXPECT_DOUBLE_EQ(r[1].ring_bytes_per_worker_step, 1e6);
  EXPECT_DOUBLE_EQ(r[2].ring_bytes_per_worker_step, 1.5e6);
  EXPECT_DOUBLE_EQ(r[2].sent_bytes_per_worker_step, 1e6);  // 2e8 / 4 / 50
  // Bandwidth: 4e8 bytes over the training seconds.
  EXPECT_DOUBLE_EQ(r[0].bandwidth_bytes_per_s, 2e7);  // / 20 s
  EXPECT_DOUBLE_EQ(r[1].bandwidth_bytes_per_s, 4e7);  // / 10 s
  EXPECT_DOUBLE_EQ(r[2].bandwidth_bytes_per_s, 5e7);  // / 8 s
  EXPECT_DOUBLE_EQ(r[2].bandwidth_per_worker_bytes_per_s, 1.25e7);
}

TEST(ReportScaling, BaselineIsTheFewestWorkersWhenThereIsNoSingleWorkerRun) {
  TempDir tmp;
  std::vector<std::string> dirs = testing::write_scaling_fixture(tmp.path());
  std::vector<RunMetrics> runs = read_all({dirs[2], dirs[1]});  // W=4, W=2, given out of order
  std::vector<ScalingGroup> groups = scaling_groups(runs);
  ASSERT_FALSE(groups.empty());
  const std::vector<ScalingRow>& r = groups[0].rows;
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].workers, 2);
  EXPECT_EQ(r[0].run, 1u);
  EXPECT_DOUBLE_EQ(r[1].speedup, 1.25);      // 5 / 4
  EXPECT_DOUBLE_EQ(r[1].efficiency, 0.625);  // 1.25 x 2 / 4
}

TEST(ReportScaling, RunsWithoutFloat32VolumesHaveNoCompressionRatio) {
  TempDir tmp;
  std::vector<std::string> dirs;
  for (int w : {1, 2}) {
    std::string dir = tmp.path() + "/old" + std::to_string(w);
    testing::write_text(dir + "/config.toml", testing::fixture_config("old" + std::to_string(w)));
    testing::write_text(dir + "/metrics.jsonl", testing::scaling_metrics(w, /*compressed=*/false));
    dirs.push_back(dir);
  }
  std::vector<ScalingGroup> groups = scaling_groups(read_all(dirs));
  ASSERT_EQ(groups.size(), 1u);
  for (const ScalingRow& row : groups[0].rows) {
    EXPECT_DOUBLE_EQ(row.traffic_bytes_per_step, 4e8 / static_cast<double>(row.steps));
    EXPECT_TRUE(std::isnan(row.fp32_traffic_bytes_per_step));
    EXPECT_TRUE(std::isnan(row.traffic_vs_fp32));
  }
}

TEST(ReportScaling, RunsWithDifferentConfigsFormSeparateGroups) {
  TempDir tmp;
  std::vector<std::string> dirs = testing::write_scaling_fixture(tmp.path());
  // A second study at another learning rate, W = 1 and 2.
  for (int w : {1, 2}) {
    std::string dir = tmp.path() + "/lr" + std::to_string(w);
    testing::write_text(dir + "/config.toml",
                        testing::fixture_config("lr" + std::to_string(w)) + "\n[cluster]\nmode = \"async\"\n");
    testing::write_text(dir + "/metrics.jsonl", testing::scaling_metrics(w));
    dirs.push_back(dir);
  }
  std::vector<RunMetrics> runs = read_all(dirs);
  std::vector<ScalingGroup> groups = scaling_groups(runs);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].rows.size(), 3u);
  EXPECT_EQ(groups[1].rows.size(), 2u);
  EXPECT_EQ(groups[0].title, "cluster.mode=(unset)");
  EXPECT_EQ(groups[1].title, "cluster.mode=async");
}

TEST(ReportLabels, NameWhatDiffersBetweenConfigs) {
  TempDir tmp;
  std::vector<std::string> dirs;
  for (const char* lr : {"0.1", "0.01"}) {
    std::string dir = tmp.path() + "/lr-" + lr;
    std::string config = "[run]\nname = \"x" + std::string(lr) + "\"\n[optimizer]\nname = \"sgd\"\nlr = " + lr + "\n";
    testing::write_text(dir + "/config.toml", config);
    testing::write_text(dir + "/metrics.jsonl", testing::scaling_metrics(1));
    dirs.push_back(dir);
  }
  std::vector<RunMetrics> runs = read_all(dirs);
  EXPECT_EQ(differing_keys(runs), std::vector<std::string>{"optimizer.lr"});
  EXPECT_EQ(run_labels(runs), (std::vector<std::string>{"optimizer.lr=0.1", "optimizer.lr=0.01"}));
  EXPECT_TRUE(scaling_groups(runs).empty());  // one worker count only
}

TEST(ReportLabels, WorkerCountsAndIdenticalConfigs) {
  TempDir tmp;
  std::vector<RunMetrics> runs = read_all(testing::write_scaling_fixture(tmp.path()));
  EXPECT_EQ(run_labels(runs), (std::vector<std::string>{"W=1", "W=2", "W=4"}));
  std::vector<RunMetrics> same = {runs[0], runs[0]};
  same[1].name = "again";
  EXPECT_EQ(run_labels(same), (std::vector<std::string>{"w1", "again"}));
}

TEST(ReportBatch, RowsSortedByWorkersThenGlobalBatch) {
  TempDir tmp;
  std::vector<RunMetrics> runs = read_all(testing::write_scaling_fixture(tmp.path()));
  std::vector<BatchRow> rows = batch_rows(runs);  // global batch 32, 64, 128
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].global_batch, 128);
  EXPECT_EQ(rows[2].batch_size, 32);
  EXPECT_DOUBLE_EQ(rows[2].samples_per_s, 800.0);  // 6400 / 8
  EXPECT_DOUBLE_EQ(rows[2].step_s, 0.16);
  EXPECT_DOUBLE_EQ(rows[0].test_acc, 0.85);  // last epoch: 0.45 + 0.2 x 2
  EXPECT_TRUE(batch_rows({runs[0]}).empty());
}

// Nearest-rank percentiles: the smallest value with at least p % of the values at or below it.
TEST(StepTimes, NearestRankPercentiles) {
  std::vector<double> v = {5, 1, 4, 2, 3};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 3);
  EXPECT_DOUBLE_EQ(percentile(v, 99), 5);
  EXPECT_DOUBLE_EQ(percentile(v, 20), 1);
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);
  EXPECT_DOUBLE_EQ(percentile(hundred, 99), 99);
  EXPECT_DOUBLE_EQ(percentile(hundred, 50), 50);
  std::vector<double> none;
  EXPECT_TRUE(std::isnan(percentile(none, 50)));
}

// Every worker's step lines give it a row: worker 1 of W=2 is 5 ms slower at every step.
TEST(StepTimes, PerWorkerDistributionFromStepLines) {
  TempDir tmp;
  std::vector<RunMetrics> runs = read_all(testing::write_scaling_fixture(tmp.path()));
  std::vector<StepTimeRow> rows = step_time_rows(runs);
  ASSERT_EQ(rows.size(), 7u);  // 1 + 2 + 4 workers
  const StepTimeRow& w0 = rows[1];
  const StepTimeRow& w1 = rows[2];
  ASSERT_EQ(w0.run, 1u);
  ASSERT_EQ(w0.rank, 0u);
  ASSERT_EQ(w1.rank, 1u);
  // W=2: logged steps 0, 10, ..., 90: step % 7 = 0 3 6 2 5 1 4 0 3 6 -> 10..16 ms.
  EXPECT_EQ(w0.samples, 10u);
  EXPECT_NEAR(w0.p50_s, 0.013, 1e-9);  // sorted: 10 10 11 12 13 13 14 15 16 16; 5th value
  EXPECT_NEAR(w0.p99_s, 0.016, 1e-9);
  EXPECT_NEAR(w0.max_s, 0.016, 1e-9);
  EXPECT_NEAR(w1.p50_s, 0.018, 1e-9);
  EXPECT_NEAR(w1.mean_s - w0.mean_s, 0.005, 1e-9);
  EXPECT_NEAR(w0.mean_phases.total(), w0.mean_s, 1e-9);
  EXPECT_NEAR(w0.mean_phases[WorkerPhase::kBackward], 0.4 * w0.mean_s, 1e-9);
}

// The servers' phases from the summary, as shares of their threads' time.
TEST(ServerPhases, SummaryEntriesBecomeATableOfShares) {
  TempDir tmp;
  std::vector<RunMetrics> runs = read_all(testing::write_scaling_fixture(tmp.path()));
  ASSERT_TRUE(runs[1].summary);
  ASSERT_EQ(runs[1].summary->servers_phases.size(), 2u);
  EXPECT_EQ(runs[1].summary->servers_phases[1].rank, 1u);
  EXPECT_DOUBLE_EQ(runs[1].summary->servers_phases[1].phases[ServerPhase::kRecv], 2);
  std::string md = server_phases_markdown(runs, run_labels(runs));
  // server 0: 30 thread-seconds; update 3 s = 10 %, idle 22 s = 73.3 %.
  EXPECT_NE(md.find("| 0 | 3 | 10 | 3.3% | 6.7% | 10.0% | 3.3% | 73.3% | 3.3% |"), std::string::npos) << md;
  EXPECT_EQ(server_phases_markdown({runs[0]}, {"w1"}), "");
}

}  // namespace
}  // namespace pshard::report
