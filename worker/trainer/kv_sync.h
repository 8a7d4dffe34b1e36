// ParameterSync through the parameter servers: per-layer push_pull overlapped with backprop.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "worker/client/kv_client.h"
#include "worker/trainer/batch_rows.h"
#include "worker/trainer/device_staging.h"
#include "worker/trainer/parameter_sync.h"

namespace pshard {
class Config;
class Tracer;
}  // namespace pshard

namespace pshard::trainer {

// As soon as backprop has finished layer l at step t, its gradients are
// pushed and the weights for step t+1 are requested in the same round trip
// (zpush_pull straight into the model's parameter memory: layer l's weights
// are not read again until the next forward reaches layer l). The forward of
// step t+1 waits for layer l's reply only just before it runs layer l, so
// communication of late layers overlaps the compute of early ones.
//
// Consistency (sync/async/ssp) is the servers' business: the same calls
// block as long as the servers' rules say.
//
// Frozen parameters (train.freeze, ParamRef::frozen) are left out of every
// init, push and pull: the servers never hold them.
//
// On a CUDA worker, pushes and pulls go through pinned host buffers
// (DeviceStaging): a layer's gradients are downloaded on a side stream while
// backprop continues and pushed when the next layer is done; pulled weights
// are uploaded just before the forward reaches their layer. The KvClient's I/O
// thread writes into those buffers: destroy the client before this object.
class KvSync : public ParameterSync {
 public:
  // The servers apply the optimizer and the job's learning-rate policy; `lr_at` (the worker session's, which follows
  // the global batch this worker trains in) only reports the learning rate in the metrics.
  KvSync(KvClient& kv, uint32_t rank, const Config& cfg, std::function<double(int64_t step)> lr_at);

  // Resume at `step` (before start()): nobody sends inits; every worker pulls
  // the weights for `step` from the servers, which restored a checkpoint.
  void set_start_step(int64_t step) { start_step_ = step; }
  // Rejoin a running job at the start step (a restarted worker): the first
  // pulls are `join`s, so the servers count this worker from that step on.
  void set_rejoin(bool rejoin) { rejoin_ = rejoin; }
  // Whether this worker must send the initial weights because every lower rank was declared dead before the servers
  // had them (failure_policy = continue): asked while a worker other than 0 waits for the weights of step 0.
  void set_initialiser(std::function<bool()> initialiser) { initialiser_ = std::move(initialiser); }
  // trace.steps: each push_pull of a traced step becomes a span on row 3 from the call that sends
  // it to the end of the wait for its reply, with the tensor and bytes.
  void set_tracer(Tracer* tracer) { tracer_ = tracer; }
  // checkpoint.on_sigterm = checkpoint: once `*signalled` (SIGTERM), the pushes of the next step begun carry the
  // stop flag, and every worker of the job ends at the boundary after it (stop_before), where the servers checkpoint.
  void set_stop_signal(const std::atomic<bool>* signalled) { stop_signal_ = signalled; }
  // Sync jobs with loss scaling: every worker pushes each step, saying whether its gradients were finite
  // (KvClient::request_skip), and the servers skip a step that any worker's push says is not; the first reply tells
  // (finish_scaled). Off: this worker decides alone and pushes only its finite steps (async, SSP).
  void set_servers_skip(bool on) { servers_skip_ = on; }
  // Worker 0 sends its initial weights (one init per tensor); every worker
  // then pulls the step-0 weights (sending its own instead if it becomes the initialiser meanwhile).
  void start(models::Model& model) override;
  void begin_step(int64_t step) override;
  void wait_layer(int layer) override;
  void grads_ready(int first, int count) override;
  void end_step(int64_t) override;
  bool finish_scaled(bool finite, int params) override;
  void skip_step(int64_t) override;
  void sync_all() override;
  bool stop_before(int64_t step) override;
  int64_t weights_step(int64_t step) override;
  int64_t pushed_step(int64_t step) const override { return pushed_step_ >= 0 ? pushed_step_ : step; }
  void catch_up(int64_t step) override;
  // Embedding tables: start() declares the model's tables to the servers (every worker the same list, rows made there
  // from run.seed); a step's row pulls and pushes go to the servers that hold the rows (row r on server r mod S).
  void pull_rows(int64_t step, BatchRows& rows) override;
  void wait_rows() override;
  void push_rows(int64_t step, const BatchRows& rows) override;
  double lr_at(int64_t step) const override { return lr_at_(step); }
  SyncStats stats() const override;  // bytes: the KV client's traffic (this process's only client)

 private:
  void wait_param(size_t i);
  // The first pulls of a worker other than 0 (its own initial weights in `own`): sends `own` as the initial weights
  // if every lower rank dies before the servers have them.
  void wait_initial_weights(std::vector<std::vector<float>>& own);
  void send_initial_weights(const std::vector<const float*>& weights);
  // CUDA: push the layers whose gradient download was started, in order; block = false stops at the first download
  // still in flight (the host keeps queueing the backward), block = true waits for each.
  void push_downloaded(bool block);
  void issued(size_t i);  // parameter i's push_pull was just sent (or queued for the client's poller)
  // The step this step's gradients are pushed for: step_, or with backup workers the lowest step of the weights it
  // read; decided at its first push, which also moves a checkpoint or stop asked in begin_step to it.
  int64_t push_step();

  KvClient& kv_;
  uint32_t rank_;
  std::function<double(int64_t)> lr_at_;
  models::Model* model_ = nullptr;
  int64_t step_ = 0;
  int64_t start_step_ = 0;
  bool rejoin_ = false;
  std::function<bool()> initialiser_;
  bool servers_skip_ = false;
  bool reply_skipped_ = false;     // the last reply waited for said the step before its read was skipped
  double checkpoint_every_s_ = 0;  // checkpoint.every_seconds (worker 0 asks the servers)
  const std::atomic<bool>* stop_signal_ = nullptr;
  bool stop_asked_ = false;  // this worker's pushes of one step carried the stop flag
  // Backup workers (cluster.backup_workers): the lowest step of the weights read since the last step's pushes (-1:
  // none said), the step this step's pushes are for (-1: not decided), and what begin_step asked the servers for.
  const bool backup_ = false;
  int64_t read_step_ = -1;
  int64_t push_step_ = -1;
  int64_t pushed_step_ = -1;  // the last step's push step (pushed_step())
  int64_t stop_asked_at_ = -1, checkpoint_asked_at_ = -1;
  std::vector<int64_t> pushed_for_;  // per parameter: the step of its push in flight
  int64_t last_late_ = -1;           // the last step counted in stats_.late_steps
  int first_param_layer_ = -1;       // the first layer that has parameters (its weights come first each step)
  std::chrono::steady_clock::time_point last_checkpoint_;
  std::vector<std::vector<size_t>> layer_params_;         // layer -> parameter indices
  std::vector<KvClient::Handle> pending_;                 // per parameter; 0 = nothing in flight
  std::vector<KvClient::Handle> row_pulls_, row_pushes_;  // the tables' requests in flight
  TableSettings tables_settings_;                         // how the servers make the tables (run.seed, embedding.*)
  std::unique_ptr<DeviceStaging> staging_;
  std::vector<size_t> downloading_;  // CUDA: parameters whose gradients are on their way to the host
  SyncStats stats_;
  Tracer* tracer_ = nullptr;
  std::vector<int64_t> traced_step_;                              // per parameter: step of its traced request, or -1
  std::vector<std::chrono::steady_clock::time_point> issued_at_;  // per parameter: when it was handed over
  std::vector<uint32_t> span_names_, tensor_names_;               // per parameter: "push_pull P", "P" (TraceName)
};

}  // namespace pshard::trainer
