// A node's connection to the coordinator: registration, the cluster map,
// barriers, heartbeats and job events (dead nodes, abort, shutdown).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/control/cluster_map.h"
#include "common/metrics/trace.h"
#include "common/run/node_env.h"
#include "common/transport/curve.h"
#include "common/util/json.h"

namespace pshard {

class Config;

// Something the coordinator tells every node while the job runs.
struct ClusterEvent {
  enum class Kind {
    kNodeDead,    // `node` stopped sending heartbeats (or its process ended); policy decides what happens
    kAbort,       // the job is over with an error: `reason` says why (e.g. "worker 2 (host a, pid 7) is dead")
    kShutdown,    // the job finished normally; leave when done
    kWorkerLeft,  // (servers) `node`, a worker, left after its last push while others train on: wait for it no more
    kWorkerRegistered,  // (servers) `node`, a worker, registered while the job ran (a restart, a joiner): its new pid
  };
  Kind kind = Kind::kShutdown;
  NodeInfo node;       // kNodeDead: which node
  std::string reason;  // human-readable cause
};

// Registers this process with the coordinator and keeps it alive with
// heartbeats from a background thread that owns the coordinator socket.
//
//   ClusterClient::Options opt = ClusterClient::Options::from_config(cfg, NodeRole::kServer,
//                                                                   "tcp://127.0.0.1:47000",
//                                                                   NodeEnv::from_environment());
//   opt.endpoint = "tcp://127.0.0.1:47011";       // where peers reach this server
//   ClusterClient cluster(opt);                    // blocks until every node registered
//   cluster.on_event([&](const ClusterEvent& e) { ... });   // runs on the client's thread: keep it short
//   cluster.barrier("init", std::chrono::seconds(60));
//   ...
//   cluster.leave();                               // or the destructor does it
class ClusterClient {
 public:
  struct Options {
    std::string coordinator;  // ZeroMQ endpoint of the coordinator ROUTER
    NodeRole role = NodeRole::kWorker;
    int64_t requested_rank = -1;      // -1: the coordinator assigns the next free rank
    std::string endpoint;             // servers: the endpoint peers connect to; workers: "" (or their own, for logs)
    std::string host;                 // this host's name (default: gethostname())
    std::string job_token;            // must equal the coordinator's token, else registration is refused
    transport::CurveKeys curve;       // empty: plaintext; else CurveZMQ with the job's keys
    uint64_t layout_fingerprint = 0;  // hash of the slice assignment; the coordinator checks all non-zero values agree
    // Workers: this process restarts its rank (pshard worker --join) and takes over from a registration that still
    // looks live. False (a program's ps.init(), a child process that inherited the job's environment): the
    // registration is refused while the requested rank's worker is alive.
    bool replaces_live = false;
    std::chrono::milliseconds heartbeat_interval{500};
    std::chrono::milliseconds heartbeat_timeout{5000};  // coordinator silent this long -> kAbort event locally
    std::chrono::milliseconds rendezvous_timeout{60000};

    // A node of `role` joining the job at `coordinator`: the heartbeat and rendezvous timings from the config
    // (cluster.heartbeat_interval_ms, cluster.heartbeat_timeout_ms, cluster.rendezvous_timeout_ms), the job token and
    // the requested rank from the node's environment (PSHARD_JOB_TOKEN, PSHARD_RANK). What only the caller knows is
    // the caller's: its CurveZMQ keys, its endpoint (servers), its layout fingerprint (workers), a rank asked for on
    // its command line.
    static Options from_config(const Config& cfg, NodeRole role, const std::string& coordinator, const NodeEnv& env);
  };

  // Registers and waits for the full cluster map. Throws pshard::Error when
  // the token is refused (with the coordinator's reason), the layout
  // fingerprints disagree, or the rendezvous times out (naming who is missing
  // when known).
  explicit ClusterClient(const Options& options);
  ~ClusterClient();  // leaves (if not done) and joins the background thread
  ClusterClient(const ClusterClient&) = delete;
  ClusterClient& operator=(const ClusterClient&) = delete;

  const ClusterMap& map() const;
  uint32_t rank() const;  // this node's rank within its role
  // Workers of an elastic job: this worker registered while the job ran (it joins at an epoch's start).
  bool joins_running() const;

  // Blocks until every live node of this node's role (workers: every worker) has entered barrier `name`.
  // Throws pshard::Error on timeout or when the job is aborted meanwhile.
  void barrier(const std::string& name, std::chrono::milliseconds timeout);
  // The same barrier, where each node may raise a flag: true when some node of the round raised it (the same answer
  // on every node). The workers agree this way on a step to skip (a non-finite gradient on any of them).
  bool barrier_vote(const std::string& name, bool vote, std::chrono::milliseconds timeout);

  // Elastic jobs (workers): waits at the start of `epoch`, whose first step is `step`, until the coordinator says who
  // trains it. A worker that joined the running job passes epoch 0 and step -1 and gets the plan of the epoch it
  // joins with (`join` set): it then has the servers count it from the plan's first step and calls epoch_joined().
  // Throws pshard::Error on timeout or when the job is aborted meanwhile; nullopt when the job ended (shutdown)
  // before the epoch began (a joining worker that came too late).
  //
  //   std::optional<EpochPlan> plan = cluster.enter_epoch(epoch, step, std::chrono::minutes(10));
  std::optional<EpochPlan> enter_epoch(int64_t epoch, int64_t step, std::chrono::milliseconds timeout);
  void epoch_joined(int64_t epoch);

  // Async jobs with train.batch_assignment = dynamic (workers): the next at most `count` batches of `epoch`, which
  // holds `batches` (control.capnp BatchClaim), as [first, first + count); count 0 once the epoch's batches are all
  // taken. Throws pshard::Error on timeout or when the job is aborted meanwhile (a claim the coordinator refuses aborts
  // it, with the reason).
  struct BatchGrant {
    int64_t first = 0;
    int64_t count = 0;
  };
  BatchGrant claim_batches(int64_t epoch, int64_t batches, uint32_t count, std::chrono::milliseconds timeout);

  // Sets the callback for job events; it runs on the client's background
  // thread. Events that arrived before the callback was set are delivered
  // when it is set.
  void on_event(std::function<void(const ClusterEvent&)> callback);

  // True once a kAbort or kShutdown event has arrived.
  bool stopping() const;

  // The coordinator's clock minus this process's, from the heartbeat echoes so far (the first one
  // right after rendezvous): trace timestamps are moved onto the coordinator's clock with it.
  ClockOffset clock_offset() const;

  // Sends one metrics event (docs/METRICS.md: "start", "step",
  // "worker_epoch") to the coordinator, which writes the job's
  // metrics.jsonl. Does not block; ordered with barrier() and leave().
  void report(const Json& event);

  // Workers: a fact of the job the coordinator acts on (control.capnp JobFact): kTrained (the job's last step was
  // pushed), kRejoined at `step` (a restarted worker), kModelSaved to `path`. Does not block; ordered with report().
  enum class JobFact { kTrained = 0, kRejoined = 1, kModelSaved = 2 };
  void tell(JobFact fact, int64_t step = 0, const std::string& path = std::string());

  // Servers: tells the coordinator that `workers` are stuck (alive, but holding the job up; `reason` is the server's
  // account, quoted in what the coordinator says). The coordinator applies the failure policy to them as to dead
  // workers. Does not block; ordered with report().
  //
  //   cluster.report_stuck({1}, "fc1.weight[slice 0]: the read for step 12 waited 6.4 s for the push of worker 1");
  void report_stuck(const std::vector<uint32_t>& workers, const std::string& reason);

  // Tells the coordinator this node is done (exit status 0 = success; `reason`: the error that ended
  // it, quoted in the coordinator's abort) and stops heartbeats. Idempotent.
  //
  //   try { train(); } catch (const std::exception& e) { cluster.leave(1, e.what()); throw; }
  // A worker says how many steps it pushed (its highest step + 1; -1: not said): the coordinator compares the
  // workers' counts to tell a worker that left early from the ones that went on.
  void leave(int exit_status = 0, const std::string& reason = "", int64_t steps_pushed = -1);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pshard
