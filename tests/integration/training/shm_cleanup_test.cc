// A `pshard launch` job whose payloads go through shared memory (cluster.transport = shm) leaves no segment behind
// when a server or a worker is killed with SIGKILL: the segments are anonymous (memfd), so they go with the last
// process that maps them, and nothing appears in /dev/shm.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "tests/support/run_helpers.h"

namespace {

using namespace pshard;
using pshard::testing::BackgroundJob;
using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::source_dir;
using Clock = std::chrono::steady_clock;

std::set<std::string> dev_shm() {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) names.insert(e.path().filename());
  return names;
}

// How many shared-memory segments of pshard process `pid` maps ("/memfd:pshard ..." lines of /proc/PID/maps).
int segments_of(int64_t pid) {
  const std::string maps = read_file("/proc/" + std::to_string(pid) + "/maps");
  int n = 0;
  for (size_t at = maps.find("/memfd:pshard"); at != std::string::npos; at = maps.find("/memfd:pshard", at + 1)) ++n;
  return n;
}

bool alive(int64_t pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0; }

// Starts a 1 server x 2 worker shm job, waits until every process maps its segments, SIGKILLs the node of `role`
// and checks that the job ends and nothing is left.
void kill_and_check(const std::string& role) {
  const std::string dir = fresh_dir("shm-cleanup-" + role);
  const std::set<std::string> shm_before = dev_shm();
  const std::string run = dir + "/run";
  BackgroundJob job(pshard_bin() + " launch --servers 1 --workers 2 --timeout 120 --config " + source_dir() +
                        "/configs/linreg_sgd.toml --set train.epochs=100000 --set cluster.transport=shm --run-dir " +
                        run,
                    dir + "/log");
  ASSERT_TRUE(job.started());
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (!std::filesystem::exists(run + "/cluster.json") && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(std::filesystem::exists(run + "/cluster.json")) << read_file(dir + "/log");
  Json map = Json::parse(read_file(run + "/cluster.json"), run + "/cluster.json");
  std::vector<int64_t> pids;
  int64_t victim = -1;
  for (const Json& n : map.at("nodes").elements()) {
    if (n.at("role").as_string() == "coordinator") continue;
    pids.push_back(n.at("pid").as_int());
    if (n.at("role").as_string() == role && victim < 0) victim = n.at("pid").as_int();
  }
  ASSERT_EQ(pids.size(), 3u);
  ASSERT_GT(victim, 0);
  // The server maps its weights segment and both push segments; each worker its push segment and the weights.
  bool mapped = false;
  while (!mapped && Clock::now() < until) {
    mapped = segments_of(pids[0]) > 0 && segments_of(pids[1]) > 0 && segments_of(pids[2]) > 0;
    if (!mapped) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(mapped) << "the job's processes never mapped shared memory\n" << read_file(dir + "/log");
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  std::optional<int> rc = job.wait(std::chrono::seconds(90));
  ASSERT_TRUE(rc.has_value()) << "the job did not end after its " << role << " was killed\n" << read_file(dir + "/log");
  EXPECT_NE(*rc, 0) << read_file(dir + "/log");
  for (int64_t pid : pids) EXPECT_FALSE(alive(pid)) << "process " << pid << " outlived the job";
  // The segments went with their processes (memfd); nothing was ever put in /dev/shm.
  EXPECT_EQ(dev_shm(), shm_before);
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(SharedMemoryCleanup, AServerKilledWithSigkillLeavesNoSegment) { kill_and_check("server"); }

TEST(SharedMemoryCleanup, AWorkerKilledWithSigkillLeavesNoSegment) { kill_and_check("worker"); }

}  // namespace
