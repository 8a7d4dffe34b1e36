// Placement of a `pshard launch --hosts` job and its ssh children (see remote_job.h).
#include "launcher/remote/remote_job.h"

#include <random>

#include "common/error.h"
#include "launcher/remote/host_share.h"
#include "launcher/scheduler/node_address.h"

namespace pshard::remote {

void check_placement(const std::vector<RemoteHost>& hosts, int64_t servers) {
  for (size_t i = 1; i < hosts.size(); ++i) {  // the first host runs the coordinator
    if (hosts[i].workers == 0 && static_cast<int64_t>(i) >= servers) {
      throw Error("--hosts: " + hosts[i].name + " would run nothing (no worker and, with --servers " +
                  std::to_string(servers) + ", no server): give it workers or leave it out");
    }
  }
}

std::vector<ChildSpec> host_processes(const RemoteJobOptions& o, JobPlan& plan, std::vector<std::string>* placement) {
  check_placement(o.hosts, o.servers);
  std::vector<std::string> addresses;
  for (const RemoteHost& h : o.hosts) addresses.push_back(scheduler::resolve_ipv4(h.name));
  int port = o.port;
  if (port == 0) {
    // No free port can be asked for on another host; a port taken there fails the coordinator's bind, named. Below
    // Linux's ephemeral range (32768..60999 by default): a port in it may be held by a connection of the host, or by
    // its TIME_WAIT after an earlier job there closed it, which also fails the bind.
    std::random_device random;
    port = 20000 + static_cast<int>(random() % 12768);
  }
  plan.coordinator = "tcp://" + addresses.front() + ":" + std::to_string(port);
  plan.executable = o.remote_pshard;
  const int64_t num_hosts = static_cast<int64_t>(o.hosts.size());
  std::vector<ChildSpec> children;
  int64_t next_worker = 0;
  for (int64_t i = 0; i < num_hosts; ++i) {
    const RemoteHost& h = o.hosts[static_cast<size_t>(i)];
    HostShare share;
    share.host = h.name;
    share.run_dir = plan.run_dir;
    share.key_dir = plan.key_dir;
    share.keys = o.keys;
    share.assign_gpus = o.assign_gpus;
    share.grace_ms = o.grace_ms;
    share.coordinator = plan.coordinator;
    share.job_token = plan.job_token;
    share.drops_workers = o.drops_workers;
    std::string what;
    if (i == 0) {
      share.processes.push_back({plan.coordinator_process("tcp://0.0.0.0:" + std::to_string(port)), -1});
      what = "coordinator";
    }
    for (int64_t s = i; s < o.servers; s += num_hosts) {
      share.processes.push_back({plan.server_process(s, "tcp://" + addresses[static_cast<size_t>(i)] + ":0"), -1});
      what += (what.empty() ? "" : ", ") + std::string("server ") + std::to_string(s);
    }
    plan.workers_on_host = h.workers;  // train.threads = 0 shares the host's cores among its workers
    for (int64_t l = 0; l < h.workers; ++l) {
      RemoteProcess w{plan.worker_process(next_worker + l, {}, l), l};
      w.spec.may_fail = o.workers_may_fail;  // the coordinator decides
      if (o.max_worker_restarts > 0) {
        w.restart = plan.rejoining_worker(w.spec);
        w.max_restarts = o.max_worker_restarts;
      }
      share.processes.push_back(w);
    }
    if (h.workers > 0) {
      what += (what.empty() ? "" : ", ") + std::string(h.workers == 1 ? "worker " : "workers ") +
              std::to_string(next_worker) + (h.workers > 1 ? "-" + std::to_string(next_worker + h.workers - 1) : "");
    }
    next_worker += h.workers;
    if (placement) placement->push_back(h.name + " (" + addresses[static_cast<size_t>(i)] + "): " + what);
    ChildSpec c = ssh_host_process(h, share, o.ssh, o.remote_pshard);
    c.ends_job = i == 0;  // the coordinator's host: when it ends, the job is over
    // A host of workers alone may end early when the job may lose them: the coordinator says how the job ended.
    c.may_fail = o.workers_may_fail && i > 0 && i >= o.servers;
    children.push_back(c);
  }
  return children;
}

std::vector<std::string> add_host_processes(const RemoteJobOptions& o, JobPlan& plan, LocalJob& job) {
  std::vector<std::string> placement;
  for (const ChildSpec& c : host_processes(o, plan, &placement)) job.add(c);
  return placement;
}

}  // namespace pshard::remote
