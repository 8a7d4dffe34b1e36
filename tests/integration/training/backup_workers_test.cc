// Backup workers (cluster.backup_workers): a sync step closes without the last worker's push once a grace has
// passed; with nobody late the job is the one without backup workers, bit for bit, and a worker three times slower
// is left behind: its late gradients are dropped and counted, it catches up, and the epoch line names it.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "common/util/json.h"
#include "tests/support/run_helpers.h"

namespace {

using namespace pshard;
using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::run_with_timeout;
using pshard::testing::source_dir;

// 3840 samples / (3 workers x batch 64) = 20 steps.
const std::string kJob = " launch --servers 2 --workers 3 --timeout 300 --config " + source_dir() +
                         "/configs/fmnist_mlp_sync.toml --set data.train_size=3840 --set data.test_size=256"
                         " --set train.epochs=1 --set train.eval=false --set train.threads=1"
                         " --set train.batch_size=64";

// The last `epoch` event of RUN_DIR/metrics.jsonl.
Json last_epoch(const std::string& run_dir) {
  Json found;
  std::istringstream lines(read_file(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const Json j = Json::parse(line, "metrics.jsonl");
    if (j.at("event").as_string() == "epoch") found = j;
  }
  return found;
}

TEST(BackupWorkers, WithNobodyLateTheJobHasTheSameBitsAsWithout) {
  const std::string dir = fresh_dir("backup-on-time");
  // A grace of 5 s: however loaded the machine, every push of a step comes within it.
  for (const auto& [name, settings] :
       {std::pair<std::string, std::string>{"plain", ""},
        {"backup", " --set cluster.backup_workers=1 --set cluster.backup_grace_min_ms=5000"}}) {
    const int rc = run_with_timeout(pshard_bin() + kJob + settings + " --run-dir " + dir + "/" + name, 330,
                                    dir + "/" + name + ".log");
    ASSERT_EQ(rc, 0) << read_file(dir + "/" + name + ".log");
  }
  EXPECT_TRUE(read_file(dir + "/plain/model.bin") == read_file(dir + "/backup/model.bin"))
      << "the weights of the job with a backup worker, where nobody was late, differ from the job without";
  const Json summary = pshard::testing::read_summary(dir + "/backup");
  EXPECT_EQ(summary.at("late_steps").as_number(), 0.0);
  EXPECT_FALSE(pshard::testing::read_summary(dir + "/plain").has("late_steps"));
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(BackupWorkers, AWorkerThreeTimesSlowerIsLeftBehindAndNamed) {
  const std::string dir = fresh_dir("backup-straggler");
  // Sleeps of 40 ms stand in for each step's compute; worker 2 sleeps 120 ms.
  const int rc = run_with_timeout(pshard_bin() + kJob +
                                      " --set train.simulate_compute_ms=40 --set train.straggler_rank=2"
                                      " --set train.straggler_factor=3 --set cluster.backup_workers=1"
                                      " --set train.log_every=0 --run-dir " +
                                      dir + "/run",
                                  330, dir + "/run.log");
  const std::string log = read_file(dir + "/run.log");
  ASSERT_EQ(rc, 0) << log;
  const Json epoch = last_epoch(dir + "/run");
  ASSERT_TRUE(epoch.has("late_steps")) << epoch.dump();
  const double steps = epoch.at("steps").as_number();
  EXPECT_EQ(steps, 20.0);
  double late[3] = {0, 0, 0}, caught_up[3] = {0, 0, 0};
  for (const Json& w : epoch.at("workers").elements()) {
    const auto r = static_cast<size_t>(w.at("rank").as_number());
    ASSERT_LT(r, 3u);
    late[r] = w.at("late_steps").as_number();
    caught_up[r] = w.at("caught_up_steps").as_number();
  }
  // Worker 2's steps come after the others closed them: its late gradients were dropped, and it skipped the batches
  // of the steps closed without it (about 2 of every 3 on an idle machine; fewer where a loaded machine's
  // communication, not the sleeps, sets the others' pace). The others are on time (jitter aside).
  EXPECT_GE(late[2], 3.0) << epoch.dump();
  EXPECT_GE(caught_up[2], 1.0) << epoch.dump();
  EXPECT_EQ(caught_up[0] + caught_up[1], 0.0) << epoch.dump();
  EXPECT_GT(late[2], late[0] + late[1]) << epoch.dump();
  EXPECT_EQ(epoch.at("late_steps").as_number(), late[0] + late[1] + late[2]);
  bool named = false;
  for (const Json& s : epoch.at("stragglers").elements()) named = named || s.at("rank").as_number() == 2.0;
  EXPECT_TRUE(named) << epoch.dump();
  EXPECT_NE(log.find("late: worker 2 ("), std::string::npos) << log;
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(BackupWorkers, AreRefusedWithAsyncJobsNamingTheKey) {
  const std::string dir = fresh_dir("backup-async");
  const int rc = run_with_timeout(
      pshard_bin() + kJob + " --set cluster.mode=async --set cluster.backup_workers=1" + " --run-dir " + dir + "/run",
      150, dir + "/run.log");
  EXPECT_NE(rc, 0);
  const std::string log = read_file(dir + "/run.log");
  EXPECT_NE(log.find("key 'cluster.backup_workers': backup workers need cluster.mode = sync, not async"),
            std::string::npos)
      << log;
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(BackupWorkers, AsManyAsTheWorkersAreRefusedNamingTheCount) {
  const std::string dir = fresh_dir("backup-all");
  const int rc = run_with_timeout(pshard_bin() + kJob + " --set cluster.backup_workers=3 --run-dir " + dir + "/run",
                                  150, dir + "/run.log");
  EXPECT_NE(rc, 0);
  const std::string log = read_file(dir + "/run.log");
  EXPECT_NE(log.find("cluster.backup_workers = 3 leaves no worker to wait for: the job has 3 workers; use at most 2"),
            std::string::npos)
      << log;
  pshard::testing::remove_dir_if_passed(dir);
}

}  // namespace
