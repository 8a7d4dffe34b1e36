// The C API's requests (pshard_c.h): init, pull, push_pull, wait and poll, the stop at a checkpoint and the steps
// skipped for loss scaling.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/util/log.h"
#include "worker/capi/client.h"
#include "worker/capi/pshard_c.h"

using namespace pshard::capi;  // the C API's own helpers (client.h)

extern "C" {

int pshard_request_stop(pshard_client* c, int64_t step) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    if (!c->kv) throw Failure{PSHARD_ERR_STATE, "pshard: request a stop after pshard_start"};
    if (step < 0) throw Failure{PSHARD_ERR_ARGUMENT, "pshard: step must be >= 0, got " + std::to_string(step)};
    c->kv->request_stop(step);
    return PSHARD_OK;
  });
}

int pshard_scale_loss(pshard_client* c) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    if (c->kv) throw Failure{PSHARD_ERR_STATE, "pshard: pshard_scale_loss comes before pshard_start"};
    c->scales_loss = true;
    return PSHARD_OK;
  });
}

int pshard_request_skip(pshard_client* c, int64_t step) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    if (!c->kv) throw Failure{PSHARD_ERR_STATE, "pshard: request a skip after pshard_start"};
    if (step < -1) throw Failure{PSHARD_ERR_ARGUMENT, "pshard: step must be >= -1, got " + std::to_string(step)};
    const pshard::JobShape& job = c->worker->job();
    if (step >= 0 && !job.sync()) {
      throw Failure{PSHARD_ERR_STATE,
                    std::string("pshard: only a sync job skips a step for every worker; this one is ") +
                        job.mode_name() + ", whose workers skip their own steps by not pushing them"};
    }
    c->kv->request_skip(step);
    return PSHARD_OK;
  });
}

int pshard_stop_at(const pshard_client* c, int64_t* out) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    require(out, "out");
    if (!c->kv) throw Failure{PSHARD_ERR_STATE, "pshard: the stop step is known after pshard_start"};
    *out = c->kv->stop_at();
    return PSHARD_OK;
  });
}

int pshard_start_step(const pshard_client* c, int64_t* out) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    require(out, "out");
    if (!c->kv) throw Failure{PSHARD_ERR_STATE, "pshard: the start step is known after pshard_start"};
    *out = c->start_step();
    return PSHARD_OK;
  });
}

int pshard_init_tensor(pshard_client* c, int tensor, const float* weights, pshard_request* out) {
  return guarded(PSHARD_ERR_SERVER, [&]() -> int {
    require(c, "client");
    c->check_tensor(tensor);
    require(weights, "weights");
    require(out, "out");
    if (!c->initialiser()) {
      throw Failure{PSHARD_ERR_STATE, "pshard: rank 0 sends the initial weights (this is rank " +
                                          std::to_string(c->rank()) + ", and a lower rank is alive)"};
    }
    if (c->start_step() > 0) {
      throw Failure{PSHARD_ERR_STATE, "pshard: this worker starts at step " + std::to_string(c->start_step()) +
                                          " (a resumed run or a restarted worker): the servers hold the weights, "
                                          "pull them (pshard_start_step)"};
    }
    *out = c->track(c->kv->init(c->tensors[static_cast<size_t>(tensor)].name, weights, c->numel(tensor)));
    if (c->rank() != 0) {
      std::lock_guard<std::mutex> lock(c->requests_mu);
      c->fallback_inits.insert(*out);
    }
    return PSHARD_OK;
  });
}

int pshard_initialiser(pshard_client* c, int* out) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    require(out, "out");
    *out = c->initialiser() ? 1 : 0;
    return PSHARD_OK;
  });
}

int pshard_pull(pshard_client* c, int tensor, float* weights, int64_t step, pshard_request* out) {
  return guarded(PSHARD_ERR_SERVER, [&]() -> int {
    require(c, "client");
    c->check_tensor(tensor);
    require(weights, "weights");
    require(out, "out");
    if (step < 0) throw Failure{PSHARD_ERR_ARGUMENT, "pshard: step must be >= 0, got " + std::to_string(step)};
    const std::string& name = c->tensors[static_cast<size_t>(tensor)].name;
    if (c->rejoin() && step == c->start_step() && c->joined.insert(tensor).second) {
      *out = c->track(c->kv->join(name, weights, c->numel(tensor), step), "join", tensor, step);
      if (c->joining()) {
        std::lock_guard<std::mutex> lock(c->requests_mu);
        c->join_requests.insert(*out);
      }
      return PSHARD_OK;
    }
    *out = c->track(c->kv->zpull(name, weights, c->numel(tensor), step), "pull", tensor, step);
    return PSHARD_OK;
  });
}

int pshard_push_pull(pshard_client* c, int tensor, const float* grad, float* weights, int64_t step,
                     pshard_request* out) {
  return guarded(PSHARD_ERR_SERVER, [&]() -> int {
    require(c, "client");
    c->check_tensor(tensor);
    require(grad, "grad");
    require(weights, "weights");
    require(out, "out");
    if (step < 0) throw Failure{PSHARD_ERR_ARGUMENT, "pshard: step must be >= 0, got " + std::to_string(step)};
    *out =
        c->track(c->kv->zpush_pull(c->tensors[static_cast<size_t>(tensor)].name, grad, weights, c->numel(tensor), step),
                 "pushPull", tensor, step);
    return PSHARD_OK;
  });
}

}  // extern "C"

namespace {

// pshard_wait, and the notes of the request's replies when it is done well (`notes`, when given).
int wait_request(pshard_client* c, pshard_request r, int64_t timeout_ms, pshard::KvClient::ReplyNotes* notes) {
  return guarded(PSHARD_ERR_SERVER, [&]() -> int {
    require(c, "client");
    c->check_request(r);
    const auto t0 = Clock::now();
    // Without a deadline the KV client's own (cluster.request_timeout_ms) ends the wait.
    const auto limit = timeout_ms < 0 ? Clock::time_point::max() : t0 + std::chrono::milliseconds(timeout_ms);
    int status = PSHARD_OK;
    for (;;) {
      // Short slices, so that an abort (a dead worker, the coordinator lost) ends the wait at once.
      const auto slice = std::min<Clock::duration>(std::chrono::milliseconds(50), limit - Clock::now());
      bool done = false;
      try {
        done = c->kv->wait_for(r,
                               std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::max<Clock::duration>(slice, Clock::duration::zero())),
                               notes);
      } catch (const std::exception& e) {
        status = request_failed(c, e, r);
        break;
      }
      if (done) break;
      const std::string reason = c->aborted();
      if (!reason.empty()) {
        status = fail(PSHARD_ERR_ABORTED, "pshard: the job was aborted: " + reason);
        break;
      }
      if (Clock::now() >= limit) {
        status = fail(PSHARD_ERR_TIMEOUT, "pshard: request " + std::to_string(r) + " is not done after " +
                                              std::to_string(timeout_ms) + " ms");
        break;
      }
    }
    c->add_wait(std::chrono::duration<double>(Clock::now() - t0).count());
    if (status != PSHARD_ERR_TIMEOUT) c->finished(r);  // done, well or not (an abort drops the request)
    if (status == PSHARD_OK) c->join_done(r);
    return status;
  });
}

}  // namespace

extern "C" {

int pshard_wait(pshard_client* c, pshard_request r, int64_t timeout_ms) {
  return wait_request(c, r, timeout_ms, nullptr);
}

int pshard_wait_skipped(pshard_client* c, pshard_request r, int64_t timeout_ms, int* skipped) {
  const int given = guarded(PSHARD_ERR_ARGUMENT, [&]() -> int {
    require(skipped, "skipped");
    return PSHARD_OK;
  });
  if (given != PSHARD_OK) return given;
  pshard::KvClient::ReplyNotes notes;
  const int status = wait_request(c, r, timeout_ms, &notes);
  *skipped = status == PSHARD_OK && notes.skipped ? 1 : 0;
  return status;
}

int pshard_poll(pshard_client* c, pshard_request r) {
  return guarded(PSHARD_ERR_SERVER, [&]() -> int {
    require(c, "client");
    c->check_request(r);
    int status = PSHARD_PENDING;
    try {
      if (c->kv->wait_for(r, std::chrono::milliseconds(0))) status = PSHARD_OK;
    } catch (const std::exception& e) {
      status = request_failed(c, e, r);
    }
    if (status != PSHARD_PENDING) c->finished(r);
    if (status == PSHARD_OK) c->join_done(r);
    return status;
  });
}

}  // extern "C"
