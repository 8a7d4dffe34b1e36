// A parameter server's options (KvServerOptions::from_config) and the stall timings derived from the workers'
// request timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/metrics/trace.h"
#include "common/transport/curve.h"
#include "common/transport/shm_channel.h"
#include "optim/lr_policy.h"
#include "optim/optimizer.h"
#include "server/consistency/consistency_mode.h"
#include "server/consistency/consistency_policy.h"
#include "server/kv/stall_watch.h"

namespace pshard {

class Config;
class SliceStore;
class TableStore;

struct KvServerOptions {
  uint32_t rank = 0;                       // this server's rank
  uint32_t num_servers = 1;                // S: every init must agree
  uint32_t num_workers = 1;                // W
  std::string bind = "tcp://127.0.0.1:0";  // port 0: any free port (see endpoint())
  std::string job_token;
  transport::CurveKeys curve;  // empty: plaintext; else a CurveZMQ server that accepts only the job's clients
  // cluster.transport: with auto or shm the server shares memory with the workers on its host (ShmHost); kTcp here
  // so that servers made in a test speak TCP unless it asks.
  transport::PayloadTransport transport = transport::PayloadTransport::kTcp;
  Consistency mode = Consistency::kBsp;               // how pushes of different workers are combined (cluster.mode)
  int64_t staleness = 2;                              // kSsp only
  BackupWorkers backup;                               // kBsp only: cluster.backup_workers and its grace
  uint64_t slice_bytes = 1u << 20;                    // must equal the workers' cluster.slice_bytes
  std::shared_ptr<const optim::Optimizer> optimizer;  // required
  // The embedding tables' rule (embedding.optimizer; null: `optimizer`) and learning rate (embedding.lr; 0: base_lr),
  // and the most rows a request may name (cluster.max_rows_per_request).
  std::shared_ptr<const optim::Optimizer> table_optimizer;
  float table_lr = 0.0f;
  uint64_t max_rows_per_request = uint64_t(1) << 20;
  // Learning rate of a step. When empty, the first init builds it from the job's policy `lr` and the run's length
  // that worker 0 sends (an elastic job's global batch: a schedule for each number of workers an update may hold).
  std::function<float(int64_t step)> lr_at;
  optim::LrPolicy lr;
  std::vector<uint32_t> vacant_workers;  // elastic jobs: the worker ranks no process holds at the start
  // Per worker rank, the process the coordinator registered for it (the cluster map's pid; 0: none yet), which alone
  // may attach that rank's push segment on this host (ShmHost). Empty: no coordinator (a standalone server, or one
  // made in a test), so any process with the job token may.
  std::vector<int64_t> worker_pids;
  // cluster.server_threads. 0: every slice on the socket thread (no hand-off to an update thread and back, ~50 us
  // per round trip of a large slice on an idle 2-core VM; but updates no longer run beside the receiving).
  int update_threads = 2;
  // cluster.server_io_threads: ZeroMQ I/O threads (the TCP reads and writes). libzmq gives each accepted connection
  // to one of them, so with one per worker the replies of a sync step (the same weights to every worker) are
  // written in parallel instead of one after the other. 0: resolve_io_threads() picks.
  int io_threads = 0;
  uint64_t inline_slice_bytes = 64u << 10;  // slices up to this size are updated on the socket thread (latency)
  // A read waiting this long is reported (log and on_stall: which workers have not pushed); 0: never.
  std::chrono::milliseconds stall_warn{5000};  // cluster.stall_warn_ms
  // A read waiting this long reports the workers it waits for as stuck (on_stall with StallReport::stuck), and so
  // does, in async mode, a worker that pushed nothing for this long; 0: never. Less than stall_give_up, so that the
  // coordinator's verdict (the stuck workers removed, or the job aborted naming them) comes first.
  std::chrono::milliseconds stall_stuck{50000};
  // A read waiting this long is answered with a `stalled` error naming those workers; a little less than the
  // workers' cluster.request_timeout_ms, so that their error names the missing worker, not this server.
  std::chrono::milliseconds stall_give_up{55000};
  std::function<void(const StallReport&)> on_stall;  // called on any of the server's threads; keep it short
  // Checkpoints (sync mode only), written by the checkpointer of server/checkpoint/ that the server's owner hooks in
  // through prepare_store: every slice's state is copied when it reaches a version that is a multiple of
  // checkpoint_every_steps; once all of this server's slices are copied, a writer thread writes
  // checkpoint_dir/server-R.step-K.ckpt atomically and keeps the newest checkpoint_keep files. A push with the
  // `checkpoint` flag (worker 0, checkpoint.every_seconds) also makes the step it closes a checkpoint step.
  std::string checkpoint_dir;          // "": no checkpoints
  std::string run_id;                  // the run's id, written into every checkpoint; restore and pruning only
                                       // use this run's files (PSHARD_RUN_ID or RUN_DIR/run-id)
  uint64_t settings_hash = 0;          // fixed_settings_hash(cfg), written into every checkpoint, checked on restore
  int64_t checkpoint_every_steps = 0;  // checkpoint.every_steps (0: only when a push asks)
  int64_t checkpoint_keep = 3;         // checkpoint.keep (0: keep all)
  // When set, the server starts from this checkpoint file (layout, weights, optimizer state and
  // versions) instead of waiting for worker 0's init; an Error names the file when it is corrupt or
  // belongs to another job shape. Read by prepare_store (server_checkpoints() in server/checkpoint/).
  std::string restore_path;
  // Called once by the server's constructor with the stores it serves (slices, embedding tables), before any of its
  // threads runs: a restore into them and a checkpointer on their steps (server_checkpoints()). A throw fails the
  // constructor. Empty: neither.
  std::function<void(SliceStore& store, TableStore& tables)> prepare_store;
  // trace.steps: the requests of the window's steps become spans (receive and reply on the socket
  // thread's row 0, aggregate and update per slice on the row of the thread that ran it). nullptr: off.
  std::shared_ptr<Tracer> tracer;

  // rank/num_* stay as given; mode, staleness, slice_bytes, threads, optimizer, schedule and the
  // checkpoint period come from `cfg` (checkpoint_dir and restore_path are the caller's).
  static KvServerOptions from_config(const Config& cfg);

  // io_threads when set, else one per worker, at least 1 and at most `cores` (the machine's hardware threads) and 8.
  static int resolve_io_threads(int io_threads, uint32_t num_workers, unsigned cores);
};

// How long a server lets a read wait before it gives up (KvServerOptions::stall_give_up) when the workers' requests
// time out after `request_timeout`.
std::chrono::milliseconds give_up_before(std::chrono::milliseconds request_timeout);
// How long a read waits, or an async worker goes without a push, before the server reports the workers it waits for
// as stuck (KvServerOptions::stall_stuck): one margin before give_up_before().
std::chrono::milliseconds stuck_after(std::chrono::milliseconds request_timeout);

}  // namespace pshard
