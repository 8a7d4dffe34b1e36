// A worker SIGKILLed in the middle of synchronous training: with
// cluster.failure_policy = continue the others finish the run and the summary
// says who finished; with abort the job ends promptly, naming the dead worker.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

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

// Waits until the coordinator wrote cluster.json and the first epoch line,
// then returns the pid of worker `rank`.
int64_t worker_pid_after_first_epoch(const std::string& run_dir, int64_t rank, std::chrono::seconds timeout) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    const std::string metrics = read_file(run_dir + "/metrics.jsonl");
    if (metrics.find("\"event\":\"epoch\"") != std::string::npos &&
        std::filesystem::exists(run_dir + "/cluster.json")) {
      Json map = Json::parse(read_file(run_dir + "/cluster.json"), run_dir + "/cluster.json");
      for (const Json& n : map.at("nodes").elements()) {
        if (n.at("role").as_string() == "worker" && n.at("rank").as_int() == rank) return n.at("pid").as_int();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return -1;
}

std::string launch_command(const std::string& run_dir, const std::string& policy) {
  return pshard_bin() + " launch --servers 2 --workers 2 --timeout 240 --config " + source_dir() +
         "/configs/fmnist_mlp_sync.toml --set data.train_size=12800 --set data.test_size=2000 --set train.epochs=8"
         " --set cluster.heartbeat_interval_ms=200 --set cluster.heartbeat_timeout_ms=1500"
         " --set cluster.failure_policy=" +
         policy + " --run-dir " + run_dir;
}

TEST(WorkerFailure, ContinuePolicyFinishesWithTheSurvivors) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) GTEST_SKIP();
  const std::string dir = fresh_dir("kill-continue");
  BackgroundJob job(launch_command(dir + "/run", "continue"), dir + "/log");
  ASSERT_TRUE(job.started());
  const int64_t victim = worker_pid_after_first_epoch(dir + "/run", 1, std::chrono::seconds(120));
  ASSERT_GT(victim, 0) << read_file(dir + "/log");
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  std::optional<int> rc = job.wait(std::chrono::seconds(240));
  ASSERT_TRUE(rc.has_value()) << "the job hung after a worker was killed\n" << read_file(dir + "/log");
  // The run completed with worker 0 alone; launch still reports the dead worker as a failure.
  Json summary = read_summary(dir + "/run");
  ASSERT_EQ(summary.at("workers_finished").size(), 1u) << summary.dump();
  EXPECT_EQ(summary.at("workers_finished").elements()[0].as_int(), 0);
  EXPECT_EQ(summary.at("epochs").as_int(), 8);
  EXPECT_GT(summary.at("test_acc").as_number(), 0.75);
  EXPECT_NE(read_file(dir + "/log").find("worker 1"), std::string::npos);
  EXPECT_EQ(summary.at("model_file").as_string(), dir + "/run/model.bin");
  EXPECT_TRUE(std::filesystem::exists(dir + "/run/model.bin"));
  pshard::testing::remove_dir_if_passed(dir);
}

// pshard launch tells the coordinator when a worker's process ends, so the others go on at once instead of after the
// heartbeat timeout (30 s here; the job takes a few seconds).
TEST(WorkerFailure, ContinuePolicyGoesOnAtOnceWhenLaunchSawTheWorkerDie) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) GTEST_SKIP();
  const std::string dir = fresh_dir("kill-noticed");
  BackgroundJob job(pshard_bin() + " launch --servers 2 --workers 2 --timeout 240 --config " + source_dir() +
                        "/configs/fmnist_mlp_sync.toml --set data.train_size=12800 --set data.test_size=2000"
                        " --set train.epochs=4 --set cluster.heartbeat_timeout_ms=30000"
                        " --set cluster.failure_policy=continue --run-dir " +
                        dir + "/run",
                    dir + "/log");
  ASSERT_TRUE(job.started());
  const int64_t victim = worker_pid_after_first_epoch(dir + "/run", 1, std::chrono::seconds(120));
  ASSERT_GT(victim, 0) << read_file(dir + "/log");
  const auto killed = Clock::now();
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  std::optional<int> rc = job.wait(std::chrono::seconds(240));
  const double took = std::chrono::duration<double>(Clock::now() - killed).count();
  const std::string log = read_file(dir + "/log");
  ASSERT_TRUE(rc.has_value()) << "the job hung after a worker was killed\n" << log;
  EXPECT_LT(took, 15.0) << "the survivor waited for the heartbeat timeout\n" << log;
  EXPECT_NE(log.find("worker 1 (host"), std::string::npos) << log;
  EXPECT_NE(log.find("is dead: its process was killed by signal 9 (SIGKILL) (pshard launch saw it end)"),
            std::string::npos)
      << log;
  Json summary = read_summary(dir + "/run");
  EXPECT_EQ(summary.at("epochs").as_int(), 4);
  ASSERT_EQ(summary.at("workers_finished").size(), 1u) << summary.dump();
  // The run's record says so as it happens (the dashboard lists it), before the epochs trained without it.
  const std::string metrics = read_file(dir + "/run/metrics.jsonl");
  const size_t failure = metrics.find("{\"event\":\"failure\",\"role\":\"worker\",\"rank\":1,");
  ASSERT_NE(failure, std::string::npos) << metrics;
  const std::string line = metrics.substr(failure, metrics.find('\n', failure) - failure);
  EXPECT_NE(line.find("\"verdict\":\"dead\",\"why\":\"its process was killed by signal 9 (SIGKILL)"), std::string::npos)
      << line;
  EXPECT_NE(line.find("\"pid\":" + std::to_string(victim) + ","), std::string::npos) << line;
  EXPECT_LT(failure, metrics.find("\"event\":\"summary\"")) << metrics;
  pshard::testing::remove_dir_if_passed(dir);
}

// Worker 0 usually saves the model; when it died, the lowest worker still alive does, and the
// summary (and its line) names the file.
TEST(WorkerFailure, ContinuePolicySavesTheModelWhenWorkerZeroDies) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) GTEST_SKIP();
  const std::string dir = fresh_dir("kill-worker0");
  BackgroundJob job(launch_command(dir + "/run", "continue"), dir + "/log");
  ASSERT_TRUE(job.started());
  const int64_t victim = worker_pid_after_first_epoch(dir + "/run", 0, std::chrono::seconds(120));
  ASSERT_GT(victim, 0) << read_file(dir + "/log");
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  std::optional<int> rc = job.wait(std::chrono::seconds(240));
  ASSERT_TRUE(rc.has_value()) << "the job hung after worker 0 was killed\n" << read_file(dir + "/log");
  Json summary = read_summary(dir + "/run");
  ASSERT_EQ(summary.at("workers_finished").size(), 1u) << summary.dump();
  EXPECT_EQ(summary.at("workers_finished").elements()[0].as_int(), 1);
  ASSERT_TRUE(summary.at("model_file").is_string()) << summary.dump();
  EXPECT_EQ(summary.at("model").as_string(), "mlp");  // the architecture, as before
  EXPECT_EQ(summary.at("model_file").as_string(), dir + "/run/model.bin");
  EXPECT_TRUE(std::filesystem::exists(dir + "/run/model.bin"));
  const std::string log = read_file(dir + "/log");
  EXPECT_NE(log.find("; model " + dir + "/run/model.bin"), std::string::npos) << log;
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(WorkerFailure, AbortPolicyEndsTheJobNamingTheDeadWorker) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) GTEST_SKIP();
  const std::string dir = fresh_dir("kill-abort");
  BackgroundJob job(launch_command(dir + "/run", "abort"), dir + "/log");
  ASSERT_TRUE(job.started());
  const int64_t victim = worker_pid_after_first_epoch(dir + "/run", 1, std::chrono::seconds(120));
  ASSERT_GT(victim, 0) << read_file(dir + "/log");
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  const auto killed = Clock::now();
  // heartbeat timeout 1.5 s + 5 s, plus the launcher's grace period for the others to stop.
  std::optional<int> rc = job.wait(std::chrono::seconds(12));
  ASSERT_TRUE(rc.has_value()) << "the job did not end after a worker was killed\n" << read_file(dir + "/log");
  EXPECT_NE(*rc, 0);
  const double took = std::chrono::duration<double>(Clock::now() - killed).count();
  std::printf("job ended %.1f s after the kill\n", took);
  const std::string log = read_file(dir + "/log");
  EXPECT_NE(log.find("worker 1"), std::string::npos) << log;
  EXPECT_NE(log.find("SIGKILL"), std::string::npos) << log;
  pshard::testing::remove_dir_if_passed(dir);
}

// A worker that stops pushing while its process lives on (here: SIGSTOPped, with a heartbeat timeout longer than the
// request timeout, so its heartbeats cannot find it): the server and the coordinator name it within
// cluster.stall_warn_ms, the server reports it stuck, and the job fails naming it, neither blaming the healthy server
// the others wait at nor declaring the worker that waited dead.
TEST(WorkerFailure, AWorkerThatStopsPushingIsNamedByTheServerTheCoordinatorAndTheFailure) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) GTEST_SKIP();
  const std::string dir = fresh_dir("stall");
  BackgroundJob job(pshard_bin() + " launch --servers 1 --workers 2 --timeout 120 --grace-ms 1000 --config " +
                        source_dir() +
                        "/configs/fmnist_mlp_sync.toml --set data.train_size=12800 --set data.test_size=2000"
                        " --set train.epochs=30 --set cluster.heartbeat_timeout_ms=60000"
                        " --set cluster.request_timeout_ms=8000 --set cluster.stall_warn_ms=1000 --run-dir " +
                        dir + "/run",
                    dir + "/log");
  ASSERT_TRUE(job.started());
  const int64_t victim = worker_pid_after_first_epoch(dir + "/run", 1, std::chrono::seconds(120));
  ASSERT_GT(victim, 0) << read_file(dir + "/log");
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGSTOP), 0);
  const auto stopped = Clock::now();
  // The stall is named after 1 s; worker 0's read is given up after 7.2 s (8 s less a tenth), well before the
  // 60 s heartbeat timeout.
  std::optional<int> rc = job.wait(std::chrono::seconds(30));
  const double took = std::chrono::duration<double>(Clock::now() - stopped).count();
  ::kill(static_cast<pid_t>(victim), SIGKILL);
  const std::string log = read_file(dir + "/log");
  ASSERT_TRUE(rc.has_value()) << "the job hung on a worker that stopped pushing\n" << log;
  EXPECT_NE(*rc, 0) << log;
  std::printf("job ended %.1f s after the stop\n", took);
  EXPECT_LT(took, 25.0);
  // The server's log line, then the coordinator's with when it last heard from the worker.
  EXPECT_NE(log.find("has waited 1.0 s for worker 1 to push"), std::string::npos) << log;
  EXPECT_NE(log.find("has waited 1.0 s at step"), std::string::npos) << log;
  EXPECT_NE(log.find("for worker 1 (last heard"), std::string::npos) << log;
  // The stall is in the run's record, and the failure names the missing worker.
  const std::string metrics = read_file(dir + "/run/metrics.jsonl");
  EXPECT_NE(metrics.find("\"event\":\"stall\""), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\"missing\":[1]"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("{\"event\":\"failure\",\"role\":\"worker\",\"rank\":1,"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\"verdict\":\"stuck\""), std::string::npos) << metrics;
  const size_t failed = log.find("job failed:");
  ASSERT_NE(failed, std::string::npos) << log;
  const std::string headline = log.substr(failed, log.find('\n', failed) - failed);
  EXPECT_NE(headline.find("the push of worker 1"), std::string::npos) << headline << "\n" << log;
  EXPECT_TRUE(std::regex_search(headline, std::regex(R"(worker 1 \(host [^)]*\) is stuck: server 0 \(host )")))
      << headline << "\n"
      << log;
  EXPECT_FALSE(std::regex_search(log, std::regex(R"(worker 0 \(host [^)]*\) is dead)"))) << log;
  EXPECT_EQ(log.find("did not answer"), std::string::npos) << log;
  pshard::testing::remove_dir_if_passed(dir);
}

}  // namespace
