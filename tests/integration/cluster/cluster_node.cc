// A stand-in server/worker process for the control-plane integration tests:
// speaks the launch contract (--coordinator EP --config FILE [--set K=V]...
// [--run-dir DIR] [--bind EP]; env PSHARD_JOB_TOKEN, PSHARD_RANK) and uses
// ClusterClient like `pshard server|worker` do. A process given --bind is a
// server, otherwise a worker. Behaviour from the environment:
//   TEST_STEPS=N          workers "train" N x 50 ms, then leave (default 3)
//   TEST_FOREVER=1        workers run until the job is stopped or aborted
//   TEST_FAIL_RANK=R      worker R leaves with status TEST_FAIL_CODE (default 3) and exits with it
// It prints "node <role> <rank> pid <pid>" once registered, and every job
// event as "event <kind> <role> <rank> t_ms=<wall clock ms> reason=<text>".
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "common/config/config.h"
#include "common/control/cluster_client.h"
#include "common/error.h"
#include "common/util/args.h"
#include "common/util/log.h"

namespace {

long long wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

int run(int argc, char** argv) {
  pshard::ArgParser p("cluster_node", "test node for the control plane");
  p.add_option("coordinator", "EP", "coordinator endpoint", true);
  p.add_option("config", "FILE", "config", true);
  p.add_multi("set", "K=V", "override");
  p.add_option("run-dir", "DIR", "run directory");
  p.add_option("bind", "EP", "server endpoint (makes this a server)");
  if (!p.parse(std::vector<std::string>(argv + 1, argv + argc))) return 0;
  pshard::Config cfg = pshard::Config::from_file(p.get("config"), p.get_all("set"));
  const bool server = p.has("bind");

  pshard::ClusterClient::Options o;
  o.coordinator = p.get("coordinator");
  o.role = server ? pshard::NodeRole::kServer : pshard::NodeRole::kWorker;
  o.endpoint = server ? p.get("bind") : "";
  const char* token = std::getenv("PSHARD_JOB_TOKEN");
  o.job_token = token ? token : "";
  o.heartbeat_interval = std::chrono::milliseconds(cfg.get_int("cluster.heartbeat_interval_ms"));
  o.heartbeat_timeout = std::chrono::milliseconds(cfg.get_int("cluster.heartbeat_timeout_ms"));
  o.rendezvous_timeout = std::chrono::milliseconds(cfg.get_int("cluster.rendezvous_timeout_ms"));
  pshard::ClusterClient cluster(o);
  const std::string role = server ? "server" : "worker";
  pshard::log::configure(role + " " + std::to_string(cluster.rank()), pshard::log::Level::kInfo);
  std::printf("node %s %u pid %d\n", role.c_str(), cluster.rank(), static_cast<int>(getpid()));
  std::fflush(stdout);
  static std::atomic<bool> aborted{false};
  cluster.on_event([](const pshard::ClusterEvent& e) {
    if (e.kind == pshard::ClusterEvent::Kind::kAbort) aborted = true;
    const char* kind = e.kind == pshard::ClusterEvent::Kind::kNodeDead           ? "node-dead"
                       : e.kind == pshard::ClusterEvent::Kind::kAbort            ? "abort"
                       : e.kind == pshard::ClusterEvent::Kind::kWorkerLeft       ? "worker-left"
                       : e.kind == pshard::ClusterEvent::Kind::kWorkerRegistered ? "worker-registered"
                                                                                 : "shutdown";
    std::printf("event %s %s %u t_ms=%lld reason=%s\n", kind, pshard::role_name(e.node.role), e.node.rank, wall_ms(),
                e.reason.c_str());
    std::fflush(stdout);
  });
  cluster.barrier("start", std::chrono::seconds(30));

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  if (!server) {
    if (env_int("TEST_FAIL_RANK", -1) == static_cast<int>(cluster.rank())) {
      int code = env_int("TEST_FAIL_CODE", 3);
      std::printf("failing on purpose with status %d\n", code);
      std::fflush(stdout);
      cluster.leave(code);
      return code;
    }
    if (env_int("TEST_FOREVER", 0)) {
      while (!cluster.stopping() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      return cluster.stopping() ? 1 : 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50 * env_int("TEST_STEPS", 3)));
    cluster.leave(0);
    std::printf("worker done\n");
    return 0;
  }
  while (!cluster.stopping() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  cluster.leave(aborted ? 1 : 0);
  std::printf("server done (%s)\n", aborted ? "job aborted" : "shutdown");
  return aborted ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const pshard::Error& e) {
    std::fprintf(stderr, "cluster_node: error: %s\n", e.what());
    return 1;
  }
}
