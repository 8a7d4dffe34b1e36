// The C API's client (pshard_c.h's opaque pshard_client) and what its calls share: exceptions turned into status
// codes, argument checks, the job plan's variables, and a failed request's status.
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/control/cluster_client.h"
#include "common/error.h"
#include "common/keys/slice_layout.h"
#include "common/metrics/gpu_sampler.h"
#include "common/metrics/trace.h"
#include "common/run/node_env.h"
#include "worker/capi/pshard_c.h"
#include "worker/client/kv_client.h"
#include "worker/session/worker_session.h"

namespace pshard::capi {

using Clock = std::chrono::steady_clock;
using pshard::Error;

// An error with the status it maps to.
struct Failure {
  int status;
  std::string message;
};

// Sets this thread's last error (pshard_last_error) and returns `status`.
int fail(int status, const std::string& message);
const std::string& last_error();

// Runs `body`, turning every exception into a status and last_error (nothing escapes into C).
template <typename F>
int guarded(int error_status, F&& body) {
  try {
    return body();
  } catch (const Failure& f) {
    return fail(f.status, f.message);
  } catch (const std::bad_alloc&) {
    return fail(PSHARD_ERR_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return fail(error_status, e.what());
  }
}

template <typename T>
T* require(T* p, const char* what) {
  if (p == nullptr) throw Failure{PSHARD_ERR_ARGUMENT, std::string("pshard: ") + what + " is NULL"};
  return p;
}

// v = max(v, x), from any thread.
void raise_to(std::atomic<int64_t>& v, int64_t x);

// The job plan's variables (common/run/node_env.h); a malformed count is an ENVIRONMENT error.
pshard::NodeEnv read_node_env();
// `value` of the variable `name`, which this program cannot run without.
const std::string& require_env(const std::string& value, const char* name);

}  // namespace pshard::capi

struct pshard_client {
  using Clock = pshard::capi::Clock;
  using Failure = pshard::capi::Failure;

  pshard::Config cfg = pshard::Config::defaults();
  pshard::NodeEnv env;  // the job's PSHARD_* variables; rank 0 writes its tensor list into run_dir (kTensorListFile)
  pshard::ClusterClient::Options copt;
  // The worker's registration, job events, start and KV client; `cluster` and `kv` are its (kv: null before
  // pshard_start, and after pshard_close stopped it).
  std::unique_ptr<pshard::WorkerSession> worker;
  pshard::ClusterClient* cluster = nullptr;
  pshard::KvClient* kv = nullptr;
  int64_t local_rank = 0;
  Clock::time_point connected_at = Clock::now();

  std::vector<pshard::TensorSpec> tensors;  // KV names carry the shape: "fc1.weight[256,784]"
  std::vector<std::string> names;           // as declared
  std::vector<pshard::TableSpec> tables;    // embedding tables (pshard_add_table), sent to the servers at pshard_start
  bool scales_loss = false;                 // pshard_scale_loss: this worker's pushes are its own
  int64_t log_every = 50;                   // train.log_every; 0: no step events
  // Where this worker starts (pshard_start; WorkerSession::start): 0, a resumed run's step (PSHARD_START_STEP), a
  // joiner's first epoch's first step or, for a restarted worker (PSHARD_REJOIN), a step boundary the running workers
  // have not reached. A rejoining or joining worker's first pull of each tensor at that step is a join (the servers
  // count it again from there).
  int64_t start_step() const { return worker->start_step(); }
  bool rejoin() const { return worker->counted_from_start(); }
  bool joining() const { return worker->start_kind() == pshard::StartKind::kJoined; }
  std::set<int> joined;  // tensors whose join was sent

  // Elastic jobs (docs/OPERATIONS.md "Elastic jobs"): the plan of the epoch this worker trains (joining: the one it
  // joins with), whether the coordinator was told that the servers count it (its joins done), and what the learning
  // rate of an epoch's plan follows.
  std::optional<pshard::EpochPlan> plan;
  std::set<pshard_request> join_requests;  // joins not done yet
  bool joined_told = false;
  int64_t plan_told = 0;  // the last epoch whose plan this worker logged and reported (the lowest member does)
  int64_t batch_size = 0;
  int64_t total_steps = 0;

  // Requests not yet reported done, so that an unknown or finished one is an ARGUMENT error.
  std::mutex requests_mu;
  std::set<pshard_request> requests;

  // Inits this worker sent in place of a dead rank 0: a slice rank 0 initialised before it died refuses them
  // (alreadyInitialized), which is no failure.
  std::set<pshard_request> fallback_inits;

  // Since the last epoch report: the time blocked in waits, and the KV client's traffic at that report.
  std::mutex wait_mu;
  double wait_s = 0;
  pshard::KvTraffic reported_traffic;
  int64_t reported_step = -1;  // the step of the last epoch report (-1: none yet; the first counts from start_step)
  // The GPU this worker uses, sampled through NVML from pshard_start (null: no GPU in view, or no NVML).
  std::unique_ptr<pshard::GpuSampler> gpu;

  // How far this worker got: the run's declared length (train.epochs x steps_per_epoch; 0: not declared) and its
  // last epoch report (place and label; 0 and none before the first). The steps it pushed are its KV client's
  // (WorkerSession::leave tells them).
  int64_t epochs = 0;
  int64_t steps_per_epoch = 0;
  std::atomic<int64_t> epochs_reported{0};
  std::optional<int64_t> last_label;
  std::map<std::string, double> next_figures;  // pshard_report_figure's, for the next epoch report

  // An elastic job's members train different steps, so there the epochs tell: why leaving now, with exit status 0,
  // is leaving before the end of the job ("" when it reported epoch train.epochs, or no epoch yet).
  std::string left_elastic_job_early() const {
    const int64_t reported = epochs_reported.load();
    if (!kv || reported == 0 || reported >= epochs) return "";
    return "it left before the end of the job, after epoch " + std::to_string(reported) +
           " of train.epochs = " + std::to_string(epochs);
  }

  // The timeline (trace.steps; null when off) and the traced requests in flight: what, when issued.
  std::unique_ptr<pshard::Tracer> tracer;
  struct TracedRequest {
    pshard::TraceName name;  // "pushPull fc1.weight"
    int64_t step;
    Clock::time_point issued;
    uint64_t bytes;
  };
  std::map<pshard_request, TracedRequest> traced;  // guarded by requests_mu

  uint32_t rank() const { return cluster->rank(); }

  // The job's events (its abort, the workers declared dead), recorded from the cluster client's thread.
  const pshard::JobEvents& events() const { return worker->events(); }
  std::string aborted() const { return events().aborted(); }

  // This worker sends the initial weights: rank 0, or the lowest live rank once every lower one was declared dead
  // (failure_policy = continue) before the servers had them.
  bool initialiser() const { return events().initialiser(rank()); }

  void check_tensor(int tensor) const {
    if (!kv) throw Failure{PSHARD_ERR_STATE, "pshard: call pshard_start (DistributedOptimizer) before moving tensors"};
    if (tensor < 0 || static_cast<size_t>(tensor) >= tensors.size()) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: tensor index " + std::to_string(tensor) + " is not one of the " +
                                             std::to_string(tensors.size()) + " declared tensors"};
    }
  }

  const pshard::TableSpec& check_table(int table) const {
    if (!kv) throw Failure{PSHARD_ERR_STATE, "pshard: call pshard_start before moving rows"};
    if (table < 0 || static_cast<size_t>(table) >= tables.size()) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: table index " + std::to_string(table) + " is not one of the " +
                                             std::to_string(tables.size()) + " declared embedding tables"};
    }
    return tables[static_cast<size_t>(table)];
  }

  size_t numel(int tensor) const { return static_cast<size_t>(tensors[static_cast<size_t>(tensor)].numel); }

  pshard_request track(pshard_request r, const char* what = nullptr, int tensor = 0, int64_t step = 0) {
    std::lock_guard<std::mutex> lock(requests_mu);
    requests.insert(r);
    if (what && tracer && tracer->traces(step)) {
      traced[r] = {tracer->name(std::string(what) + " " + names[static_cast<size_t>(tensor)]), step, Clock::now(),
                   numel(tensor) * sizeof(float)};
    }
    return r;
  }
  void check_request(pshard_request r) {
    if (!kv) throw Failure{PSHARD_ERR_STATE, "pshard: no request can exist before pshard_start"};
    std::lock_guard<std::mutex> lock(requests_mu);
    if (requests.count(r) == 0) {
      throw Failure{PSHARD_ERR_ARGUMENT,
                    "pshard: request " + std::to_string(r) + " is unknown or was already reported done"};
    }
  }
  void finished(pshard_request r) {
    std::lock_guard<std::mutex> lock(requests_mu);
    requests.erase(r);
    auto t = traced.find(r);
    if (t == traced.end()) return;
    tracer->span(t->second.name, "comm", t->second.issued, Clock::now(),
                 pshard::TraceArgs().set("step", t->second.step).set("fp32_bytes", t->second.bytes), 1);
    traced.erase(t);
  }

  // Elastic jobs: a joining worker's join `r` is done; once every tensor's is, the servers count it from its first
  // step, and the coordinator may send the epoch's plan to the other members.
  void join_done(pshard_request r) {
    {
      std::lock_guard<std::mutex> lock(requests_mu);
      if (!joining() || joined_told || join_requests.erase(r) == 0) return;
      if (!join_requests.empty() || joined.size() < tensors.size()) return;
      joined_told = true;
    }
    cluster->epoch_joined(plan->epoch);
  }

  void add_wait(double s) {
    std::lock_guard<std::mutex> lock(wait_mu);
    wait_s += s;
  }
};

namespace pshard::capi {

// Rank 0's tensors, one key ("fc1.weight[256,784]") per line, in the run directory: the servers only compare layout
// fingerprints, so a rank they refuse finds there which of its tensors differs from rank 0's.
void write_tensor_list(const pshard_client* c);
// A failed request: the job's abort, when there is one, is the cause worth naming.
int request_failed(pshard_client* c, const std::exception& e, pshard_request r);

}  // namespace pshard::capi
