// pshard's own DLRM through the servers: its embedding tables live only there, rows pulled and pushed per step.
// Synchronous training of W = 2 workers with batch b through 2 servers equals `pshard train` with batch 2b, up to
// float rounding (the dense mean and each row's mean over the workers are the single process's gradients), with the
// rows through shared memory and, bit for bit the same, over TCP; a run
// resumed from the servers' checkpoints (rows and their Adagrad state among them) ends bit for bit as the run it
// continues; hashed tables train through the servers as in one process; a config that would leave a step's rows
// behind is refused before any process starts.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/run_helpers.h"
#include "worker/trainer/model_file.h"

namespace {

using namespace pshard;
using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::read_summary;
using pshard::testing::run_with_timeout;
using pshard::testing::source_dir;

// 12800 samples / global batch 128 = 100 steps; 4 tables of 2000 rows; no dropout; one thread per process so that
// BLAS sums are ordered the same way.
std::string common_flags() {
  return " --config " + source_dir() +
         "/configs/dlrm_synthetic_ctr.toml --set data.train_size=12800 --set data.test_size=2000"
         " --set data.fields=4 --set data.cardinality=2000 --set train.epochs=1 --set lr_schedule.name=constant"
         " --set lr_schedule.scaling=none --set train.threads=1";
}

double max_relative_distance(const std::string& a_dir, const std::string& b_dir) {
  const std::vector<trainer::NamedTensor> a = trainer::load_model_file(a_dir + "/model.bin");
  const std::vector<trainer::NamedTensor> b = trainer::load_model_file(b_dir + "/model.bin");
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    double diff = 0, norm = 0;
    for (size_t k = 0; k < a[i].data.size(); ++k) {
      diff += (static_cast<double>(a[i].data[k]) - b[i].data[k]) * (static_cast<double>(a[i].data[k]) - b[i].data[k]);
      norm += static_cast<double>(a[i].data[k]) * a[i].data[k];
    }
    const double d = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
    std::printf("  %-16s relative distance %.3g\n", a[i].name.c_str(), d);
    worst = std::max(worst, d);
  }
  return worst;
}

TEST(DlrmJob, TwoWorkersThroughTwoServersEqualOneProcessWithTheirBatch) {
  const std::string dir = fresh_dir("dlrm-equiv");
  int rc = run_with_timeout(
      pshard_bin() + " train" + common_flags() + " --set train.batch_size=128 --run-dir " + dir + "/local", 300,
      dir + "/local.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/local.log");
  rc = run_with_timeout(pshard_bin() + " launch --servers 2 --workers 2 --timeout 300" + common_flags() +
                            " --set train.batch_size=64 --run-dir " + dir + "/dist",
                        330, dir + "/dist.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/dist.log");
  // The dense layers after 100 steps: they read the rows every step, so rows trained differently would show here.
  EXPECT_LE(max_relative_distance(dir + "/local", dir + "/dist"), 1e-5);
  // The test AUC: the local run's is the whole test set's; the job's is the mean of the two workers' halves.
  const Json local = read_summary(dir + "/local"), dist = read_summary(dir + "/dist");
  const double local_auc = local.at("figures").at("test_auc").as_number();
  const double dist_auc = dist.at("figures").at("test_auc").as_number();
  std::printf("test AUC: local %.4f, 2 workers %.4f\n", local_auc, dist_auc);
  EXPECT_GT(local_auc, 0.65);  // 0.68: 100 steps; the dense features alone allow 0.61
  EXPECT_NEAR(dist_auc, local_auc, 0.01);
  EXPECT_NEAR(dist.at("figures").at("test_logloss").as_number(), local.at("figures").at("test_logloss").as_number(),
              1e-3);
  const std::string log = read_file(dir + "/dist.log");
  EXPECT_NE(log.find("test_auc"), std::string::npos) << log;
  // The rows went through shared memory (cluster.transport = auto, every process on this host); over TCP the job
  // ends with the same bits.
  rc = run_with_timeout(pshard_bin() + " launch --servers 2 --workers 2 --timeout 300" + common_flags() +
                            " --set train.batch_size=64 --set cluster.transport=tcp --run-dir " + dir + "/tcp",
                        330, dir + "/tcp.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/tcp.log");
  EXPECT_TRUE(read_file(dir + "/tcp/model.bin") == read_file(dir + "/dist/model.bin"))
      << "the job over TCP ended with other weights than through shared memory";
  const Json tcp = read_summary(dir + "/tcp");
  // Per worker and step at least its 4 fields' rows (64 samples, 16 floats each, distinct ids): 4 KiB and up.
  const double shm_bytes = dist.at("shm_bytes_sent").as_number(), tcp_bytes = tcp.at("bytes_sent").as_number();
  std::printf("bytes sent: through shared memory %.0f (sockets %.0f), over TCP %.0f\n", shm_bytes,
              dist.at("bytes_sent").as_number(), tcp_bytes);
  EXPECT_GT(shm_bytes, 2 * 100 * 4096.0);
  EXPECT_EQ(tcp.at("shm_bytes_sent").as_number(), 0.0);
  EXPECT_EQ(dist.at("bytes_sent").as_number() + shm_bytes, tcp_bytes);  // each payload byte one way or the other
  pshard::testing::remove_dir_if_passed(dir);
}

// Hashed tables (embedding.hashed_rows), rows admitted after 2 steps and dropped 40 steps after their last push: the
// servers' sync steps admit, update and expire the rows as pshard train's does.
TEST(DlrmJob, HashedTablesThroughTwoServersEqualOneProcess) {
  const std::string dir = fresh_dir("dlrm-hashed");
  const std::string hashed =
      " --set embedding.hashed_rows=4000 --set embedding.admit_after=2 --set embedding.expire_after=40";
  int rc = run_with_timeout(
      pshard_bin() + " train" + common_flags() + hashed + " --set train.batch_size=128 --run-dir " + dir + "/local",
      300, dir + "/local.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/local.log");
  rc = run_with_timeout(pshard_bin() + " launch --servers 2 --workers 2 --timeout 300" + common_flags() + hashed +
                            " --set train.batch_size=64 --run-dir " + dir + "/dist",
                        330, dir + "/dist.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/dist.log");
  EXPECT_LE(max_relative_distance(dir + "/local", dir + "/dist"), 1e-5);
  const double local_auc = read_summary(dir + "/local").at("figures").at("test_auc").as_number();
  const double dist_auc = read_summary(dir + "/dist").at("figures").at("test_auc").as_number();
  std::printf("hashed tables, test AUC: local %.4f, 2 workers %.4f\n", local_auc, dist_auc);
  EXPECT_GT(local_auc, 0.6);
  EXPECT_NEAR(dist_auc, local_auc, 0.01);
  // Without them, admission is refused naming the key.
  rc = run_with_timeout(
      pshard_bin() + " train" + common_flags() + " --set embedding.admit_after=2 --run-dir " + dir + "/refused", 60,
      dir + "/refused.log");
  EXPECT_NE(rc, 0);
  EXPECT_NE(read_file(dir + "/refused.log")
                .find("embedding.admit_after is for hashed tables: set "
                      "embedding.hashed_rows too"),
            std::string::npos)
      << read_file(dir + "/refused.log");
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(DlrmJob, AResumedRunEndsWithTheWeightsOfTheUninterruptedOne) {
  namespace fs = std::filesystem;
  const std::string dir = fresh_dir("dlrm-resume");
  // 100 steps an epoch, 200 in all; checkpoints at 40, 80, 120 and 160.
  const std::string args = " launch --servers 2 --workers 2 --timeout 300" + common_flags() +
                           " --set train.batch_size=64 --set train.epochs=2 --set checkpoint.every_steps=40"
                           " --set checkpoint.keep=0";
  const std::string a = dir + "/a";
  int rc = run_with_timeout(pshard_bin() + args + " --run-dir " + a, 330, dir + "/a.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/a.log");
  // Resume at step 120 (epoch 2, 20 batches in): the run's checkpoints without those of steps 160 and 200 (its end).
  const std::string b = dir + "/b";
  fs::create_directories(b + "/checkpoints");
  fs::copy_file(a + "/config.toml", b + "/config.toml");
  fs::copy_file(a + "/run-id", b + "/run-id");
  for (const auto& e : fs::directory_iterator(a + "/checkpoints")) {
    const std::string name = e.path().filename().string();
    if (name.find("step-00000160") == std::string::npos && name.find("step-00000200") == std::string::npos) {
      fs::copy_file(e.path(), b + "/checkpoints/" + name);
    }
  }
  rc = run_with_timeout(pshard_bin() + " launch --servers 2 --workers 2 --timeout 300 --resume " + b, 330,
                        dir + "/b.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/b.log");
  EXPECT_NE(read_file(dir + "/b.log").find("resuming at step 120"), std::string::npos) << read_file(dir + "/b.log");
  EXPECT_TRUE(read_file(b + "/model.bin") == read_file(a + "/model.bin"))
      << "the dense weights after resuming at step 120 differ from the uninterrupted run's (bitwise)";
  EXPECT_EQ(read_summary(b).at("figures").at("test_auc").as_number(),
            read_summary(a).at("figures").at("test_auc").as_number());
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(DlrmJob, AConfigThatWouldLeaveRowsBehindIsRefusedBeforeAnyProcessStarts) {
  const std::string dir = fresh_dir("dlrm-refused");
  const int rc = run_with_timeout(pshard_bin() + " launch --servers 1 --workers 2 --timeout 60" + common_flags() +
                                      " --set cluster.backup_workers=1 --run-dir " + dir + "/run",
                                  90, dir + "/run.log");
  EXPECT_NE(rc, 0);
  const std::string log = read_file(dir + "/run.log");
  EXPECT_NE(log.find("cluster.backup_workers"), std::string::npos) << log;
  EXPECT_NE(log.find("model dlrm's embedding rows are pulled and pushed once a step"), std::string::npos) << log;
  EXPECT_EQ(log.find("worker 0"), std::string::npos) << log;
  pshard::testing::remove_dir_if_passed(dir);
}

}  // namespace
