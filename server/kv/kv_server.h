// The parameter server: a ROUTER socket in front of a float32 slice store with BSP/ASP/SSP updates.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/metrics/phases.h"
#include "common/util/json.h"
#include "server/kv/server_options.h"

namespace pshard {

struct KvServerStats {
  uint64_t requests = 0;            // messages received
  uint64_t connections = 0;         // peers (ZeroMQ connections) they came from: cluster.streams_per_server per worker
  uint64_t errors = 0;              // error replies sent
  uint64_t bytes_received = 0;      // payload bytes
  uint64_t bytes_sent = 0;          // payload bytes
  uint64_t shm_bytes_received = 0;  // payload bytes read from workers' push segments (shared memory)
  uint64_t shm_bytes_sent = 0;      // payload bytes of replies answered through the weights segment
  uint64_t updates = 0;             // optimizer applications (all slices)
  uint64_t weight_copies = 0;       // updates that copied their slice first because a reply was still sending it
  uint64_t replies_dropped = 0;     // replies to a peer over its queue bound (transport::kPeerQueueMessages) or gone

  // Where the threads' time went since the server started (complete once stopped): summed over
  // `threads` threads, so the phases add up to threads x wall_s.
  ServerPhaseSeconds phases;
  int threads = 0;    // the socket thread and the update threads
  Json tables;        // once stopped: the embedding tables' rows here (TableStore::stats); null while running
  double wall_s = 0;  // since the server started, until stop()

  // The `server_phases` metrics event (docs/METRICS.md) of server `rank`, with `tables` where the job has them.
  Json phases_json(uint32_t rank) const;
};

// Serves its slices from a socket thread plus `update_threads` update threads until stop(),
// destruction, or a `shutdown` request. The model's tensor list arrives with the first init
// from worker 0; requests before it wait (bounded) and are served once it is known.
//
//   KvServerOptions opt = KvServerOptions::from_config(cfg);
//   opt.rank = 0; opt.num_servers = 2; opt.num_workers = 3; opt.job_token = token;
//   KvServer server(opt);
//   register_with_coordinator(server.endpoint());
//   cluster.on_event([&](auto& e) { if (e.kind == kNodeDead) server.mark_worker_dead(e.node.rank); });
//   server.wait_for_shutdown(std::chrono::hours(24));
class KvServer {
 public:
  explicit KvServer(KvServerOptions options);  // binds (throws pshard::Error naming the endpoint) and starts
  ~KvServer();                                 // stop()
  KvServer(const KvServer&) = delete;
  KvServer& operator=(const KvServer&) = delete;

  // The bound endpoint with the real port, e.g. "tcp://127.0.0.1:41213".
  const std::string& endpoint() const;
  // Failure policy `continue`: from now on BSP steps complete without this worker and SSP
  // ignores its clock; its later requests are refused. Thread-safe.
  void mark_worker_dead(uint32_t worker_rank);
  // A worker left after its last push while others train on (the coordinator compares their pushes): as dead for
  // the steps that wait, without the warning.
  void mark_worker_left(uint32_t worker_rank);
  // The coordinator registered process `pid` for worker `worker_rank` while the job ran (a restart, a joiner): from
  // now on that process alone may share memory for the rank (KvServerOptions::worker_pids). Thread-safe.
  void worker_registered(uint32_t worker_rank, int64_t pid);
  // True once a shutdown request was answered; false on timeout.
  bool wait_for_shutdown(std::chrono::milliseconds timeout);
  // Stops and joins every thread. Idempotent.
  void stop();
  KvServerStats stats() const;
  // ZeroMQ I/O threads of its socket (KvServerOptions::io_threads, resolved).
  int io_threads() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pshard
