// Synchronous training through the servers equals local training: W=2
// workers with batch b through 2 servers give the same weights after N steps
// as `pshard train` with batch 2b (dropout off), up to float rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/run_helpers.h"
#include "worker/trainer/model_file.h"

namespace {

using namespace pshard;
using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::run_with_timeout;
using pshard::testing::source_dir;

// Relative distance ||a - b|| / ||a|| of two flattened tensors.
double relative_distance(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(a[i]) * a[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

void expect_same_weights(const std::string& local_dir, const std::string& dist_dir, double tolerance) {
  std::vector<trainer::NamedTensor> local = trainer::load_model_file(local_dir + "/model.bin");
  std::vector<trainer::NamedTensor> dist = trainer::load_model_file(dist_dir + "/model.bin");
  ASSERT_EQ(local.size(), dist.size());
  for (size_t i = 0; i < local.size(); ++i) {
    ASSERT_EQ(local[i].name, dist[i].name);
    ASSERT_EQ(local[i].data.size(), dist[i].data.size());
    double d = relative_distance(local[i].data, dist[i].data);
    EXPECT_LE(d, tolerance) << local[i].name;
    std::printf("  %-14s relative distance %.3g\n", local[i].name.c_str(), d);
  }
}

struct Case {
  const char* name;
  const char* config;
  const char* extra;
};

void run_case(const Case& c) {
  const std::string dir = fresh_dir(std::string("equiv-") + c.name);
  const std::string config = source_dir() + "/configs/" + c.config;
  // 2560 samples / global batch 128 = 20 steps; constant lr, no dropout, no
  // evaluation; one thread per process so BLAS sums are ordered the same way.
  const std::string common = std::string(" --config ") + config +
                             " --set data.train_size=2560 --set data.test_size=256 --set train.epochs=1"
                             " --set train.eval=false --set model.dropout=0 --set lr_schedule.name=constant"
                             " --set lr_schedule.scaling=none --set train.threads=1 " +
                             c.extra;
  const std::string local_dir = dir + "/local", dist_dir = dir + "/dist";
  int rc = run_with_timeout(pshard_bin() + " train" + common + " --set train.batch_size=128 --run-dir " + local_dir,
                            300, dir + "/local.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/local.log");
  rc = run_with_timeout(pshard_bin() + " launch --servers 2 --workers 2 --timeout 300" + common +
                            " --set train.batch_size=64 --set cluster.mode=sync --run-dir " + dist_dir,
                        330, dir + "/dist.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/dist.log");
  expect_same_weights(local_dir, dist_dir, 1e-5);
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(DistributedEquivalence, MlpMomentumTwoWorkersEqualsOneWorkerDoubleBatch) {
  run_case({"mlp", "fmnist_mlp.toml", "--set optimizer.name=momentum --set optimizer.lr=0.05"});
}

TEST(DistributedEquivalence, LenetAdamTwoWorkersEqualsOneWorkerDoubleBatch) {
  run_case({"lenet", "fmnist_lenet.toml", "--set optimizer.name=adam --set optimizer.lr=0.001"});
}

// Uneven workers (train.worker_batch_sizes = [32, 96]): worker 0 trains 32 samples a step and worker 1 the next 96 of
// the same 128, and the servers' mean weighs each worker's gradients by its batch, so the job trains the weights of
// one worker with batch 128, up to float rounding. A launch whose workers do not match the list is refused before
// any process starts.
TEST(DistributedEquivalence, UnevenBatchesOfTwoWorkersEqualOneWorkerWithTheirSum) {
  const std::string dir = fresh_dir("equiv-uneven");
  const std::string common = " --config " + source_dir() +
                             "/configs/fmnist_mlp.toml --set data.train_size=2560 --set data.test_size=256"
                             " --set train.epochs=1 --set train.eval=false --set model.dropout=0"
                             " --set lr_schedule.name=constant --set train.threads=1 --set optimizer.name=momentum"
                             " --set optimizer.lr=0.05";
  int rc =
      run_with_timeout(pshard_bin() + " train" + common + " --set train.batch_size=128 --run-dir " + dir + "/local",
                       300, dir + "/local.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/local.log");
  rc =
      run_with_timeout(pshard_bin() + " launch --servers 2 --workers 2 --timeout 300" + common +
                           " --set train.worker_batch_sizes=[32,96] --set cluster.mode=sync --run-dir " + dir + "/dist",
                       330, dir + "/dist.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/dist.log");
  expect_same_weights(dir + "/local", dir + "/dist", 1e-5);
  const Json summary = pshard::testing::read_summary(dir + "/dist");
  EXPECT_EQ(summary.at("steps").as_int(), 20);  // 2560 / (32 + 96)
  EXPECT_EQ(summary.at("global_batch").as_int(), 128);
  rc = run_with_timeout(pshard_bin() + " launch --servers 1 --workers 3 --timeout 60" + common +
                            " --set train.worker_batch_sizes=[32,96] --run-dir " + dir + "/three",
                        90, dir + "/three.log");
  EXPECT_NE(rc, 0);
  EXPECT_NE(read_file(dir + "/three.log")
                .find("train.worker_batch_sizes names 2 batches, but the job has 3 workers: give one a worker"),
            std::string::npos)
      << read_file(dir + "/three.log");
  pshard::testing::remove_dir_if_passed(dir);
}

// The same sync job with its payloads through shared memory, through TCP, and through TCP on three connections from
// each worker to each server (cluster.streams_per_server): the same bits (the servers sum in rank order whichever way
// and on whichever connection a gradient came); the shared-memory run moved its pushes and pulls through shared
// memory, and each server of the three-stream run heard from three connections per worker.
TEST(DistributedEquivalence, SharedMemoryTcpAndSeveralStreamsGiveTheSameBits) {
  const std::string dir = fresh_dir("equiv-transport");
  const std::string common = " launch --servers 2 --workers 3 --timeout 300 --config " + source_dir() +
                             "/configs/fmnist_mlp_sync.toml --set data.train_size=3840 --set data.test_size=256"
                             " --set train.epochs=1 --set train.eval=false --set train.threads=1"
                             " --set cluster.slice_bytes=65536";  // fc1.weight in 13 slices: some on each stream
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"tcp", " --set cluster.transport=tcp"},
      {"shm", " --set cluster.transport=shm"},
      {"streams", " --set cluster.transport=tcp --set cluster.streams_per_server=3"}};
  for (const auto& [name, settings] : runs) {
    const int rc = run_with_timeout(pshard_bin() + common + settings + " --run-dir " + dir + "/" + name, 330,
                                    dir + "/" + name + ".log");
    ASSERT_EQ(rc, 0) << read_file(dir + "/" + name + ".log");
  }
  EXPECT_TRUE(read_file(dir + "/tcp/model.bin") == read_file(dir + "/shm/model.bin"))
      << "the shared-memory run's weights differ from the TCP run's";
  EXPECT_TRUE(read_file(dir + "/tcp/model.bin") == read_file(dir + "/streams/model.bin"))
      << "the weights of the run with three connections per server differ from the TCP run's";
  for (const auto& [name, connections] : {std::pair<std::string, int>{"tcp", 3}, {"streams", 9}}) {
    const std::string log = read_file(dir + "/" + name + ".log");
    for (int s = 0; s < 2; ++s) {
      const std::regex line("\\[server " + std::to_string(s) + "\\] info: stopping .* requests from " +
                            std::to_string(connections) + " connections,");
      EXPECT_TRUE(std::regex_search(log, line))
          << name << ": server " << s << " did not hear from " << connections << " connections\n"
          << log;
    }
  }
  const Json tcp = pshard::testing::read_summary(dir + "/tcp"), shm = pshard::testing::read_summary(dir + "/shm");
  EXPECT_EQ(tcp.at("shm_bytes_sent").as_number(), 0.0);
  // Most of it: the first requests of each worker go by TCP until its server has the layout (worker 0's init) and
  // has answered it, a few of this short job's 20 steps.
  EXPECT_GT(shm.at("shm_bytes_sent").as_number(), 0.5 * tcp.at("bytes_sent").as_number());
  EXPECT_LT(shm.at("bytes_sent").as_number(), 0.5 * tcp.at("bytes_sent").as_number());
  pshard::testing::remove_dir_if_passed(dir);
}

// The workers of one host summing their gradients before they push (cluster.host_aggregation = always, over TCP so
// that every server counts as remote): the same bits as every worker pushing its own (the leader sums in rank order,
// as the servers do), with one push and one pull per slice for the host: the network bytes per host and step are
// about twice the model's, where three workers pushing their own move six times it.
TEST(DistributedEquivalence, OnePushPerHostGivesTheSameBitsWithAThirdOfTheBytes) {
  const std::string dir = fresh_dir("equiv-host");
  const std::string common = " launch --servers 2 --workers 3 --timeout 300 --config " + source_dir() +
                             "/configs/fmnist_mlp_sync.toml --set data.train_size=3840 --set data.test_size=256"
                             " --set train.epochs=1 --set train.eval=false --set train.threads=1"
                             " --set cluster.transport=tcp";
  for (const char* a : {"off", "always"}) {
    const int rc =
        run_with_timeout(pshard_bin() + common + " --set cluster.host_aggregation=" + a + " --run-dir " + dir + "/" + a,
                         330, dir + "/" + a + ".log");
    ASSERT_EQ(rc, 0) << read_file(dir + "/" + a + ".log");
  }
  EXPECT_TRUE(read_file(dir + "/off/model.bin") == read_file(dir + "/always/model.bin"))
      << "the weights of the job that pushed once per host differ from the job whose workers pushed their own";
  const Json off = pshard::testing::read_summary(dir + "/off"), host = pshard::testing::read_summary(dir + "/always");
  const double model = host.at("model_bytes").as_number();
  EXPECT_EQ(host.at("num_hosts").as_number(), 1.0);
  EXPECT_LE(host.at("network_bytes_per_host_step").as_number(), 2.2 * model);
  EXPECT_GE(off.at("network_bytes_per_host_step").as_number(), 5.5 * model);
  EXPECT_GT(host.at("shm_bytes_per_host_step").as_number(), 4.0 * model);  // 2 members' gradients and weights
  EXPECT_EQ(off.at("shm_bytes_per_host_step").as_number(), 0.0);
  pshard::testing::remove_dir_if_passed(dir);
}

// cluster.host_aggregation = always refuses a job it cannot serve, naming what it needs, before any process starts.
TEST(DistributedEquivalence, OnePushPerHostRefusesAnAsyncJob) {
  const std::string dir = fresh_dir("equiv-host-async");
  const int rc =
      run_with_timeout(pshard_bin() + " launch --servers 1 --workers 2 --timeout 120 --config " + source_dir() +
                           "/configs/fmnist_mlp_sync.toml --set data.train_size=512 --set train.epochs=1"
                           " --set cluster.mode=async --set cluster.host_aggregation=always --run-dir " +
                           dir + "/run",
                       150, dir + "/run.log");
  EXPECT_NE(rc, 0);
  const std::string log = read_file(dir + "/run.log");
  EXPECT_NE(log.find("key 'cluster.host_aggregation': always needs cluster.mode = sync"), std::string::npos) << log;
  EXPECT_EQ(log.find("worker 0"), std::string::npos) << log;  // refused with the config: no worker ran
  pshard::testing::remove_dir_if_passed(dir);
}

}  // namespace
