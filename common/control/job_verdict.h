// The coordinator's verdicts, as pure functions of what it knows of the job: what a node's failure does to the job
// (failure_verdict), and whether the job is still running, finished, finished without some workers, stopped at a
// checkpoint, or over because every worker died; and why, in the words the log and the summary carry. Tested without
// sockets (job_verdict_test); the coordinator only acts on them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pshard {

// One worker process as the verdict sees it.
struct WorkerRecord {
  enum class State { kRegistered, kLive, kLeft, kDead };
  uint32_t rank = 0;
  State state = State::kRegistered;
  bool waiting_to_join = false;  // an elastic job's joiner that waits for an epoch's start: holds nothing up
  bool trained = false;          // it pushed the job's last step: its death after costs the job nothing
};

struct JobVerdict {
  enum class Kind {
    kRunning,      // a worker still trains
    kFinished,     // every worker finished
    kWorkersLost,  // the job ran to its end without some workers (cluster.failure_policy = continue)
    kStopped,      // every worker stopped at a checkpoint on SIGTERM (checkpoint.on_sigterm = checkpoint)
    kAllDead,      // no worker left successfully
  };
  Kind kind = Kind::kRunning;
  std::string reason;  // empty while running
};

// A node that died (silent, or left with a failure status), is stuck, or left short of the others' pushes.
struct FailedNode {
  bool server = false;   // a server (else a worker)
  bool trained = false;  // a worker that pushed the job's last step
};

// Where the job stands when a node fails.
enum class JobPhase { kRendezvous, kRunning, kShuttingDown, kDone };

struct FailureVerdict {
  enum class Kind {
    kCountedFinished,  // a worker that had pushed the job's last step: its part is done, under any policy
    kDuringShutdown,   // the job was ending anyway: nothing to decide
    kAbort,            // the job ends: cluster.failure_policy = abort, or a dead server (its slices' only copy)
    kContinue,         // the others go on without it (cluster.failure_policy = continue, or an elastic job)
  };
  Kind kind = Kind::kContinue;
  std::string reason;  // kAbort: the abort's reason, naming the policy; else `reason` as given
};

// What a node's failure does to the job, `reason` saying what happened to it ("worker 1 (host:pid) is dead: ..."),
// under cluster.failure_policy (`continue_policy`: continue, or an elastic job).
FailureVerdict failure_verdict(const FailedNode& node, JobPhase phase, bool continue_policy, const std::string& reason);

// While the job runs: kRunning while a worker is live (a joiner waiting for an epoch aside); then kAllDead ("every
// worker is dead") when none left successfully, else kFinished ("job finished: L of N workers left successfully"),
// on which the coordinator tells the servers to shut down.
JobVerdict workers_done(const std::vector<WorkerRecord>& workers, uint32_t num_workers);

// After the servers left a job whose workers were done (`finished` is workers_done's reason): kStopped when a worker
// stopped at a checkpoint (`stopped_why`, its words); else kWorkersLost naming each worker rank that no process
// finished (left, or trained to the last step), with why from `lost_why` (fixed-size jobs only: an elastic job's
// workers come and go, its epoch lines say who trained); else kFinished.
JobVerdict ran_to_end(const std::vector<WorkerRecord>& workers, uint32_t num_workers, bool elastic,
                      const std::string& stopped_why, const std::map<uint32_t, std::string>& lost_why,
                      const std::string& finished);

}  // namespace pshard
