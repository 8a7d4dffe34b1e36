// The processes of a `pshard launch --hosts` job: which host runs what, and one ssh child per host.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/transport/curve.h"
#include "launcher/job_plan.h"
#include "launcher/local_job.h"
#include "launcher/remote/host_list.h"

namespace pshard::remote {

struct RemoteJobOptions {
  std::vector<RemoteHost> hosts;
  int64_t servers = 0;           // spread round robin over the hosts, server s on host s % hosts
  int port = 0;                  // the coordinator's port on the first host (0: a random one in 20000..32767)
  std::string remote_pshard;     // the pshard executable on every host
  std::vector<std::string> ssh;  // ssh_command(PSHARD_SSH)
  transport::CurveKeys keys;     // security.curve: the job's keys (plan.key_dir set); empty: plaintext
  bool assign_gpus = false;      // train.device = cuda
  int64_t grace_ms = 5000;
  // cluster.failure_policy = continue: a worker's death leaves the others running (the coordinator decides); a host
  // that runs workers alone may then end early without ending the job.
  bool workers_may_fail = false;
  // cluster.restart_workers: a dead worker is started again on its host, at most this many times (0: never); it
  // rejoins the running job.
  int max_worker_restarts = 0;
  // An elastic job (--workers MIN:MAX): a worker that dies is dropped, and the job goes on (LocalJob::Options).
  bool drops_workers = false;
};

// Placement: the coordinator on the first host (bound to all its addresses, reached at the first host's address),
// server s on host s % H bound to that host's address (port chosen by the server), and each host's workers,
// ranked host by host in --hosts order. Sets plan.coordinator and plan.executable, adds one ssh child per host
// (host_share.h) to `job` and returns one line per host saying what it runs. Host names are resolved here
// (getaddrinfo): an Error names a host that does not resolve, before anything starts.
std::vector<std::string> add_host_processes(const RemoteJobOptions& o, JobPlan& plan, LocalJob& job);
// The same children without a job (each one's share is its stdin_text), and the placement lines when asked for.
std::vector<ChildSpec> host_processes(const RemoteJobOptions& o, JobPlan& plan,
                                      std::vector<std::string>* placement = nullptr);

// Throws pshard::Error naming a host that would run nothing (no worker, and no server with `servers` servers).
void check_placement(const std::vector<RemoteHost>& hosts, int64_t servers);

}  // namespace pshard::remote
