// Dynamic batch assignment (cluster.batch_assignment = dynamic): an async job's workers claim each epoch's batches as
// they go. With a worker three times slower, the fast one trains most of every epoch, every batch is trained once
// (the epoch's samples are all its batches'), and the job ends well; with static shards each trains half.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/util/json.h"
#include "tests/support/run_helpers.h"

namespace {

using namespace pshard;
using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::run_with_timeout;
using pshard::testing::source_dir;

// 3840 samples in batches of 64: 60 batches an epoch. Sleeps of 20 ms stand in for each step's compute; worker 1
// sleeps 60 ms.
const std::string kJob = " launch --servers 2 --workers 2 --timeout 240 --config " + source_dir() +
                         "/configs/fmnist_mlp_sync.toml --set data.train_size=3840 --set data.test_size=256"
                         " --set train.epochs=2 --set train.eval=false --set train.threads=1 --set train.batch_size=64"
                         " --set train.simulate_compute_ms=20 --set train.straggler_rank=1"
                         " --set train.straggler_factor=3 --set cluster.mode=async";

// Each epoch's samples trained by each worker, from RUN_DIR/metrics.jsonl's epoch events; [0] holds the epoch's own.
std::vector<std::map<int, double>> samples_by_epoch(const std::string& run_dir) {
  std::vector<std::map<int, double>> out;
  std::istringstream lines(read_file(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const Json j = Json::parse(line, "metrics.jsonl");
    if (j.at("event").as_string() != "epoch") continue;
    std::map<int, double> e;
    e[-1] = j.at("samples").as_number();
    for (const Json& w : j.at("workers").elements()) {
      e[static_cast<int>(w.at("rank").as_number())] = w.at("samples").as_number();
    }
    out.push_back(e);
  }
  return out;
}

TEST(DynamicBatches, AFasterWorkerTrainsMoreOfEachEpochAndEveryBatchOnce) {
  const std::string dir = fresh_dir("dynamic-batches");
  for (const std::string assignment : {"dynamic", "static"}) {
    const std::string run = dir + "/" + assignment;
    const int rc = run_with_timeout(
        pshard_bin() + kJob + " --set cluster.batch_assignment=" + assignment + " --run-dir " + run, 270, run + ".log");
    ASSERT_EQ(rc, 0) << read_file(run + ".log");
    const auto epochs = samples_by_epoch(run);
    ASSERT_EQ(epochs.size(), 2u) << assignment;
    for (const auto& e : epochs) {
      EXPECT_EQ(e.at(-1), 3840.0) << assignment;  // 60 batches of 64, each trained by one worker
      EXPECT_EQ(e.at(0) + e.at(1), 3840.0) << assignment;
      if (assignment == "static") {
        EXPECT_EQ(e.at(0), 1920.0);
        EXPECT_EQ(e.at(1), 1920.0);
      } else {
        // About 3 batches of the fast worker to 1 of the slow (45 and 15); at least half as many again.
        EXPECT_GE(e.at(0), 1.5 * e.at(1)) << "worker 0 " << e.at(0) << ", worker 1 " << e.at(1);
        EXPECT_GT(e.at(1), 0.0);
      }
    }
  }
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(DynamicBatches, AreRefusedInASyncJobNamingTheKey) {
  const std::string dir = fresh_dir("dynamic-batches-sync");
  const int rc = run_with_timeout(pshard_bin() + kJob + " --set cluster.mode=sync --set cluster.batch_assignment=" +
                                      "dynamic --run-dir " + dir + "/run",
                                  120, dir + "/run.log");
  EXPECT_NE(rc, 0);
  const std::string log = read_file(dir + "/run.log");
  EXPECT_NE(log.find("key 'cluster.batch_assignment': dynamic needs cluster.mode = async, not sync"), std::string::npos)
      << log;
  pshard::testing::remove_dir_if_passed(dir);
}

}  // namespace
