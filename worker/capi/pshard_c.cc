// The C API of a pshard worker (pshard_c.h): a shim over ClusterClient and KvClient that turns exceptions into
// status codes and job events into ABORTED.
#include "worker/capi/pshard_c.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/config/schema.h"
#include "common/control/cluster_client.h"
#include "common/error.h"
#include "common/keys/slice_layout.h"
#include "common/metrics/epoch_report.h"
#include "common/metrics/start_event.h"
#include "common/metrics/trace.h"
#include "common/run/node_env.h"
#include "common/transport/curve.h"
#include "common/util/binary_file.h"
#include "common/util/log.h"
#include "optim/lr_schedule.h"
#include "worker/client/kv_client.h"
#include "worker/trainer/trainer.h"

namespace {

using Clock = std::chrono::steady_clock;
using pshard::Error;

thread_local std::string last_error;

// An error with the status it maps to.
struct Failure {
  int status;
  std::string message;
};

int fail(int status, const std::string& message) {
  last_error = message;
  return status;
}

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

// The job plan's variables (common/run/node_env.h); a malformed count is an ENVIRONMENT error.
pshard::NodeEnv read_node_env() {
  try {
    return pshard::NodeEnv::from_environment();
  } catch (const Error& e) {
    throw Failure{PSHARD_ERR_ENVIRONMENT, e.what()};
  }
}

// `value` of the variable `name`, which this program cannot run without.
const std::string& require_env(const std::string& value, const char* name) {
  if (value.empty()) {
    throw Failure{PSHARD_ERR_ENVIRONMENT,
                  std::string("pshard: ") + name +
                      " is not set: start this program with `pshard launch ... -- CMD` or `pshard task/slurm ... -- "
                      "CMD` (docs/PYTHON.md)"};
  }
  return value;
}

}  // namespace

struct pshard_client {
  pshard::Config cfg = pshard::Config::defaults();
  pshard::NodeEnv env;  // the job's PSHARD_* variables; rank 0 writes its tensor list into run_dir (kTensorListFile)
  pshard::ClusterClient::Options copt;
  std::unique_ptr<pshard::ClusterClient> cluster;
  std::unique_ptr<pshard::KvClient> kv;
  int64_t local_rank = 0;
  Clock::time_point connected_at = Clock::now();

  std::vector<pshard::TensorSpec> tensors;  // KV names carry the shape: "fc1.weight[256,784]"
  std::vector<std::string> names;           // as declared
  std::unique_ptr<pshard::optim::LrSchedule> schedule;
  int64_t log_every = 50;  // train.log_every; 0: no step events
  // Where this worker starts (pshard_start): 0, a resumed run's step (PSHARD_START_STEP) or, for a restarted worker
  // (PSHARD_REJOIN), a step boundary the running workers have not reached; its first pull of each tensor at that step
  // is then a join (the servers count this worker again from it).
  int64_t start_step = 0;
  bool rejoin = false;   // the first pulls at start_step are joins: restarted (PSHARD_REJOIN) or joining an elastic job
  std::set<int> joined;  // tensors whose join was sent

  // Elastic jobs (docs/OPERATIONS.md "Elastic jobs"): the plan of the epoch this worker trains (joining: the one it
  // joins with), whether the coordinator was told that the servers count it (its joins done), and what the learning
  // rate of an epoch's plan follows.
  std::optional<pshard::EpochPlan> plan;
  bool joining = false;
  std::set<pshard_request> join_requests;  // joins not done yet
  bool joined_told = false;
  int64_t plan_told = 0;  // the last epoch whose plan this worker logged and reported (the lowest member does)
  int64_t batch_size = 0;
  int64_t total_steps = 0;

  // Requests not yet reported done, so that an unknown or finished one is an ARGUMENT error.
  std::mutex requests_mu;
  std::set<pshard_request> requests;

  // Job events, from the cluster client's thread.
  std::mutex events_mu;
  std::string abort_reason;         // non-empty once the job was aborted
  std::set<uint32_t> dead_workers;  // declared dead by the coordinator
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

  // How far this worker got: the run's declared length (train.epochs x steps_per_epoch; 0: not declared), the
  // steps it pushed (the highest step + 1), which pshard_close tells the coordinator, and its last epoch report
  // (place and label; 0 and none before the first).
  int64_t epochs = 0;
  int64_t steps_per_epoch = 0;
  std::atomic<int64_t> steps_pushed{0};
  std::atomic<int64_t> epochs_reported{0};
  std::optional<int64_t> last_label;

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

  std::string aborted() {
    std::lock_guard<std::mutex> lock(events_mu);
    return abort_reason;
  }

  // This worker sends the initial weights: rank 0, or the lowest live rank once every lower one was declared dead
  // (failure_policy = continue) before the servers had them.
  bool initialiser() {
    std::lock_guard<std::mutex> lock(events_mu);
    for (uint32_t r = 0; r < rank(); ++r) {
      if (dead_workers.count(r) == 0) return false;
    }
    return true;
  }

  void check_tensor(int tensor) const {
    if (!kv) throw Failure{PSHARD_ERR_STATE, "pshard: call pshard_start (DistributedOptimizer) before moving tensors"};
    if (tensor < 0 || static_cast<size_t>(tensor) >= tensors.size()) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: tensor index " + std::to_string(tensor) + " is not one of the " +
                                             std::to_string(tensors.size()) + " declared tensors"};
    }
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
      if (!joining || joined_told || join_requests.erase(r) == 0) return;
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

namespace {

template <typename T>
T* require(T* p, const char* what) {
  if (p == nullptr) throw Failure{PSHARD_ERR_ARGUMENT, std::string("pshard: ") + what + " is NULL"};
  return p;
}

// v = max(v, x), from any thread.
void raise_to(std::atomic<int64_t>& v, int64_t x) {
  int64_t now = v.load();
  while (now < x && !v.compare_exchange_weak(now, x)) {
  }
}

// Rank 0's tensors, one key ("fc1.weight[256,784]") per line, in the run directory: the servers only compare layout
// fingerprints, so a rank they refuse finds here which of its tensors differs from rank 0's.
constexpr const char* kTensorListFile = "tensors.txt";

void write_tensor_list(const pshard_client* c) {
  if (c->env.run_dir.empty()) return;
  std::string text;
  for (const pshard::TensorSpec& t : c->tensors) text += t.name + "\n";
  try {
    pshard::binary::write_file_atomically(c->env.run_dir + "/" + kTensorListFile, text, "tensor list");
  } catch (const std::exception& e) {
    PSHARD_LOG(kWarn) << e.what() << " (a rank whose model differs will not be told which tensor)";
  }
}

// " (the first difference: tensor 2 is 'fc2.weight[10,128]' here, 'fc2.weight[128,10]' on rank 0)", or "" when
// rank 0's list cannot be read.
std::string first_difference(const pshard_client* c) {
  std::vector<std::string> theirs;
  try {
    std::stringstream lines(pshard::binary::read_file(c->env.run_dir + "/" + kTensorListFile, "tensor list"));
    for (std::string line; std::getline(lines, line);) theirs.push_back(line);
  } catch (const std::exception&) {
    return "";
  }
  const size_t n = std::max(theirs.size(), c->tensors.size());
  for (size_t i = 0; i < n; ++i) {
    const std::string here = i < c->tensors.size() ? "'" + c->tensors[i].name + "'" : "none";
    const std::string there = i < theirs.size() ? "'" + theirs[i] + "'" : "none";
    if (here != there) {
      return " (the first difference: tensor " + std::to_string(i) + " is " + here + " here, " + there +
             " on rank 0; " + std::to_string(c->tensors.size()) + " tensors here, " + std::to_string(theirs.size()) +
             " on rank 0)";
    }
  }
  return "";
}

// A failed request: the job's abort, when there is one, is the cause worth naming.
int request_failed(pshard_client* c, const std::exception& e, pshard_request r) {
  const std::string reason = c->aborted();
  if (!reason.empty()) return fail(PSHARD_ERR_ABORTED, "pshard: the job was aborted: " + reason);
  const std::string what = e.what();
  const auto* refused = dynamic_cast<const pshard::KvError*>(&e);
  if (refused != nullptr && refused->code() == pshard::protocol::ErrorCode::ALREADY_INITIALIZED) {
    std::lock_guard<std::mutex> lock(c->requests_mu);
    if (c->fallback_inits.count(r) != 0) return PSHARD_OK;  // rank 0 initialised those slices before it died
  }
  if (refused != nullptr && refused->code() == pshard::protocol::ErrorCode::LAYOUT_MISMATCH && c->rank() != 0) {
    return fail(PSHARD_ERR_SERVER, "pshard: the tensors of rank " + std::to_string(c->rank()) +
                                       " (names, shapes, order) differ from rank 0's" + first_difference(c) + ": " +
                                       what);
  }
  return fail(PSHARD_ERR_SERVER, what);
}

}  // namespace

extern "C" {

const char* pshard_last_error(void) { return last_error.c_str(); }

const char* pshard_status_name(int status) {
  switch (status) {
    case PSHARD_OK: return "PSHARD_OK";
    case PSHARD_PENDING: return "PSHARD_PENDING";
    case PSHARD_ERR_ARGUMENT: return "PSHARD_ERR_ARGUMENT";
    case PSHARD_ERR_ENVIRONMENT: return "PSHARD_ERR_ENVIRONMENT";
    case PSHARD_ERR_CONFIG: return "PSHARD_ERR_CONFIG";
    case PSHARD_ERR_CONNECT: return "PSHARD_ERR_CONNECT";
    case PSHARD_ERR_STATE: return "PSHARD_ERR_STATE";
    case PSHARD_ERR_SERVER: return "PSHARD_ERR_SERVER";
    case PSHARD_ERR_TIMEOUT: return "PSHARD_ERR_TIMEOUT";
    case PSHARD_ERR_ABORTED: return "PSHARD_ERR_ABORTED";
    case PSHARD_ERR_INTERNAL: return "PSHARD_ERR_INTERNAL";
    default: return "PSHARD_UNKNOWN_STATUS";
  }
}

int pshard_connect(pshard_client** out) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(out, "out");
    *out = nullptr;
    auto c = std::make_unique<pshard_client>();
    c->env = read_node_env();
    const std::string& coordinator = require_env(c->env.coordinator, "PSHARD_COORDINATOR");
    const std::string& config_path = require_env(c->env.config_path, "PSHARD_CONFIG");
    c->local_rank = std::max<int64_t>(c->env.local_rank, 0);
    try {
      c->cfg = pshard::Config::from_file(config_path, c->env.overrides);
    } catch (const std::exception& e) {
      throw Failure{PSHARD_ERR_CONFIG, e.what()};
    }
    const pshard::Config& cfg = c->cfg;
    pshard::log::configure("worker", pshard::log::level_from_string(cfg.get_string("log.level")));
    c->copt = pshard::ClusterClient::Options::from_config(cfg, pshard::NodeRole::kWorker, coordinator, c->env);
    try {
      c->copt.curve =
          pshard::transport::job_curve_keys(cfg, pshard::transport::curve_key_dir(cfg, c->env.key_dir, c->env.run_dir));
    } catch (const std::exception& e) {
      throw Failure{PSHARD_ERR_CONFIG, e.what()};
    }
    // 0: the tensors are declared after the rendezvous; the servers check every request against rank 0's list.
    c->copt.layout_fingerprint = 0;
    c->copt.replaces_live = c->env.rejoin;  // restarted by the launcher: it takes its rank back
    c->log_every = cfg.get_int("train.log_every");
    try {
      c->cluster = std::make_unique<pshard::ClusterClient>(c->copt);
    } catch (const std::exception& e) {
      throw Failure{PSHARD_ERR_CONNECT, e.what()};
    }
    pshard_client* raw = c.get();
    c->cluster->on_event([raw](const pshard::ClusterEvent& e) {
      std::lock_guard<std::mutex> lock(raw->events_mu);
      if (e.kind == pshard::ClusterEvent::Kind::kAbort && raw->abort_reason.empty()) {
        raw->abort_reason = e.reason.empty() ? "no reason given" : e.reason;
      }
      if (e.kind == pshard::ClusterEvent::Kind::kNodeDead && e.node.role == pshard::NodeRole::kWorker) {
        raw->dead_workers.insert(e.node.rank);
      }
    });
    pshard::log::configure("worker " + std::to_string(c->rank()),
                           pshard::log::level_from_string(cfg.get_string("log.level")));
    *out = c.release();
    return PSHARD_OK;
  });
}

int pshard_close(pshard_client* c, int exit_status, const char* reason) {
  if (c == nullptr) return PSHARD_OK;
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    std::unique_ptr<pshard_client> owned(c);
    const bool elastic = owned->cluster->map().elastic();
    const std::string early = exit_status == 0 && elastic ? owned->left_elastic_job_early() : "";
    // Outside elastic jobs the coordinator compares the workers' pushes (-1: this worker never started training).
    const int64_t pushed = owned->kv && !elastic ? owned->steps_pushed.load() : -1;
    owned->kv.reset();  // stops the I/O thread before the cluster client says goodbye
    const std::string& run_dir = owned->env.run_dir;
    if (owned->tracer && !run_dir.empty()) {
      pshard::write_trace_file(*owned->tracer, run_dir, "worker-" + std::to_string(owned->rank()),
                               owned->cluster->clock_offset());
    }
    // A worker of an elastic job that leaves before its end did not finish it, whatever status it gives: the job's
    // failure policy decides (abort: the job fails naming it; continue: it counts as a dead worker).
    std::string why = reason ? reason : "";
    if (!early.empty()) {
      exit_status = 1;
      why = early + (why.empty() ? "" : " (" + why + ")");
      PSHARD_LOG(kError) << why;
    }
    owned->cluster->leave(exit_status, why, pushed);
    // Joins the client's thread now: its event callback uses members declared after `cluster`, which are destroyed
    // before it.
    owned->cluster.reset();
    return PSHARD_OK;
  });
}

int pshard_rank(const pshard_client* c) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int { return static_cast<int>(require(c, "client")->rank()); });
}

int pshard_size(const pshard_client* c) {
  return guarded(PSHARD_ERR_INTERNAL,
                 [&]() -> int { return static_cast<int>(require(c, "client")->cluster->map().num_workers); });
}

int pshard_elastic(const pshard_client* c) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int { return require(c, "client")->cluster->map().elastic() ? 1 : 0; });
}

int pshard_epoch_plan(pshard_client* c, int64_t epoch, int64_t step, int64_t* first_step, int* index, int* count,
                      uint32_t* members, int max_members) {
  return guarded(PSHARD_ERR_SERVER, [&]() -> int {
    require(c, "client");
    require(first_step, "first_step");
    require(index, "index");
    require(count, "count");
    if (!c->cluster->map().elastic()) {
      throw Failure{PSHARD_ERR_STATE, "pshard: epoch plans are for elastic jobs (pshard launch --workers MIN:MAX)"};
    }
    if (!c->kv) throw Failure{PSHARD_ERR_STATE, "pshard: ask for an epoch's plan after pshard_start"};
    if (epoch < 1 || epoch > c->epochs) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: epoch " + std::to_string(epoch) +
                                             " is outside 1..train.epochs = " + std::to_string(c->epochs)};
    }
    // The plan of the epoch asked for last is kept (a joining worker's first is the one it joined with); every other
    // epoch's is asked for at its start.
    if (!(c->plan && epoch == c->plan->epoch)) {
      if (c->joining && c->plan && epoch < c->plan->epoch) {
        throw Failure{PSHARD_ERR_ARGUMENT, "pshard: this worker joined the job with epoch " +
                                               std::to_string(c->plan->epoch) + " (0-based " +
                                               std::to_string(c->plan->epoch - 1) + "); it cannot train epoch " +
                                               std::to_string(epoch) + " (start the loop at ps.start_epoch())"};
      }
      const std::chrono::milliseconds wait(c->cfg.get_int("cluster.request_timeout_ms") +
                                           c->cfg.get_int("cluster.rendezvous_timeout_ms"));
      std::optional<pshard::EpochPlan> plan;
      try {
        plan = c->cluster->enter_epoch(epoch, step, wait);
      } catch (const std::exception& e) {
        if (!c->aborted().empty()) return request_failed(c, e, 0);
        throw Failure{PSHARD_ERR_TIMEOUT, e.what()};
      }
      if (!plan) throw Failure{PSHARD_ERR_ABORTED, "pshard: the job ended before epoch " + std::to_string(epoch)};
      c->plan = plan;
    }
    const pshard::EpochPlan& p = *c->plan;
    auto me = std::find(p.members.begin(), p.members.end(), c->rank());
    if (p.epoch != epoch || me == p.members.end()) {
      throw Failure{PSHARD_ERR_STATE, "pshard: the coordinator's plan of epoch " + std::to_string(p.epoch) +
                                          " does not fit worker " + std::to_string(c->rank()) + " at epoch " +
                                          std::to_string(epoch)};
    }
    *first_step = p.first_step;
    *index = static_cast<int>(me - p.members.begin());
    *count = static_cast<int>(p.members.size());
    for (int i = 0; members && i < max_members && i < *count; ++i) members[i] = p.members[static_cast<size_t>(i)];
    // The learning rate reported follows the global batch of the epoch's members, as the servers' does.
    const int64_t global = c->batch_size * static_cast<int64_t>(p.members.size());
    c->schedule = std::make_unique<pshard::optim::LrSchedule>(
        pshard::optim::LrSchedule::from_config(c->cfg, global, std::max<int64_t>(c->total_steps, 1)));
    if (c->rank() == p.members.front() && c->plan_told < p.epoch) {
      c->plan_told = p.epoch;
      const double lr = c->schedule->lr_at(p.first_step);
      PSHARD_LOG(kInfo) << "epoch " << p.epoch << ": " << p.members.size() << " workers x batch " << c->batch_size
                        << " = global batch " << global << ", from step " << p.first_step << ", learning rate " << lr
                        << (c->cfg.get_string("lr_schedule.scaling") == "linear" ? " (linear scaling rule)" : "");
      pshard::Json ranks = pshard::Json::array();
      for (uint32_t r : p.members) ranks.push(r);
      c->cluster->report(pshard::Json::object()
                             .set("event", "members")
                             .set("epoch", p.epoch)
                             .set("first_step", p.first_step)
                             .set("workers", ranks)
                             .set("batch", c->batch_size)
                             .set("global_batch", global)
                             .set("lr", lr));
    }
    return PSHARD_OK;
  });
}

int pshard_joining_epoch(const pshard_client* c, int64_t* out) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    require(out, "out");
    if (!c->kv) throw Failure{PSHARD_ERR_STATE, "pshard: the epoch a worker joins with is known after pshard_start"};
    *out = c->joining && c->plan ? c->plan->epoch : 0;
    return PSHARD_OK;
  });
}

int pshard_local_rank(const pshard_client* c) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int { return static_cast<int>(require(c, "client")->local_rank); });
}

int pshard_config_type(const char* key) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(key, "key");
    const pshard::ConfigKey* k = pshard::find_config_key(key);
    if (k == nullptr) throw Failure{PSHARD_ERR_ARGUMENT, std::string("pshard: unknown config key '") + key + "'"};
    switch (k->type) {
      case pshard::ConfigType::kString: return PSHARD_CONFIG_STRING;
      case pshard::ConfigType::kInt: return PSHARD_CONFIG_INT;
      case pshard::ConfigType::kDouble: return PSHARD_CONFIG_DOUBLE;
      case pshard::ConfigType::kBool: return PSHARD_CONFIG_BOOL;
      case pshard::ConfigType::kIntList: return PSHARD_CONFIG_INT_LIST;
    }
    return PSHARD_CONFIG_STRING;
  });
}

int pshard_config_get(const pshard_client* c, const char* key, char* buf, size_t len) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    require(key, "key");
    const pshard::ConfigKey* k = pshard::find_config_key(key);
    if (k == nullptr) throw Failure{PSHARD_ERR_ARGUMENT, std::string("pshard: unknown config key '") + key + "'"};
    std::string text;
    switch (k->type) {
      case pshard::ConfigType::kString: text = c->cfg.get_string(key); break;
      case pshard::ConfigType::kInt: text = std::to_string(c->cfg.get_int(key)); break;
      case pshard::ConfigType::kDouble: {
        std::ostringstream s;
        s.precision(17);
        s << c->cfg.get_double(key);
        text = s.str();
        break;
      }
      case pshard::ConfigType::kBool: text = c->cfg.get_bool(key) ? "true" : "false"; break;
      case pshard::ConfigType::kIntList: {
        text = "[";
        for (int64_t v : c->cfg.get_int_list(key)) text += (text.size() > 1 ? ", " : "") + std::to_string(v);
        text += "]";
        break;
      }
    }
    if (len > 0) {
      require(buf, "buf");
      const size_t n = std::min(text.size(), len - 1);
      std::memcpy(buf, text.data(), n);
      buf[n] = '\0';
    }
    return static_cast<int>(text.size());
  });
}

int pshard_barrier(pshard_client* c, const char* name, int64_t timeout_ms) {
  int any_vote = 0;
  return pshard_barrier_vote(c, name, 0, &any_vote, timeout_ms);
}

int pshard_barrier_vote(pshard_client* c, const char* name, int vote, int* any_vote, int64_t timeout_ms) {
  return guarded(PSHARD_ERR_TIMEOUT, [&]() -> int {
    require(c, "client");
    require(name, "name");
    require(any_vote, "any_vote");
    const std::chrono::milliseconds limit(timeout_ms < 0 ? int64_t{365} * 24 * 3600 * 1000 : timeout_ms);
    try {
      *any_vote = c->cluster->barrier_vote(name, vote != 0, limit) ? 1 : 0;
    } catch (const std::exception& e) {
      if (!c->aborted().empty()) return request_failed(c, e, 0);
      throw;
    }
    return PSHARD_OK;
  });
}

int pshard_add_tensor(pshard_client* c, const char* name, int ndim, const int64_t* shape, int dtype) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    require(name, "name");
    if (c->kv)
      throw Failure{PSHARD_ERR_STATE, std::string("pshard: tensor '") + name + "' declared after pshard_start"};
    if (*name == '\0') throw Failure{PSHARD_ERR_ARGUMENT, "pshard: a tensor name is empty"};
    if (dtype != PSHARD_FLOAT32) {
      throw Failure{PSHARD_ERR_ARGUMENT, std::string("pshard: tensor '") + name + "' has dtype " +
                                             std::to_string(dtype) + "; the servers hold float32 only"};
    }
    if (ndim < 0 || (ndim > 0 && shape == nullptr)) {
      throw Failure{PSHARD_ERR_ARGUMENT,
                    std::string("pshard: tensor '") + name + "' has a bad shape (ndim " + std::to_string(ndim) + ")"};
    }
    if (std::find(c->names.begin(), c->names.end(), name) != c->names.end()) {
      throw Failure{PSHARD_ERR_ARGUMENT, std::string("pshard: tensor '") + name + "' is declared twice"};
    }
    uint64_t numel = 1;
    std::string dims;
    for (int i = 0; i < ndim; ++i) {
      if (shape[i] < 1 || shape[i] > (int64_t{1} << 40)) {
        throw Failure{PSHARD_ERR_ARGUMENT, std::string("pshard: tensor '") + name + "' dimension " + std::to_string(i) +
                                               " is " + std::to_string(shape[i])};
      }
      numel *= static_cast<uint64_t>(shape[i]);
      dims += (i ? "," : "") + std::to_string(shape[i]);
    }
    // The shape is part of the name, so that ranks whose tensors differ only in shape disagree on the layout.
    c->tensors.push_back({std::string(name) + "[" + dims + "]", numel});
    c->names.push_back(name);
    return static_cast<int>(c->tensors.size() - 1);
  });
}

int pshard_start(pshard_client* c, const char* model, int64_t batch_size, int64_t steps_per_epoch) {
  return guarded(PSHARD_ERR_SERVER, [&]() -> int {
    require(c, "client");
    if (c->kv) throw Failure{PSHARD_ERR_STATE, "pshard: pshard_start called twice"};
    if (c->tensors.empty()) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: the model has no trainable parameters (no tensor was declared)"};
    }
    if (batch_size < 1 || steps_per_epoch < 0) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: batch_size must be >= 1 and steps_per_epoch >= 0, got " +
                                             std::to_string(batch_size) + " and " + std::to_string(steps_per_epoch)};
    }
    const pshard::Config& cfg = c->cfg;
    const bool elastic = c->cluster->map().elastic();
    // An elastic job's epochs train with whichever workers are in it: at first, its fewest.
    const uint32_t world = elastic ? c->cluster->map().min_workers : c->cluster->map().num_workers;
    // train.epochs is the program's declared length (progress, ETA, a schedule's length) where set; an elastic
    // job's end is its epochs.
    const int64_t epochs = elastic || cfg.is_set("train.epochs") ? cfg.get_int("train.epochs") : 0;
    c->epochs = epochs;
    // An elastic job's epochs have as many steps as its members make: its end is known by the epochs reported.
    if (elastic) steps_per_epoch = 0;
    c->steps_per_epoch = steps_per_epoch;
    c->batch_size = batch_size;
    const int64_t total_steps = steps_per_epoch * epochs;
    c->total_steps = total_steps;
    const pshard::optim::LrScheduleParams sp = pshard::optim::LrScheduleParams::from_config(cfg);
    // A cosine schedule without lr_schedule.total_steps in an elastic job was refused with the config (config.cc).
    if (elastic && cfg.get_string("cluster.elastic_batch") == "global") {
      throw Failure{PSHARD_ERR_CONFIG,
                    "pshard: cluster.elastic_batch = global is for pshard's own workers: a program's per-worker batch "
                    "is its data loader's (keep the default, worker)"};
    }
    if (elastic && (c->env.rejoin || c->env.start_step > 0)) {
      throw Failure{PSHARD_ERR_STATE,
                    "pshard: an elastic job (cluster.min_workers > 0) cannot be resumed or restarted: workers join it "
                    "as new ones"};
    }
    if (sp.name == "cosine" && sp.total_steps == 0 && total_steps == 0) {
      throw Failure{PSHARD_ERR_CONFIG,
                    "pshard: lr_schedule.name = cosine needs the run's length: set train.epochs and give "
                    "steps_per_epoch (DistributedOptimizer(model, steps_per_epoch=N)), or set lr_schedule.total_steps"};
    }
    try {
      c->schedule = std::make_unique<pshard::optim::LrSchedule>(
          pshard::optim::LrSchedule::from_config(cfg, batch_size * world, std::max<int64_t>(total_steps, 1)));
    } catch (const std::exception& e) {
      throw Failure{PSHARD_ERR_CONFIG, e.what()};
    }
    const pshard::KvClientOptions kopt =
        pshard::KvClientOptions::from_config(cfg, *c->cluster, c->copt, c->tensors, total_steps);
    c->kv = std::make_unique<pshard::KvClient>(kopt);
    c->rejoin = c->env.rejoin;
    if (elastic && c->cluster->joins_running()) {
      // Joining a running elastic job: at the next epoch's start, counted by the servers from its first step on.
      PSHARD_LOG(kInfo) << "joined the running job: it trains from the next epoch's start";
      std::optional<pshard::EpochPlan> plan = c->cluster->enter_epoch(0, -1, std::chrono::hours(24 * 365));
      if (!plan) {
        throw Failure{PSHARD_ERR_STATE,
                      "pshard: the job ended before another epoch began: this worker joined too late to train"};
      }
      c->plan = plan;
      c->joining = true;
      c->rejoin = true;
      c->start_step = plan->first_step;
    } else if (c->env.rejoin) {
      if (steps_per_epoch == 0) {
        throw Failure{PSHARD_ERR_ARGUMENT,
                      "pshard: a restarted worker rejoins at a step boundary of the run: give steps_per_epoch "
                      "(DistributedOptimizer(model, steps_per_epoch=N))"};
      }
      c->start_step = c->kv->servers_step() + pshard::kRejoinMargin;
      if (total_steps > 0) c->start_step = std::min(c->start_step, total_steps);
      PSHARD_LOG(kInfo) << "rejoining the job at step " << c->start_step
                        << (total_steps > 0 ? " of " + std::to_string(total_steps) : std::string());
      c->cluster->report(pshard::Json::object()
                             .set("event", "rejoin")
                             .set("rank", static_cast<int64_t>(c->rank()))
                             .set("step", c->start_step));
    } else if (c->env.start_step > 0) {
      if (total_steps > 0 && c->env.start_step > total_steps) {
        throw Failure{PSHARD_ERR_ARGUMENT, "pshard: the run resumes at step " + std::to_string(c->env.start_step) +
                                               ", past its end (" + std::to_string(total_steps) + " steps)"};
      }
      c->start_step = c->env.start_step;
    }
    c->steps_pushed = c->start_step;
    // The timeline (trace.steps): this process's steps and requests, written to RUN_DIR/trace at pshard_close.
    const pshard::TraceWindow window = pshard::TraceWindow::parse(cfg.get_string("trace.steps"), "trace.steps");
    if (!window.empty()) {
      c->tracer = std::make_unique<pshard::Tracer>(window, "worker " + std::to_string(c->rank()));
      pshard::Tracer::name_this_thread(c->tracer.get(), 0, "training (the caller's thread)");
      c->tracer->name_row(1, "requests (issued to done)");
    }
    if (c->rank() == 0 && !c->rejoin) {
      write_tensor_list(c);  // before any init: a refused rank reads it after the servers installed the layout
      uint64_t model_bytes = 0;
      for (const pshard::TensorSpec& t : c->tensors) model_bytes += t.numel * sizeof(float);
      pshard::StartEvent start =
          pshard::StartEvent::from_config(cfg, model ? model : "custom", batch_size, world, steps_per_epoch);
      start.model_bytes = model_bytes;
      start.epochs = epochs;  // 0: the program did not declare its length
      start.program = true;
      start.start_step = c->start_step;  // > 0: a resumed run
      c->cluster->report(start.to_json());
    }
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    c->gpu = pshard::make_gpu_sampler(cfg.get_string("train.device") == "cuda" ||
                                      (visible && *visible && std::string(visible) != "-1"));
    c->connected_at = Clock::now();
    return PSHARD_OK;
  });
}

int pshard_request_stop(pshard_client* c, int64_t step) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    if (!c->kv) throw Failure{PSHARD_ERR_STATE, "pshard: request a stop after pshard_start"};
    if (step < 0) throw Failure{PSHARD_ERR_ARGUMENT, "pshard: step must be >= 0, got " + std::to_string(step)};
    c->kv->request_stop(step);
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
    *out = c->start_step;
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
    if (c->start_step > 0) {
      throw Failure{PSHARD_ERR_STATE, "pshard: this worker starts at step " + std::to_string(c->start_step) +
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
    if (c->rejoin && step == c->start_step && c->joined.insert(tensor).second) {
      *out = c->track(c->kv->join(name, weights, c->numel(tensor), step), "join", tensor, step);
      if (c->joining) {
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
    raise_to(c->steps_pushed, step + 1);
    return PSHARD_OK;
  });
}

int pshard_wait(pshard_client* c, pshard_request r, int64_t timeout_ms) {
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
        done = c->kv->wait_for(r, std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::max<Clock::duration>(slice, Clock::duration::zero())));
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

int pshard_traces(const pshard_client* c, int64_t step) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    return c->tracer && c->tracer->traces(step) ? 1 : 0;
  });
}

int pshard_trace_span(pshard_client* c, const char* name, const char* category, int64_t step, int64_t start_ns,
                      int64_t end_ns) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    require(name, "name");
    require(category, "category");
    if (end_ns < start_ns) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: a span ends (" + std::to_string(end_ns) + " ns) before it starts (" +
                                             std::to_string(start_ns) + " ns)"};
    }
    if (!c->tracer || !c->tracer->traces(step)) return PSHARD_OK;
    // std::chrono::steady_clock is CLOCK_MONOTONIC here (libstdc++), the clock the caller's timestamps are on.
    const Clock::time_point start{std::chrono::nanoseconds(start_ns)}, end{std::chrono::nanoseconds(end_ns)};
    // The tracer keeps a category pointer: one of a few fixed names, never the caller's string.
    static const char* const kCategories[] = {"step", "phase", "layer", "comm", "user"};
    const char* cat = "user";
    for (const char* k : kCategories) {
      if (std::strcmp(k, category) == 0) cat = k;
    }
    c->tracer->span(c->tracer->name(name), cat, start, end, pshard::TraceArgs().set("step", step));
    return PSHARD_OK;
  });
}

int pshard_report_step(pshard_client* c, int64_t epoch, int64_t step, double loss) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    if (!c->kv) throw Failure{PSHARD_ERR_STATE, "pshard: report a step after pshard_start"};
    if (epoch < 1 || step < 0) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: a step report needs epoch >= 1 and step >= 0, got epoch " +
                                             std::to_string(epoch) + ", step " + std::to_string(step)};
    }
    if (c->rank() != 0 || c->log_every == 0 || step % c->log_every != 0) return PSHARD_OK;
    pshard::trainer::StepEvent s;
    s.epoch = epoch;
    s.step = step;
    s.loss = loss;
    s.lr = c->schedule->lr_at(step);
    s.wall_s = std::chrono::duration<double>(Clock::now() - c->connected_at).count();
    c->cluster->report(s.to_json());
    return PSHARD_OK;
  });
}

int pshard_report_epoch(pshard_client* c, const pshard_epoch_report* report) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    require(report, "report");
    if (!c->kv) throw Failure{PSHARD_ERR_STATE, "pshard: report an epoch after pshard_start"};
    const bool elastic = c->cluster->map().elastic();
    const int64_t last = c->epochs_reported.load();
    if (report->epoch <= last || (elastic && report->epoch > c->epochs) || report->step < 0 || report->samples < 0) {
      throw Failure{PSHARD_ERR_ARGUMENT,
                    "pshard: an epoch report needs an epoch after this worker's last (" + std::to_string(last) + ")" +
                        (elastic ? " and at most train.epochs = " + std::to_string(c->epochs) : std::string()) +
                        ", step >= 0 and samples >= 0, got epoch " + std::to_string(report->epoch) + ", step " +
                        std::to_string(report->step) + ", samples " + std::to_string(report->samples)};
    }
    if (c->last_label && report->label <= *c->last_label) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: epoch " + std::to_string(report->label) + " reported after epoch " +
                                             std::to_string(*c->last_label) + ": a worker's epoch numbers increase"};
    }
    const uint32_t figures = report->figures;
    const bool train_acc = (figures & PSHARD_TRAIN_ACC) != 0, test_loss = (figures & PSHARD_TEST_LOSS) != 0,
               test_acc = (figures & PSHARD_TEST_ACC) != 0;
    const bool scaled = (figures & PSHARD_LOSS_SCALING) != 0;
    if (scaled && (!(report->loss_scale > 0.0) || !std::isfinite(report->loss_scale) || report->skipped_steps < 0)) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: epoch report " + std::to_string(report->epoch) + ": loss scale " +
                                             std::to_string(report->loss_scale) + " and " +
                                             std::to_string(report->skipped_steps) +
                                             " skipped steps (the scale must be positive and finite, the count >= 0)"};
    }
    if ((figures &
         ~(PSHARD_TRAIN_LOSS | PSHARD_TRAIN_ACC | PSHARD_TEST_LOSS | PSHARD_TEST_ACC | PSHARD_LOSS_SCALING)) != 0 ||
        (train_acc && (report->correct < 0 || report->correct > report->samples)) ||
        ((test_loss || test_acc) && report->test_samples < 0) ||
        (test_acc && (report->test_correct < 0 || report->test_correct > report->test_samples))) {
      throw Failure{PSHARD_ERR_ARGUMENT,
                    "pshard: epoch report " + std::to_string(report->epoch) + ": figures " + std::to_string(figures) +
                        " with correct " + std::to_string(report->correct) + " of " + std::to_string(report->samples) +
                        " samples, test_correct " + std::to_string(report->test_correct) + " of " +
                        std::to_string(report->test_samples) +
                        " test samples (a measured count must be in 0..its samples; a test figure needs "
                        "test_samples >= 0)"};
    }
    pshard::WorkerEpochReport r;
    r.rank = c->rank();
    r.epoch = report->epoch;
    r.label = report->label;
    r.step = report->step;
    r.steps = std::max<int64_t>(report->step - (c->reported_step >= 0 ? c->reported_step : c->start_step), 0);
    r.host = c->kv->host();
    r.samples = report->samples;
    r.has_train_loss = (figures & PSHARD_TRAIN_LOSS) != 0;
    r.loss_sum = r.has_train_loss ? report->loss_sum : 0.0;
    r.has_train_acc = train_acc;
    r.correct = train_acc ? report->correct : 0;
    r.evaluated = report->test_samples >= 0;
    r.test_n = std::max<int64_t>(report->test_samples, 0);
    r.has_test_loss = test_loss;
    r.test_loss_sum = test_loss ? report->test_loss_sum : 0.0;
    r.has_test_acc = test_acc;
    r.test_correct = test_acc ? report->test_correct : 0;
    r.epoch_s = report->epoch_s;
    r.eval_s = report->eval_s;
    r.has_loss_scale = scaled;
    r.loss_scale = scaled ? report->loss_scale : 0.0;
    r.skipped_steps = scaled ? report->skipped_steps : 0;
    // The phases add up to epoch_s: what the caller measured, the library's waits, and the remainder as other.
    r.phases[pshard::WorkerPhase::kData] = std::max(report->data_s, 0.0);
    r.phases[pshard::WorkerPhase::kForward] = std::max(report->forward_s, 0.0);
    r.phases[pshard::WorkerPhase::kBackward] = std::max(report->backward_s, 0.0);
    {
      std::lock_guard<std::mutex> lock(c->wait_mu);
      r.phases[pshard::WorkerPhase::kCommWait] = c->wait_s;
      c->wait_s = 0;
    }
    r.phases[pshard::WorkerPhase::kOther] = std::max(report->epoch_s - r.phases.total(), 0.0);
    const pshard::KvTraffic now = c->kv->traffic(), before = c->reported_traffic;
    r.bytes_sent = now.bytes_sent - before.bytes_sent;
    r.bytes_recv = now.bytes_recv - before.bytes_recv;
    r.fp32_bytes_sent = now.fp32_bytes_sent - before.fp32_bytes_sent;
    r.fp32_bytes_recv = now.fp32_bytes_recv - before.fp32_bytes_recv;
    r.shm_bytes_sent = now.shm_bytes_sent - before.shm_bytes_sent;
    r.shm_bytes_recv = now.shm_bytes_recv - before.shm_bytes_recv;
    c->reported_traffic = now;
    c->reported_step = report->step;
    r.wall_s = std::chrono::duration<double>(Clock::now() - c->connected_at).count();
    r.lr = c->schedule->lr_at(std::max<int64_t>(report->step - 1, 0));
    r.take_gpu_usage(c->gpu.get());
    pshard::Json j = r.to_json();
    j.set("event", "worker_epoch");
    c->cluster->report(j);
    raise_to(c->epochs_reported, report->epoch);
    c->last_label = report->label;
    // The declared length's last epoch: this worker pushed its last step, and its death from here on costs the job
    // nothing.
    if (c->epochs > 0 && report->epoch == c->epochs) {
      c->cluster->report(pshard::Json::object().set("event", "trained"));
    }
    return PSHARD_OK;
  });
}

}  // extern "C"
