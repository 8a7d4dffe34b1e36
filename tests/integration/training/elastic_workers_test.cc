// Elastic sync jobs (pshard launch --workers MIN:MAX): a dead worker is dropped, workers added with `pshard join`
// train from the next epoch's start, each epoch's data is cut among its members and the learning rate follows their
// global batch; with a fixed membership the job is bitwise the fixed-size one.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/support/run_helpers.h"

namespace {

using namespace pshard;
using pshard::testing::BackgroundJob;
using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::read_summary;
using pshard::testing::source_dir;
using Clock = std::chrono::steady_clock;

bool have_fashion_mnist() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

// The events of RUN_DIR/metrics.jsonl named `kind` (a line being written is skipped).
std::vector<Json> events(const std::string& run_dir, const std::string& kind) {
  std::vector<Json> out;
  std::istringstream lines(read_file(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\"event\":\"" + kind + "\"") == std::string::npos) continue;
    try {
      out.push_back(Json::parse(line, "metrics line"));
    } catch (const std::exception&) {
    }
  }
  return out;
}

// Waits until `ready()` holds; false after `timeout`.
template <typename F>
bool wait_until(F ready, std::chrono::seconds timeout) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int64_t worker_pid(const std::string& run_dir, int64_t rank) {
  Json map = Json::parse(read_file(run_dir + "/cluster.json"), run_dir + "/cluster.json");
  for (const Json& n : map.at("nodes").elements()) {
    if (n.at("role").as_string() == "worker" && n.at("rank").as_int() == rank) return n.at("pid").as_int();
  }
  return -1;
}

std::string launch(const std::string& run_dir, const std::string& workers, const std::string& extra) {
  return pshard_bin() + " launch --servers 2 --workers " + workers + " --timeout 300 --config " + source_dir() +
         "/configs/fmnist_mlp_sync.toml --set lr_schedule.name=constant --set data.train_size=12800"
         " --set data.test_size=2000 --set cluster.heartbeat_interval_ms=200 --set cluster.heartbeat_timeout_ms=3000 " +
         extra + " --run-dir " + run_dir;
}

// 2:4 workers: worker 1 is SIGKILLed in epoch 1, which worker 0 finishes alone; epoch 2 waits for a second worker
// (min 2), two join, and the rest of the run trains with three: 312 steps an epoch instead of 468, at 3/2 the
// learning rate (linear scaling rule: 0.05 x 192 / 64).
TEST(ElasticWorkers, DropsADeadWorkerAndTakesTwoNewOnes) {
  if (!have_fashion_mnist()) GTEST_SKIP();
  const std::string dir = fresh_dir("elastic");
  const std::string run = dir + "/run";
  // The whole training set: epoch 1's 468 steps take a second or more, and the kill lands in it or soon after.
  BackgroundJob job(launch(run, "2:4", "--set train.epochs=4 --set data.train_size=0"), dir + "/log");
  ASSERT_TRUE(job.started());
  ASSERT_TRUE(wait_until([&] { return !events(run, "members").empty(); }, std::chrono::seconds(120)))
      << read_file(dir + "/log");
  const Json first = events(run, "members").front();
  EXPECT_EQ(first.at("epoch").as_int(), 1);
  EXPECT_EQ(first.at("workers").size(), 2u);
  EXPECT_EQ(first.at("global_batch").as_int(), 128);
  EXPECT_NEAR(first.at("lr").as_number(), 0.1, 1e-6);
  EXPECT_EQ(first.at("steps").as_int(), 468);
  const int64_t victim = worker_pid(run, 1);
  ASSERT_GT(victim, 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  BackgroundJob join1(pshard_bin() + " join " + run, dir + "/join1.log");
  BackgroundJob join2(pshard_bin() + " join " + run, dir + "/join2.log");
  ASSERT_TRUE(join1.started() && join2.started());
  std::optional<int> rc = job.wait(std::chrono::seconds(300));
  const std::string log = read_file(dir + "/log");
  ASSERT_TRUE(rc.has_value()) << "the elastic job hung\n" << log;
  EXPECT_EQ(*rc, 0) << log;
  ASSERT_TRUE(join1.wait(std::chrono::seconds(30)).has_value());
  ASSERT_TRUE(join2.wait(std::chrono::seconds(30)).has_value());

  // Each epoch's plan: who trained it, from which step, at which learning rate.
  const std::vector<Json> plans = events(run, "members");
  ASSERT_EQ(plans.size(), 4u) << log;
  int64_t step = 0;
  for (const Json& p : plans) {
    const int64_t n = static_cast<int64_t>(p.at("workers").size());
    EXPECT_EQ(p.at("first_step").as_int(), step) << p.dump();
    EXPECT_EQ(p.at("steps").as_int(), 60000 / (64 * n)) << p.dump();
    EXPECT_EQ(p.at("global_batch").as_int(), 64 * n) << p.dump();
    EXPECT_NEAR(p.at("lr").as_number(), 0.05 * static_cast<double>(n), 1e-6) << p.dump();
    step += p.at("steps").as_int();
  }
  // The two new workers are in by the last epoch (each joins at the first epoch start after it registered).
  EXPECT_EQ(plans.back().at("workers").size(), 3u) << log;
  EXPECT_GE(plans[1].at("workers").size(), 2u) << log;
  EXPECT_NE(log.find("is dead: its process was killed by signal 9"), std::string::npos) << log;
  EXPECT_NE(log.find("joined: worker"), std::string::npos) << log;
  EXPECT_NE(log.find("3 workers x batch 64 = global batch 192, 312 steps"), std::string::npos) << log;
  EXPECT_NE(log.find("worker 1 (pid " + std::to_string(victim) +
                     ") was killed by signal 9 (SIGKILL) (the elastic job went on without it)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("without worker 1 (host"), std::string::npos) << log;

  // The epoch lines combine the members' reports: three in the last.
  const std::vector<Json> epochs = events(run, "epoch");
  ASSERT_EQ(epochs.size(), 4u) << log;
  EXPECT_EQ(epochs.back().at("workers").size(), 3u) << epochs.back().dump();
  Json summary = read_summary(run);
  // Worker 1's shard of the epoch it died in was not trained (when it died before reporting that epoch): the epoch
  // line names it and the summary warns, so the lost samples are not silent.
  bool reported = false;  // the per-worker list is there when more than one worker reported
  if (epochs.front().has("workers")) {
    for (const Json& w : epochs.front().at("workers").elements()) reported = reported || w.at("rank").as_int() == 1;
  }
  std::printf("worker 1 died %s it reported epoch 1\n", reported ? "after" : "before");
  if (!reported) {
    ASSERT_TRUE(epochs.front().has("missing_workers")) << epochs.front().dump();
    ASSERT_EQ(epochs.front().at("missing_workers").size(), 1u) << epochs.front().dump();
    EXPECT_EQ(epochs.front().at("missing_workers").elements()[0].as_int(), 1);
    ASSERT_TRUE(summary.has("warnings")) << summary.dump();
    EXPECT_NE(summary.at("warnings").dump().find("epoch 1 trained without the shard of worker 1"), std::string::npos)
        << summary.dump();
  }
  EXPECT_EQ(summary.at("epochs").as_int(), 4);
  EXPECT_EQ(summary.at("workers").as_int(), 3);
  EXPECT_EQ(summary.at("min_workers").as_int(), 2);
  EXPECT_EQ(summary.at("max_workers").as_int(), 4);
  EXPECT_GT(summary.at("test_acc").as_number(), 0.82) << summary.dump();
  EXPECT_TRUE(std::filesystem::exists(run + "/model.bin"));
  pshard::testing::remove_dir_if_passed(dir);
}

// cluster.elastic_batch = global: the global batch stays min workers x batch (2 x 64), so a third worker makes each
// member's batch 128 / 3 = 42, the epoch 60000 / 126 = 476 steps, and the learning rate stays 0.05 x 128 / 64.
TEST(ElasticWorkers, AGlobalBatchIsSharedAmongTheMembers) {
  if (!have_fashion_mnist()) GTEST_SKIP();
  const std::string dir = fresh_dir("elastic-global");
  const std::string run = dir + "/run";
  BackgroundJob job(
      launch(run, "2:3", "--set train.epochs=4 --set data.train_size=0 --set cluster.elastic_batch=global"),
      dir + "/log");
  ASSERT_TRUE(job.started());
  ASSERT_TRUE(wait_until([&] { return !events(run, "members").empty(); }, std::chrono::seconds(120)))
      << read_file(dir + "/log");
  BackgroundJob joiner(pshard_bin() + " join " + run, dir + "/join.log");
  std::optional<int> rc = job.wait(std::chrono::seconds(300));
  const std::string log = read_file(dir + "/log");
  ASSERT_TRUE(rc.has_value()) << log;
  EXPECT_EQ(*rc, 0) << log;
  ASSERT_TRUE(joiner.wait(std::chrono::seconds(30)).has_value());
  int64_t step = 0;
  bool three = false;
  for (const Json& p : events(run, "members")) {
    const size_t n = p.at("workers").size();
    const int64_t batch = n == 3 ? 42 : 64;
    three = three || n == 3;
    EXPECT_EQ(p.at("batch").as_int(), batch) << p.dump();
    EXPECT_EQ(p.at("global_batch").as_int(), batch * static_cast<int64_t>(n)) << p.dump();
    EXPECT_EQ(p.at("steps").as_int(), 60000 / (batch * static_cast<int64_t>(n))) << p.dump();
    EXPECT_EQ(p.at("first_step").as_int(), step) << p.dump();
    EXPECT_NEAR(p.at("lr").as_number(), 0.1, 1e-6) << p.dump();
    step += p.at("steps").as_int();
  }
  EXPECT_TRUE(three) << "the third worker never trained\n" << log;
  EXPECT_NE(log.find("3 workers x batch 42 = global batch 126 (128 / 3 rounded down), 476 steps"), std::string::npos)
      << log;
  pshard::testing::remove_dir_if_passed(dir);
}

// `pshard join` watches the worker it started, as pshard launch watches its own: a joined worker SIGKILLed once it is
// in an epoch's plan is dead for the coordinator at once, not after cluster.heartbeat_timeout_ms (120 s here, which
// the job would otherwise sit out in that epoch), the epoch names its shard as not trained, and pshard join says how
// its worker ended.
TEST(ElasticWorkers, AJoinedWorkerThatDiesIsDroppedAtOnce) {
  if (!have_fashion_mnist()) GTEST_SKIP();
  const std::string dir = fresh_dir("elastic-joined-dies");
  const std::string run = dir + "/run";
  BackgroundJob job(
      launch(run, "2:3", "--set train.epochs=4 --set data.train_size=0 --set cluster.heartbeat_timeout_ms=120000"),
      dir + "/log");
  ASSERT_TRUE(job.started());
  ASSERT_TRUE(wait_until([&] { return !events(run, "members").empty(); }, std::chrono::seconds(120)))
      << read_file(dir + "/log");
  BackgroundJob joiner(pshard_bin() + " join " + run, dir + "/join.log");
  ASSERT_TRUE(joiner.started());
  auto planned = [&] {
    for (const Json& p : events(run, "members")) {
      if (p.at("workers").size() == 3u) return true;
    }
    return false;
  };
  ASSERT_TRUE(wait_until(planned, std::chrono::seconds(120))) << read_file(dir + "/log");
  const int64_t victim = worker_pid(run, 2);
  ASSERT_GT(victim, 0) << read_file(run + "/cluster.json");
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  const auto killed = Clock::now();
  std::optional<int> rc = job.wait(std::chrono::seconds(240));
  const std::string log = read_file(dir + "/log");
  ASSERT_TRUE(rc.has_value()) << "the elastic job hung\n" << log;
  EXPECT_EQ(*rc, 0) << log;
  EXPECT_LT(Clock::now() - killed, std::chrono::seconds(100)) << "the job waited out the heartbeat timeout\n" << log;
  EXPECT_NE(log.find(") is dead: its process was killed by signal 9 (SIGKILL) (pshard join saw it end)"),
            std::string::npos)
      << log;
  std::optional<int> joined = joiner.wait(std::chrono::seconds(30));
  ASSERT_TRUE(joined.has_value());
  EXPECT_EQ(*joined, 1);
  const std::string join_log = read_file(dir + "/join.log");
  EXPECT_NE(
      join_log.find("error: pshard join: worker (pid " + std::to_string(victim) + ") was killed by signal 9 (SIGKILL)"),
      std::string::npos)
      << join_log;
  // The epoch it died in went on without it; unless it reported that epoch first, its shard is named as not trained.
  Json summary = read_summary(run);
  EXPECT_EQ(summary.at("epochs").as_int(), 4);
  pshard::testing::remove_dir_if_passed(dir);
}

// With nobody joining or leaving, an elastic job is the fixed-size job: the same shards, steps and learning rate,
// A worker that joins during the last epoch waits for a next epoch that never comes: it leaves with status 0 having
// trained nothing, and says so (the Python package's worker does the same: tests/python/elastic_test.py).
TEST(ElasticWorkers, AWorkerThatJoinsDuringTheLastEpochLeavesWithStatusZero) {
  if (!have_fashion_mnist()) GTEST_SKIP();
  const std::string dir = fresh_dir("elastic-late");
  const std::string run = dir + "/run";
  // One epoch of 100 steps at 80 ms each: the joiner registers well within it.
  BackgroundJob job(launch(run, "2:3", "--set train.epochs=1 --set train.simulate_compute_ms=80"), dir + "/log");
  ASSERT_TRUE(job.started());
  ASSERT_TRUE(wait_until([&] { return !events(run, "members").empty(); }, std::chrono::seconds(120)))
      << read_file(dir + "/log");
  BackgroundJob joiner(pshard_bin() + " join " + run, dir + "/join.log");
  ASSERT_TRUE(joiner.started());
  std::optional<int> rc = job.wait(std::chrono::seconds(120));
  ASSERT_TRUE(rc.has_value()) << "the elastic job hung\n" << read_file(dir + "/log");
  EXPECT_EQ(*rc, 0) << read_file(dir + "/log");
  std::optional<int> joined = joiner.wait(std::chrono::seconds(30));
  const std::string join_log = read_file(dir + "/join.log");
  ASSERT_TRUE(joined.has_value()) << "the late worker hung\n" << join_log;
  EXPECT_EQ(*joined, 0) << join_log;
  EXPECT_NE(join_log.find("the job ended before another epoch began: this worker joined too late to train"),
            std::string::npos)
      << join_log;
  const std::vector<Json> plans = events(run, "members");
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans.front().at("workers").size(), 2u) << plans.front().dump();
  EXPECT_EQ(read_summary(run).at("workers").as_int(), 2);
  pshard::testing::remove_dir_if_passed(dir);
}

// summed in rank order, so the same model bit for bit.
TEST(ElasticWorkers, AFixedMembershipTrainsBitwiseLikeAFixedSizeJob) {
  if (!have_fashion_mnist()) GTEST_SKIP();
  const std::string dir = fresh_dir("elastic-fixed");
  const std::string extra = "--set train.epochs=2 --set lr_schedule.warmup_steps=20";
  std::map<std::string, std::string> model;
  for (const std::string& workers : {std::string("2"), std::string("2:3")}) {
    const std::string run = dir + "/run-" + workers.substr(workers.size() - 1);
    ASSERT_EQ(pshard::testing::run_with_timeout(launch(run, workers, extra), 240, run + ".log"), 0)
        << read_file(run + ".log");
    model[workers] = read_file(run + "/model.bin");
  }
  ASSERT_FALSE(model["2"].empty());
  EXPECT_TRUE(model["2"] == model["2:3"]) << "an elastic job with a fixed membership trained other weights";
  pshard::testing::remove_dir_if_passed(dir);
}

// What an elastic job refuses before any process starts, and what `pshard join` says without one.
TEST(ElasticWorkers, RefusesWhatItCannotDo) {
  const std::string dir = fresh_dir("elastic-refused");
  struct Case {
    std::string command, expect;
  };
  // The config's cosine schedule gets a length: without one an elastic job is refused for that first (config_test).
  const std::string base = pshard_bin() + " launch --servers 1 --config " + source_dir() +
                           "/configs/fmnist_mlp_sync.toml --set lr_schedule.total_steps=1000 --run-dir " + dir + "/run";
  const std::vector<Case> cases = {
      {base + " --workers 3:2", "MAX is less than MIN"},
      {base + " --workers 0:2", "MIN must be a number in 1..1024"},
      {base + " --workers 2:x", "MAX must be a number in 1..1024"},
      {base + " --workers 1:2 --set cluster.mode=async", "it needs cluster.mode = sync"},
      {base + " --workers 1:2 --set cluster.restart_workers=true --set cluster.failure_policy=continue",
       "cluster.restart_workers is for a fixed number of workers"},
      {base + " --workers 1:2 --set train.precision=fp16",
       "key 'train.loss_scaling': 'dynamic' in an elastic job (cluster.min_workers > 0, pshard launch --workers "
       "MIN:MAX): a worker joining it would start from a loss scale of its own"},
      {base + " --workers 1:2 --set checkpoint.on_sigterm=checkpoint",
       "key 'checkpoint.on_sigterm': 'checkpoint' in an elastic job"},
      {pshard_bin() + " join " + dir, "only an elastic job started by `pshard launch --workers MIN:MAX`"},
  };
  for (const Case& c : cases) {
    const std::string log = dir + "/case.log";
    EXPECT_NE(pshard::testing::run_with_timeout(c.command, 60, log), 0) << c.command;
    EXPECT_NE(read_file(log).find(c.expect), std::string::npos) << c.command << "\n" << read_file(log);
  }
  pshard::testing::remove_dir_if_passed(dir);
}

}  // namespace
