// Control plane with real processes: pshard launch end to end, a failing
// worker, Ctrl-C, and SIGKILLed workers under both failure policies.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "common/util/child_process.h"
#include "launcher/local_job.h"

namespace pshard {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
namespace fs = std::filesystem;

const std::string kNode = PSHARD_CLUSTER_NODE;
const std::string kPshard = PSHARD_EXE;

long long wall_ms() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A scratch directory with a config file and an output file; removed at the end.
struct Scratch {
  fs::path dir;
  std::string config, output;
  int out_fd = -1;
  explicit Scratch(const std::string& cluster_toml) {
    char tmpl[] = "/tmp/pshard_cluster_XXXXXX";
    dir = ::mkdtemp(tmpl);
    config = (dir / "job.toml").string();
    std::ofstream(config) << "[cluster]\n" << cluster_toml;
    output = (dir / "out.txt").string();
    out_fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
  }
  ~Scratch() {
    ::close(out_fd);
    fs::remove_all(dir);
  }
  std::string read() const {
    std::ifstream in(output);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // Waits until `needle` occurs `count` times in the output.
  bool wait_for_text(const std::string& needle, int count, milliseconds timeout) const {
    auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      std::string s = read();
      int n = 0;
      for (size_t pos = s.find(needle); pos != std::string::npos; pos = s.find(needle, pos + 1)) ++n;
      if (n >= count) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  }
  LocalJob::Options job_options() const {
    LocalJob::Options o;
    o.out_fd = o.err_fd = out_fd;
    o.grace = milliseconds(3000);
    o.timeout = milliseconds(90000);  // a hung test fails instead of hanging
    return o;
  }
};

const char* kFastHeartbeats =
    "heartbeat_interval_ms = 100\nheartbeat_timeout_ms = 1000\nrendezvous_timeout_ms = 30000\n";

std::vector<std::string> launch_argv(const Scratch& s, int servers, int workers) {
  return {kPshard,        "launch",
          "--servers",    std::to_string(servers),
          "--workers",    std::to_string(workers),
          "--config",     s.config,
          "--run-dir",    (s.dir / "run").string(),
          "--server-exe", kNode,
          "--worker-exe", kNode,
          "--grace-ms",   "2000"};
}

bool gone(long long pid) { return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

TEST(ClusterProcesses, LaunchRunsAWholeJobToACleanEnd) {
  Scratch s(kFastHeartbeats);
  LocalJob job(s.job_options());
  job.add({"launch", launch_argv(s, 2, 3), {}});
  LocalJob::Result r = job.run();
  std::string out = s.read();
  EXPECT_EQ(r.exit_code, 0) << r.failure << "\n" << out;
  for (int w = 0; w < 3; ++w) {
    EXPECT_NE(out.find("[worker " + std::to_string(w) + "] node worker " + std::to_string(w) + " pid"),
              std::string::npos)
        << out;
  }
  for (int sv = 0; sv < 2; ++sv) {
    EXPECT_NE(out.find("[server " + std::to_string(sv) + "] server done (shutdown)"), std::string::npos) << out;
  }
  EXPECT_NE(out.find("[coordinator] info: job finished: 3 of 3 workers left successfully"), std::string::npos) << out;
  EXPECT_NE(out.find("job finished: every process exited successfully"), std::string::npos) << out;
  std::ifstream cluster_json(s.dir / "run" / "cluster.json");
  std::stringstream js;
  js << cluster_json.rdbuf();
  EXPECT_NE(js.str().find("\"num_servers\": 2, \"num_workers\": 3"), std::string::npos) << js.str();
  EXPECT_TRUE(fs::exists(s.dir / "run" / "config.toml"));
}

TEST(ClusterProcesses, LaunchStopsEverythingWhenAWorkerFailsAndNamesIt) {
  Scratch s(kFastHeartbeats);
  LocalJob job(s.job_options());
  job.add({"launch", launch_argv(s, 1, 3), {"TEST_FAIL_RANK=1", "TEST_FOREVER=1"}});
  auto t0 = Clock::now();
  LocalJob::Result r = job.run();
  std::string out = s.read();
  EXPECT_LT(Clock::now() - t0, milliseconds(20000));
  EXPECT_EQ(r.exit_code, 1) << out;
  // The headline names worker 1 and its status: its own exit, or, when the coordinator's abort ended first (worker
  // 1's leave came before its process had exited), the coordinator's words about it.
  EXPECT_TRUE(std::regex_search(
      out,
      std::regex(R"(job failed: (worker 1 \(pid \d+\) exited with status 3|coordinator \(pid \d+\) exited )"
                 R"(with status 1: aborting the job: worker 1 \(host [^)]*\) is dead: it left with exit status 3))")))
      << out;
}

TEST(ClusterProcesses, SigintToLaunchStopsEveryChild) {
  Scratch s(kFastHeartbeats);
  LocalJob job(s.job_options());
  job.add({"launch", launch_argv(s, 2, 2), {"TEST_FOREVER=1"}});
  job.start();
  ASSERT_TRUE(s.wait_for_text("] node ", 4, milliseconds(30000))) << s.read();
  std::vector<long long> pids;
  std::string out = s.read();
  std::regex node_line(R"(node (server|worker) \d+ pid (\d+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), node_line); it != std::sregex_iterator(); ++it) {
    pids.push_back(std::stoll((*it)[2]));
  }
  ASSERT_EQ(pids.size(), 4u) << out;
  ::kill(static_cast<pid_t>(job.pids()[0]), SIGINT);
  auto r = job.wait_for(milliseconds(20000));
  ASSERT_TRUE(r.has_value()) << s.read();
  ASSERT_EQ(r->children.size(), 1u);
  EXPECT_EQ(r->children[0].exit_code, 128 + SIGINT) << s.read();
  EXPECT_NE(s.read().find("interrupted by SIGINT"), std::string::npos) << s.read();
  // No orphans: every node process is gone (reaped by launch).
  auto deadline = Clock::now() + milliseconds(3000);
  for (long long pid : pids) {
    while (!gone(pid) && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(20));
    EXPECT_TRUE(gone(pid)) << "process " << pid << " survived";
  }
}

// Starts `pshard coordinator` + 1 server + `workers` workers (worker ranks pinned by PSHARD_RANK).
void add_job(LocalJob& job, const Scratch& s, int workers, const std::string& port) {
  const std::string ep = "tcp://127.0.0.1:" + port;
  const std::vector<std::string> env = {"PSHARD_JOB_TOKEN=tok", "TEST_FOREVER=1"};
  job.add({"coordinator",
           {kPshard, "coordinator", "--servers", "1", "--workers", std::to_string(workers), "--bind", ep, "--config",
            s.config},
           env,
           false,
           true});
  auto server_env = env;
  server_env.push_back("PSHARD_RANK=0");
  job.add({"server 0",
           {kNode, "--coordinator", ep, "--config", s.config, "--bind",
            "tcp://127.0.0.1:" + std::to_string(pick_free_port())},
           server_env});
  for (int w = 0; w < workers; ++w) {
    auto wenv = env;
    wenv.push_back("PSHARD_RANK=" + std::to_string(w));
    job.add({"worker " + std::to_string(w), {kNode, "--coordinator", ep, "--config", s.config}, wenv, true});
  }
}

TEST(ClusterProcesses, SigkilledWorkerIsReportedDeadToEveryNodeAndPolicyContinueKeepsTheRest) {
  Scratch s(std::string(kFastHeartbeats) + "failure_policy = \"continue\"\n");
  LocalJob job(s.job_options());
  add_job(job, s, 3, std::to_string(pick_free_port()));
  job.start();
  ASSERT_TRUE(s.wait_for_text("] node ", 4, milliseconds(30000))) << s.read();
  const long long killed_at = wall_ms();
  ::kill(static_cast<pid_t>(job.pids()[3]), SIGKILL);  // worker 1
  // Server 0, worker 0 and worker 2 each hear about it within the heartbeat timeout (+ slack).
  ASSERT_TRUE(s.wait_for_text("event node-dead worker 1", 3, milliseconds(1000 + 3000))) << s.read();
  std::string out = s.read();
  std::regex ev(R"(\[(server 0|worker 0|worker 2)\] event node-dead worker 1 t_ms=(\d+))");
  int seen = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), ev); it != std::sregex_iterator(); ++it) {
    long long delay = std::stoll((*it)[2]) - killed_at;
    EXPECT_LE(delay, 1000 + 1000) << (*it)[1] << " heard after " << delay << " ms";
    ++seen;
  }
  EXPECT_EQ(seen, 3) << out;
  // Policy continue: nobody else stops.
  EXPECT_FALSE(job.wait_for(milliseconds(1500)).has_value()) << s.read();
  EXPECT_EQ(s.read().find("event abort"), std::string::npos) << s.read();
  job.stop("test over");
  auto r = job.wait_for(milliseconds(10000));
  ASSERT_TRUE(r.has_value());
}

TEST(ClusterProcesses, SigkilledWorkerUnderPolicyAbortEndsTheJobNamingIt) {
  Scratch s(std::string(kFastHeartbeats) + "failure_policy = \"abort\"\n");
  LocalJob job(s.job_options());
  add_job(job, s, 2, std::to_string(pick_free_port()));
  job.start();
  ASSERT_TRUE(s.wait_for_text("] node ", 3, milliseconds(30000))) << s.read();
  const long long worker_pid = job.pids()[3];
  auto killed = Clock::now();
  ::kill(static_cast<pid_t>(worker_pid), SIGKILL);  // worker 1
  auto r = job.wait_for(milliseconds(1000 + 5000));
  ASSERT_TRUE(r.has_value()) << "the job did not end within heartbeat timeout + 5 s\n" << s.read();
  EXPECT_LT(Clock::now() - killed, milliseconds(1000 + 5000));
  EXPECT_EQ(r->children[0].exit_code, 1);  // the coordinator failed the job
  std::string out = s.read();
  std::string named = "worker 1 (host ";
  EXPECT_TRUE(
      std::regex_search(out, std::regex(R"(\[coordinator\] error: aborting the job: worker 1 \(host [^,]+, pid )" +
                                        std::to_string(worker_pid) + R"(\) is dead: no heartbeat for 1000 ms)")))
      << out;
  EXPECT_NE(out.find("[server 0] event abort worker 1"), std::string::npos) << out;
  EXPECT_NE(out.find("[worker 0] event abort worker 1"), std::string::npos) << out;
}

}  // namespace
}  // namespace pshard
