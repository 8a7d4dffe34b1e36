// The coordinator: rendezvous, ranks, cluster map, barriers, heartbeats,
// failure policy and shutdown of one pshard job (`pshard coordinator`).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/config/config.h"
#include "common/control/cluster_map.h"
#include "common/metrics/trace.h"
#include "common/transport/curve.h"

namespace pshard {

// One job's coordinator. Binds a ZeroMQ ROUTER; every server and worker
// registers through a ClusterClient. Usable in-process (tests, benchmarks)
// or as its own process (`pshard coordinator`). Its internal parts sit beside
// it, one concern each: rendezvous.h (who joins, ranks, the map), barriers.h,
// liveness.h (heartbeats, failure policy) and job_metrics.h (metrics.jsonl,
// the summary, cluster.json).
//
//   Coordinator::Options opt = Coordinator::Options::from_config(cfg, /*servers=*/2, /*workers=*/4);
//   opt.bind = "tcp://127.0.0.1:0";                  // port 0: the OS picks one
//   opt.job_token = getenv("PSHARD_JOB_TOKEN");
//   Coordinator coord(opt);                           // binds now; throws pshard::Error if it cannot
//   std::string ep = coord.endpoint();                // "tcp://127.0.0.1:41234": hand to the nodes
//   Coordinator::Result r = coord.run();              // until the job ends (or coord.start() + wait_for())
//   return r.exit_code;
class Coordinator {
 public:
  enum class FailurePolicy {
    kAbort,     // any dead node ends the job
    kContinue,  // a dead worker is reported (node-dead) and the others go on; a dead server still aborts
  };

  struct Options {
    uint32_t num_servers = 1;
    uint32_t num_workers = 1;  // elastic jobs: the most workers
    // Elastic jobs (cluster.min_workers > 0): the job starts once this many workers registered, and each epoch
    // trains with every worker then in the job (at least this many; more join at an epoch's start, up to
    // num_workers). A dead worker is dropped, as under failure policy continue. 0: exactly num_workers workers.
    uint32_t min_workers = 0;
    std::string bind = "tcp://127.0.0.1:0";  // ROUTER endpoint; port 0 picks a free port
    std::string job_token;                   // registrations with another token are refused
    transport::CurveKeys curve;              // empty: plaintext; else CurveZMQ, only the job's clients connect
    FailurePolicy failure_policy = FailurePolicy::kAbort;
    std::chrono::milliseconds heartbeat_interval{500};    // period nodes are told to use (and the check granularity)
    std::chrono::milliseconds heartbeat_timeout{5000};    // silence after which a node is dead
    std::chrono::milliseconds rendezvous_timeout{60000};  // every node must have registered by then
    std::chrono::milliseconds shutdown_timeout{10000};    // after shutdown, how long servers get to leave
    std::string run_dir;                                  // if set, cluster.json (the map) is written there
    TraceWindow
        trace;  // trace.steps: the workers' step lines of these steps are marked in RUN_DIR/trace/coordinator.json

    // Reads cluster.failure_policy, cluster.min_workers, cluster.heartbeat_*_ms and cluster.rendezvous_timeout_ms.
    static Options from_config(const Config& config, uint32_t num_servers, uint32_t num_workers);
  };

  // The exit code of a job aborted because a server died (no heartbeat, or it left early): `pshard
  // launch` restarts such a job under cluster.server_failure_policy = restart, whichever process
  // ended first (a frozen server does not exit by itself).
  static constexpr int kExitServerDead = 3;
  // The exit code of a job that ran to its end under cluster.failure_policy = continue without some of its
  // workers (dead, or left before the end of the job): its records are complete, but not every worker finished.
  static constexpr int kExitWorkersLost = 4;

  // How the job ended: exit_code 0 = every worker left successfully; kExitRecordsIncomplete (common/error.h)
  // = they did, but a write to the run directory failed; kExitWorkersLost; kExitServerDead; 1 = any other abort.
  struct Result {
    int exit_code = 0;
    std::string reason;  // "job finished: 4 workers left" or why it was aborted
  };

  explicit Coordinator(const Options& options);  // binds the ROUTER
  ~Coordinator();                                // stops (aborting a running job) and joins
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // The bound endpoint with the real port ("tcp://127.0.0.1:41234").
  const std::string& endpoint() const;

  // Runs the job on the calling thread until it ends.
  Result run();
  // Runs the job on a background thread owned by this object.
  void start();
  // Waits for a start()ed job to end; nullopt on timeout.
  std::optional<Result> wait_for(std::chrono::milliseconds timeout);
  // Ends the job from any thread: every node gets an abort with `reason`.
  void request_stop(const std::string& reason);

  // The cluster map once the rendezvous completed (empty before).
  ClusterMap map() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pshard
