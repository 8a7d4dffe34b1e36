// The worker's key-value client: push gradients and pull weights of named tensors, non-blocking, ps-lite style.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/compression/settings.h"
#include "common/control/cluster_client.h"
#include "common/error.h"
#include "common/keys/slice_layout.h"
#include "common/keys/table_layout.h"
#include "common/protocol/codec.h"
#include "common/transport/curve.h"
#include "common/transport/shm_channel.h"

namespace pshard {

class Config;

// A restarted worker rejoins this many steps past the highest step any server reached (servers_step()): a step
// boundary the running workers have not reached yet, so that every slice can still count it from there.
constexpr int64_t kRejoinMargin = 20;

struct KvClientOptions {
  uint32_t rank = 0;                 // this worker's rank (worker 0 sends the inits)
  std::vector<std::string> servers;  // ROUTER endpoint of each server, index = server rank
  std::vector<TensorSpec> tensors;   // the model's parameter tensors, in a stable order
  uint64_t slice_bytes = 1u << 20;   // cluster.slice_bytes
  uint32_t streams_per_server = 1;   // cluster.streams_per_server: TCP connections to each server
  std::string job_token;
  transport::CurveKeys curve;                        // empty: plaintext; else CurveZMQ with the job's keys
  std::chrono::milliseconds request_timeout{60000};  // cluster.request_timeout_ms
  std::chrono::milliseconds stall_warn{5000};        // cluster.stall_warn_ms: a request unanswered this long is
                                                     // logged (naming the server and slices), again each period
  int64_t run_total_steps = 0;        // sent with init: lets servers compute run-length schedules (cosine)
  compression::Settings compression;  // how pushes and pull replies are encoded (default: float32 both ways)
  // cluster.transport: with auto or shm, float32 payloads to a server on this host go through shared memory
  // (server/kv/shm_host.h); kTcp here so that clients made in a test speak TCP unless it asks.
  transport::PayloadTransport transport = transport::PayloadTransport::kTcp;
  // cluster.host_aggregation: the workers of this host (increasing ranks, this one among them) whose pushes to the
  // servers marked in `host_aggregated` are summed on the host and sent once, by the lowest rank (worker/client/
  // host_group.h). Fewer than two ranks: every worker pushes its own.
  std::vector<uint32_t> host_ranks;
  std::vector<char> host_aggregated;  // per server
  uint32_t host = 0;  // the lowest worker rank on this worker's host (from the cluster map's localities): names the
                      // host in the metrics' per-host figures
  // A sync job's checkpoints of the error-feedback residuals (cluster.error_feedback with a lossy codec): the run's
  // checkpoint directory (empty: none written), checkpoint.every_steps and checkpoint.keep. At each step the servers
  // checkpoint, this worker writes DIR/worker-R.step-K.residuals (common/checkpoint/residual_file.h).
  std::string checkpoint_dir;
  int64_t checkpoint_every_steps = 0;
  int64_t checkpoint_keep = 0;

  // slice_bytes, the timeouts and the compression from the job's config; the job's shape (rank, servers, tensors,
  // token, keys, run length) is the caller's.
  static KvClientOptions from_config(const Config& cfg);
  // A worker's client after its rendezvous: from_config(cfg), the worker's rank and the servers from `cluster`, the
  // job token and CurveZMQ keys it registered with (`registered`), its tensors and the run's length, the host's
  // workers that sum their pushes (cluster.host_aggregation, from the processes' localities in the cluster map), and
  // the run directory whose checkpoints/ get the residual files of a sync job (empty: none).
  //
  //   ClusterClient cluster(copt);
  //   KvClient kv(KvClientOptions::from_config(cfg, cluster, copt, tensors, steps_per_epoch * epochs, run_dir));
  static KvClientOptions from_config(const Config& cfg, const ClusterClient& cluster,
                                     const ClusterClient::Options& registered, std::vector<TensorSpec> tensors,
                                     int64_t run_total_steps, const std::string& run_dir);
};

// A request a server refused with an error reply: the message names the worker, the server, the request and the
// protocol's error code ("worker 1: server 0 (tcp://...) refused push of 'fc1.weight': badStep: ..."); code() is that
// code, for callers that act on it.
//
//   try { kv.wait(h); } catch (const KvError& e) { if (e.code() == protocol::ErrorCode::BAD_STEP) ... }
class KvError : public Error {
 public:
  KvError(const std::string& what, protocol::ErrorCode code) : Error(what), code_(code) {}
  protocol::ErrorCode code() const { return code_; }

 private:
  protocol::ErrorCode code_;
};

// Payload bytes that went through this client since it was made (inits, pushes, weights replies): as they travelled
// (after compression) and as float32 (what cluster.compression = none and pull_precision = fp32 would have moved).
// Shared memory counts what this process wrote into it (sent) and read from it (recv): its pushes and pulls to
// servers on its host, and under host aggregation a member's gradients and weights, and the leader's published
// weights and the members' gradients it added.
// Sent bytes are the payload frames a call built, counted when it returns; received bytes are counted as each reply
// arrives (a reply still in flight is not counted yet).
struct KvTraffic {
  uint64_t bytes_sent = 0;  // through sockets
  uint64_t bytes_recv = 0;
  uint64_t fp32_bytes_sent = 0;
  uint64_t fp32_bytes_recv = 0;
  uint64_t shm_bytes_sent = 0;  // through shared memory (cluster.transport), not in bytes_sent/recv
  uint64_t shm_bytes_recv = 0;
};

// Talks to every server through one DEALER socket per server, used by one thread at a time: a
// calling thread (any number may call) that finds the sockets free sends its request itself, and
// one that blocks in wait() reads the replies itself; otherwise the client's I/O thread sends what
// was queued for it and reads the replies nobody waits on. A tensor is cut into slices by
// SliceLayout and each call is scattered to / gathered from the servers that own them.
//
// Pushes are encoded as options.compression says (with a per-slice error-feedback residual for
// topk/randomk/onebit), and pull replies decoded back to float32, so callers always see float32.
//
// Every call returns at once; wait(h) blocks until the request is done and throws
// pshard::Error on failure: KvError for a server's error reply, Error for a timeout (naming the
// server's rank and endpoint and the tensor) or a lost connection.
//
//   KvClient kv(opt);
//   if (rank == 0) kv.wait(kv.init("fc1.weight", w.data(), w.size()));
//   kv.wait(kv.zpull("fc1.weight", w.data(), w.size(), /*step=*/0));   // weights for step 0
//   for (int64_t t = 0; t < steps; ++t) {
//     compute_gradients(w, g);
//     auto h = kv.zpush_pull("fc1.weight", g.data(), w.data(), w.size(), t);   // push step t, pull step t+1
//     kv.wait(h);
//   }
class KvClient {
 public:
  using Handle = uint64_t;

  explicit KvClient(KvClientOptions options);  // connects; throws pshard::Error on a bad layout or endpoint
  ~KvClient();                                 // stops the I/O thread; requests not waited for are dropped
  KvClient(const KvClient&) = delete;
  KvClient& operator=(const KvClient&) = delete;

  const SliceLayout& layout() const;

  // Worker 0 (or, when every lower rank was declared dead before, the lowest live worker: the servers refuse the
  // others), once per tensor before training: the initial weights (copied).
  Handle init(const std::string& tensor, const float* weights, size_t numel);

  // The gradient of step `step` (0-based). push() copies `grad`, so the caller may reuse it at
  // once; zpush() sends it without copying: keep `grad` alive and unchanged until wait() returns.
  Handle push(const std::string& tensor, const float* grad, size_t numel, int64_t step);
  Handle zpush(const std::string& tensor, const float* grad, size_t numel, int64_t step);

  // The weights a worker about to compute step `step` may read (BSP: after step-1 was applied
  // everywhere; SSP: within the staleness bound; ASP: current). The reply is written into `out`
  // (zpull: numel floats; pull: resized to the tensor), which must stay alive until wait() returns.
  Handle zpull(const std::string& tensor, float* out, size_t numel, int64_t step);
  Handle pull(const std::string& tensor, std::vector<float>* out, int64_t step);

  // BSP: pushes of step `step` made after this call carry the checkpoint flag: the servers
  // checkpoint every slice when that step closes (checkpoint.every_seconds). -1: none.
  void request_checkpoint(int64_t step);
  // BSP: pushes of step `step` made after this call carry the stop flag: when that step closes, the servers
  // checkpoint every slice and answer every read of step + 1 with stopAt = step + 1 (checkpoint.on_sigterm). Every
  // worker then ends before computing step + 1, whichever of them asked.
  void request_stop(int64_t step);
  // Sync jobs with loss scaling: pushes of step `step` made after this call say skipped (this worker's gradients of
  // that step are not finite): every server closes the step without applying it, the replies to its reads say so
  // (ReplyNotes::skipped), and every worker pushes the same step again. They go as float32 (no residual of
  // cluster.compression takes them in). -1: none; the worker clears it before pushing the step again. Refused (an
  // Error) for a worker whose host sums its pushes (cluster.host_aggregation).
  void request_skip(int64_t step);
  // A resumed run (not a rejoin): this worker's error-feedback residuals (and random-k's sampler) of checkpoint
  // `step`, from its residual file. Returns what happened, for the log: "" when the run keeps none or the file was
  // read; otherwise why they
  // start again at zero (no such file: a worker killed before it wrote it, a run directory its host does not
  // share). An Error for a file that is corrupt or of another run's layout.
  std::string restore_residuals(int64_t step);
  // The step boundary at which the servers stopped the job (from the replies received so far); 0 while none did.
  // Thread-safe; set before the request whose reply carried it is done.
  int64_t stop_at() const;
  // How far this worker pushed: its highest pushed step + 1 (dense or rows; 0 before its first push). Thread-safe.
  int64_t steps_pushed() const;

  // push of step `step`, then pull for step + 1, in one round trip per server.
  Handle push_pull(const std::string& tensor, const float* grad, float* out, size_t numel, int64_t step);
  Handle zpush_pull(const std::string& tensor, const float* grad, float* out, size_t numel, int64_t step);

  // Asks every server to shut down (needs the job token).
  Handle shutdown_servers();

  // Rejoining a running sync job (a restarted worker): the highest step any server's slices have
  // reached, from a ping of every server; throws pshard::Error when a server does not answer in time.
  int64_t servers_step();
  // Rejoin: the servers count this worker in every step >= `step` of `tensor` again and answer with
  // its weights for `step` (like zpull). Fails with badStep when a slice is already past `step`.
  //   const int64_t start = kv.servers_step() + 20;              // a step boundary not reached yet
  //   kv.wait(kv.join("fc1.weight", w.data(), w.size(), start));  // then push step `start`
  Handle join(const std::string& tensor, float* out, size_t numel, int64_t step);

  // ---- embedding tables (docs/SPARSE.md): rows that only the servers hold --------------------------------------

  // Every worker, once before its first row request: the job's tables (the same list, in the same order, on every
  // worker; a table's id is its index) and the run's seed, from which the servers make the rows.
  Handle declare_tables(const std::vector<TableSpec>& tables, uint64_t seed);
  const std::vector<TableSpec>& tables() const;
  // The n rows `ids` of table `table` (no two equal) as a worker about to compute step `step` reads them (BSP: after
  // step - 1 closed), written to `out` (n x dim floats, in the order of `ids`). Keep `ids` and `out` alive until
  // wait() returns. Each id goes to the server that holds it (row r on server r mod S).
  Handle row_pull(uint32_t table, const uint64_t* ids, size_t n, float* out, int64_t step);
  // The gradients of step `step` for n rows of table `table` (grads: n x dim, row after row), each row one this
  // worker pulled for `step`. Copied: the caller may reuse its buffers at once. Sync jobs: one call per table and
  // step, and every server hears it (with no rows where the batch touched none), so that each can close the step.
  Handle row_push(uint32_t table, const uint64_t* ids, size_t n, const float* grads, int64_t step);

  // Thread-safe.
  KvTraffic traffic() const;
  uint32_t host() const;  // KvClientOptions::host

  // Blocks until `h` is done; throws pshard::Error on failure. Each handle is waited for once.
  void wait(Handle h);
  // What the replies of a done request said beside its data: the lowest step whose weights they brought (-1: not a
  // read), whether a server dropped a gradient of it that came after its step had closed (sync jobs with
  // cluster.backup_workers), and whether the step before the read was skipped (request_skip, on any worker).
  struct ReplyNotes {
    int64_t weights_step = -1;
    bool late = false;
    bool skipped = false;
  };
  ReplyNotes wait_noting(Handle h);  // wait(h), and its replies' notes
  // Like wait() but gives up after `timeout`: false means not done yet (the handle stays valid). Done: its replies'
  // notes into `notes` (when given), as wait_noting.
  bool wait_for(Handle h, std::chrono::milliseconds timeout, ReplyNotes* notes = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pshard
