// KvServerOptions::from_config and the stall timings.
#include "server/kv/server_options.h"

#include <algorithm>

#include "common/config/config.h"
#include "common/config/job_shape.h"
#include "common/error.h"

namespace pshard {

namespace {

// A tenth of the workers' request timeout, at most 5 s: the room the server leaves before it.
std::chrono::milliseconds stall_margin(std::chrono::milliseconds request_timeout) {
  return std::min(request_timeout / 10, std::chrono::milliseconds(5000));
}

}  // namespace

// A worker's request times out request_timeout after it was sent; the server gives a waiting read up one margin
// earlier, so that its `stalled` error (naming the missing workers) arrives first; one more margin earlier, it
// reports those workers stuck, so that the coordinator's verdict comes before either.
std::chrono::milliseconds give_up_before(std::chrono::milliseconds request_timeout) {
  return request_timeout - stall_margin(request_timeout);
}

std::chrono::milliseconds stuck_after(std::chrono::milliseconds request_timeout) {
  return request_timeout - 2 * stall_margin(request_timeout);
}

int KvServerOptions::resolve_io_threads(int io_threads, uint32_t num_workers, unsigned cores) {
  if (io_threads > 0) return io_threads;
  // libzmq's rule of thumb is one I/O thread per GB/s in or out; 8 cover a 64 Gb/s link.
  constexpr uint64_t kMaxAuto = 8;
  return static_cast<int>(std::clamp<uint64_t>(num_workers, 1, std::min<uint64_t>(std::max(cores, 1u), kMaxAuto)));
}

KvServerOptions KvServerOptions::from_config(const Config& cfg) {
  KvServerOptions o;
  const JobShape job = JobShape::from_config(cfg);
  o.mode = consistency_from_string(job.mode_name());
  o.staleness = cfg.get_int("cluster.staleness");
  o.backup.count = static_cast<uint32_t>(cfg.get_int("cluster.backup_workers"));
  o.backup.grace_share = cfg.get_double("cluster.backup_grace");
  o.backup.grace_min =
      std::chrono::microseconds(static_cast<int64_t>(cfg.get_double("cluster.backup_grace_min_ms") * 1e3));
  o.slice_bytes = static_cast<uint64_t>(cfg.get_int("cluster.slice_bytes"));
  o.update_threads = static_cast<int>(cfg.get_int("cluster.server_threads"));
  o.io_threads = static_cast<int>(cfg.get_int("cluster.server_io_threads"));
  o.transport = transport::parse_payload_transport(job.transport);
  optim::OptimizerParams params = optim::OptimizerParams::from_config(cfg);
  o.optimizer = optim::make_optimizer(params);
  // The tables' rule (config.cc resolved embedding.lr and embedding.eps from optimizer.* or the rule's defaults).
  const optim::OptimizerParams tp = optim::OptimizerParams::for_tables(cfg);
  try {
    o.table_optimizer = optim::make_optimizer(tp);
  } catch (const Error& e) {
    throw Error(std::string("embedding.optimizer: ") + e.what());
  }
  o.table_lr = tp.lr;
  o.max_rows_per_request = static_cast<uint64_t>(cfg.get_int("cluster.max_rows_per_request"));
  // The global batch (linear scaling rule) needs W and a cosine schedule the run's length: the schedule is built at
  // the first init, when both are known.
  o.lr = optim::LrPolicy::from_config(cfg);
  o.checkpoint_every_steps = cfg.get_int("checkpoint.every_steps");
  o.checkpoint_keep = cfg.get_int("checkpoint.keep");
  o.stall_warn = std::chrono::milliseconds(cfg.get_int("cluster.stall_warn_ms"));
  const std::chrono::milliseconds request_timeout(cfg.get_int("cluster.request_timeout_ms"));
  o.stall_stuck = stuck_after(request_timeout);
  o.stall_give_up = give_up_before(request_timeout);
  return o;
}

}  // namespace pshard
