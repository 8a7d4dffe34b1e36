// Pushing gradients and pulling weights layer by layer.
#include "worker/trainer/kv_sync.h"

#include <chrono>

#include "common/config/config.h"
#include "common/config/job_shape.h"
#include "common/metrics/phase_clock.h"
#include "common/metrics/phases.h"
#include "common/metrics/trace.h"
#include "common/util/log.h"
#include "models/layers/embedding.h"
#include "models/model.h"
#include "worker/trainer/batch_rows.h"

namespace pshard::trainer {
namespace {
using Clock = std::chrono::steady_clock;
constexpr int kRequestRow = 3;
}  // namespace

KvSync::KvSync(KvClient& kv, uint32_t rank, const Config& cfg, std::function<double(int64_t)> lr_at)
    : kv_(kv),
      rank_(rank),
      lr_at_(std::move(lr_at)),
      checkpoint_every_s_(rank == 0 && JobShape::from_config(cfg).sync() ? cfg.get_double("checkpoint.every_seconds")
                                                                         : 0.0),
      backup_(JobShape::from_config(cfg).has_backup_workers()),
      last_checkpoint_(Clock::now()),
      tables_settings_(TableSettings::from_config(cfg)) {}

SyncStats KvSync::stats() const {
  SyncStats s = stats_;
  const KvTraffic t = kv_.traffic();
  s.bytes_sent = t.bytes_sent;
  s.bytes_recv = t.bytes_recv;
  s.fp32_bytes_sent = t.fp32_bytes_sent;
  s.fp32_bytes_recv = t.fp32_bytes_recv;
  s.shm_bytes_sent = t.shm_bytes_sent;
  s.host = kv_.host();
  s.shm_bytes_recv = t.shm_bytes_recv;
  return s;
}

void KvSync::begin_step(int64_t step) {
  step_ = step;
  push_step_ = -1;
  // checkpoint.every_seconds: worker 0 flags its pushes of this step, so every server checkpoints
  // the same step boundary (step + 1).
  if (stop_signal_ && !stop_asked_ && stop_signal_->load()) {
    kv_.request_stop(step);
    stop_asked_ = true;
    stop_asked_at_ = step;
    PSHARD_LOG(kInfo) << "SIGTERM: the job stops at step boundary " << step + 1
                      << ", where the servers checkpoint (checkpoint.on_sigterm = checkpoint)";
  }
  if (checkpoint_every_s_ > 0 &&
      std::chrono::duration<double>(Clock::now() - last_checkpoint_).count() >= checkpoint_every_s_) {
    kv_.request_checkpoint(step);
    checkpoint_asked_at_ = step;
    last_checkpoint_ = Clock::now();
  }
}

int64_t KvSync::push_step() {
  if (push_step_ >= 0) return push_step_;
  push_step_ = step_;
  if (backup_ && read_step_ > step_) {
    // Late: the servers closed the steps up to read_step_ without this worker. Its gradients are for the step of the
    // weights it computed them on (slices already past it drop them), and what begin_step asked goes with them.
    push_step_ = read_step_;
    if (stop_asked_at_ == step_) kv_.request_stop(push_step_);
    if (checkpoint_asked_at_ == step_) kv_.request_checkpoint(push_step_);
  }
  return push_step_;
}

int64_t KvSync::weights_step(int64_t step) { return backup_ && read_step_ > step ? read_step_ : step; }

void KvSync::catch_up(int64_t step) {
  sync_all();
  ScopedPhase waiting(WorkerPhase::kCommWait);
  const auto& params = model_->params();
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].frozen) continue;
    pending_[i] = kv_.zpull(params[i].name, staging_->weights(i), static_cast<size_t>(params[i].numel), step);
  }
  for (size_t i = 0; i < pending_.size(); ++i) wait_param(i);
  staging_->finish_uploads();
}

void KvSync::start(models::Model& model) {
  model_ = &model;
  staging_ = std::make_unique<DeviceStaging>(model);
  const auto& params = model.params();
  layer_params_.assign(static_cast<size_t>(model.num_layers()), {});
  pending_.assign(params.size(), 0);
  pushed_for_.assign(params.size(), -1);
  traced_step_.assign(params.size(), -1);
  issued_at_.assign(params.size(), {});
  if (tracer_) {
    tracer_->name_row(kRequestRow, "push_pull (hand-off to reply waited for)");
    span_names_.clear();
    tensor_names_.clear();
    for (const models::ParamRef& p : params) {
      span_names_.push_back(tracer_->name("push_pull " + p.name).id);
      tensor_names_.push_back(tracer_->name(p.name).id);
    }
  }
  // Frozen parameters (train.freeze) are never exchanged: the servers never hear of them, and each worker keeps the
  // copy it built (the same on every worker: run.seed and train.init_from).
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].frozen) layer_params_.at(static_cast<size_t>(params[i].layer)).push_back(i);
  }
  for (int l = 0; l < static_cast<int>(layer_params_.size()) && first_param_layer_ < 0; ++l) {
    if (!layer_params_[static_cast<size_t>(l)].empty()) first_param_layer_ = l;
  }

  ScopedPhase waiting(WorkerPhase::kCommWait);
  if (const models::Embedding* layer = model.embedding()) {
    kv_.wait(kv_.declare_tables(table_specs(*layer, tables_settings_), tables_settings_.seed));
  }
  const bool fresh = start_step_ == 0 && !rejoin_;
  std::vector<std::vector<float>> own;  // a worker other than 0: its initial weights, which it may have to send
  if (fresh) staging_->download_all_weights();
  if (fresh && rank_ == 0) {
    std::vector<const float*> weights;
    for (size_t i = 0; i < params.size(); ++i) weights.push_back(staging_->weights(i));
    send_initial_weights(weights);
  } else if (fresh && initialiser_) {
    own.resize(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      if (!params[i].frozen) own[i].assign(staging_->weights(i), staging_->weights(i) + params[i].numel);
    }
  }
  // Every worker, worker 0 included, starts from the servers' copy.
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].frozen) continue;
    const size_t n = static_cast<size_t>(params[i].numel);
    pending_[i] = rejoin_ ? kv_.join(params[i].name, staging_->weights(i), n, start_step_)
                          : kv_.zpull(params[i].name, staging_->weights(i), n, start_step_);
  }
  if (!own.empty()) wait_initial_weights(own);
  sync_all();
}

void KvSync::send_initial_weights(const std::vector<const float*>& weights) {
  const auto& params = model_->params();
  std::vector<KvClient::Handle> inits;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].frozen) continue;
    inits.push_back(kv_.init(params[i].name, weights[i], static_cast<size_t>(params[i].numel)));
  }
  for (KvClient::Handle h : inits) {
    try {
      kv_.wait(h);
    } catch (const KvError& e) {
      // Sent in place of a dead worker 0, which had initialised some slices before it died: those keep its weights.
      if (rank_ == 0 || e.code() != protocol::ErrorCode::ALREADY_INITIALIZED) throw;
    }
  }
}

void KvSync::wait_initial_weights(std::vector<std::vector<float>>& own) {
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i] == 0) continue;
    while (!kv_.wait_for(pending_[i], std::chrono::milliseconds(200))) {
      if (own.empty() || !initialiser_()) continue;
      PSHARD_LOG(kWarn) << "every lower rank died before the servers had the initial weights: worker " << rank_
                        << " sends its own";
      std::vector<const float*> weights;
      for (const std::vector<float>& w : own) weights.push_back(w.data());
      send_initial_weights(weights);
      own.clear();
    }
    pending_[i] = 0;
    staging_->begin_weight_upload(i);
  }
}

void KvSync::wait_param(size_t i) {
  if (pending_[i] == 0) return;
  KvClient::Handle h = pending_[i];
  pending_[i] = 0;
  if (backup_ || servers_skip_) {
    const KvClient::ReplyNotes notes = kv_.wait_noting(h);
    reply_skipped_ = notes.skipped;
    if (notes.weights_step >= 0)
      read_step_ = read_step_ < 0 ? notes.weights_step : std::min(read_step_, notes.weights_step);
    if (notes.late && pushed_for_[i] != last_late_) {
      ++stats_.late_steps;
      last_late_ = pushed_for_[i];
    }
  } else {
    kv_.wait(h);
  }
  if (traced_step_[i] >= 0) {
    const models::ParamRef& p = model_->params()[i];
    const uint64_t bytes = static_cast<uint64_t>(p.numel) * sizeof(float);
    tracer_->span(TraceName{span_names_[i]}, "comm", issued_at_[i], Clock::now(),
                  TraceArgs()
                      .set("tensor", TraceName{tensor_names_[i]})
                      .set("step", traced_step_[i])
                      .set("worker", rank_)
                      .set("bytes_sent", bytes)
                      .set("bytes_recv", bytes),
                  kRequestRow);
    traced_step_[i] = -1;
  }
  staging_->begin_weight_upload(i);  // CUDA: before the kernels that read it
}

void KvSync::issued(size_t i) {
  if (!tracer_ || !tracer_->traces(step_)) return;
  traced_step_[i] = step_;
  issued_at_[i] = Clock::now();
}

void KvSync::wait_layer(int layer) {
  const std::vector<size_t>& ids = layer_params_.at(static_cast<size_t>(layer));
  if (ids.empty()) return;
  ScopedPhase waiting(WorkerPhase::kCommWait);
  for (size_t i : ids) wait_param(i);
}

void KvSync::grads_ready(int first, int count) {
  // Sending requests is neither compute nor a wait.
  ScopedPhase issuing(WorkerPhase::kOther);
  if (staging_->active()) {
    // CUDA: push the earlier layers whose downloads have finished, without waiting for the device (the host queues
    // the rest of the backward meanwhile; end_step pushes what is left), then start this layer's download.
    push_downloaded(false);
    for (int i = first; i < first + count; ++i) {
      if (model_->params()[static_cast<size_t>(i)].frozen) continue;
      staging_->begin_grad_download(static_cast<size_t>(i));
      downloading_.push_back(static_cast<size_t>(i));
    }
    return;
  }
  const auto& params = model_->params();
  for (int i = first; i < first + count; ++i) {
    const models::ParamRef& p = params[static_cast<size_t>(i)];
    if (p.frozen) continue;
    const size_t n = static_cast<size_t>(p.numel);
    // The gradient buffer is not written again before the next backward,
    // which comes after wait_layer() of the next forward: zero-copy is safe.
    issued(static_cast<size_t>(i));
    const int64_t at = push_step();
    pushed_for_[static_cast<size_t>(i)] = at;
    pending_[static_cast<size_t>(i)] = kv_.zpush_pull(p.name, p.grad, p.value, n, at);
  }
}

void KvSync::push_downloaded(bool block) {
  const auto& params = model_->params();
  size_t pushed = 0;
  for (size_t i : downloading_) {
    if (block) {
      // CUDA: the host waits for the device to finish this layer's backward kernels and copy the
      // gradients out: backward time, not communication.
      ScopedPhase backward(WorkerPhase::kBackward);
      staging_->wait_grad(i);
    } else if (!staging_->grad_downloaded(i)) {
      break;  // later layers were queued after this one
    }
    const size_t n = static_cast<size_t>(params[i].numel);
    issued(i);
    const int64_t at = push_step();
    pushed_for_[i] = at;
    pending_[i] = kv_.zpush_pull(params[i].name, staging_->grads(i), staging_->weights(i), n, at);
    ++pushed;
  }
  downloading_.erase(downloading_.begin(), downloading_.begin() + static_cast<std::ptrdiff_t>(pushed));
}

void KvSync::end_step(int64_t) {
  push_downloaded(true);
  pushed_step_ = push_step();
  read_step_ = -1;  // the next step's weights come with these pushes' replies
  // The uploads of this step's weights were consumed by its forward; their
  // host buffers are about to receive the next step's pulls.
  staging_->finish_uploads();
}

bool KvSync::finish_scaled(bool finite, int params) {
  if (!servers_skip_) return ParameterSync::finish_scaled(finite, params);
  kv_.request_skip(finite ? -1 : step_);
  grads_ready(0, params);
  push_downloaded(true);
  // Every slice saw every worker's push of the step, flags and all, so every reply says the same: the first one
  // tells whether the step was skipped (and the next forward waits for it first anyway).
  ScopedPhase waiting(WorkerPhase::kCommWait);
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i] == 0) continue;
    wait_param(i);
    return !reply_skipped_;
  }
  return finite;  // every parameter frozen: nothing was pushed
}

void KvSync::skip_step(int64_t) {
  pushed_step_ = -1;
  // A step skipped by the servers: the pulls in flight bring the unchanged weights, which the next step (of the same
  // number) waits for as usual. Skipped by this worker alone (async, SSP): nothing was pushed, and the model keeps
  // this step's weights.
  staging_->finish_uploads();
}

bool KvSync::stop_before(int64_t step) {
  // The replies that bring this step's weights say whether the servers stopped the job here (stopAt): the first
  // layer's arrive first, and the forward would wait for them next anyway.
  if (first_param_layer_ >= 0) wait_layer(first_param_layer_);
  const int64_t at = kv_.stop_at();
  return at > 0 && weights_step(step) >= at;
}

void KvSync::sync_all() {
  ScopedPhase waiting(WorkerPhase::kCommWait);
  push_downloaded(true);
  for (size_t i = 0; i < pending_.size(); ++i) wait_param(i);
  for (KvClient::Handle h : row_pushes_) kv_.wait(h);
  row_pushes_.clear();
  staging_->finish_uploads();
}

void KvSync::pull_rows(int64_t step, BatchRows& rows) {
  {
    ScopedPhase waiting(WorkerPhase::kCommWait);
    for (KvClient::Handle h : row_pushes_) kv_.wait(h);  // the last step's: answered as soon as a server took them
    row_pushes_.clear();
  }
  ScopedPhase issuing(WorkerPhase::kOther);
  for (int64_t f = 0; f < rows.fields(); ++f) {
    const std::vector<uint64_t>& ids = rows.ids(f);
    row_pulls_.push_back(kv_.row_pull(static_cast<uint32_t>(f), ids.data(), ids.size(), rows.values(f), step));
  }
}

void KvSync::wait_rows() {
  ScopedPhase waiting(WorkerPhase::kCommWait);
  for (KvClient::Handle h : row_pulls_) kv_.wait(h);
  row_pulls_.clear();
}

void KvSync::push_rows(int64_t step, const BatchRows& rows) {
  ScopedPhase issuing(WorkerPhase::kOther);
  for (int64_t f = 0; f < rows.fields(); ++f) {
    const std::vector<uint64_t>& ids = rows.ids(f);
    row_pushes_.push_back(kv_.row_push(static_cast<uint32_t>(f), ids.data(), ids.size(), rows.grads(f), step));
  }
}

}  // namespace pshard::trainer
