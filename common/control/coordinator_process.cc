// The coordinator process: config, token, keys, run directory, signals (see coordinator_process.h).
#include "common/control/coordinator_process.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <string>

#include "common/config/config.h"
#include "common/control/coordinator.h"
#include "common/error.h"
#include "common/metrics/metrics_writer.h"
#include "common/run/node_env.h"
#include "common/transport/curve.h"
#include "common/util/log.h"
#include "common/util/signals.h"

namespace pshard {
namespace {

std::atomic<int> g_signal{0};  // the last SIGINT or SIGTERM not yet acted on

}  // namespace

int run_coordinator_process(const CoordinatorProcessOptions& o) {
  Config cfg = o.config_path.empty() ? Config::defaults() : Config::from_file(o.config_path, o.overrides);
  if (o.config_path.empty()) {
    for (const std::string& s : o.overrides) cfg.set(s);
  }
  log::configure("coordinator", log::level_from_string(cfg.get_string("log.level")));
  // Before the coordinator's threads start, so that none of them is interrupted (common/util/signals.h).
  watch_signals({SIGINT, SIGTERM}, [](int sig) { g_signal.store(sig); });
  if (o.servers < 1 || o.servers > 65536) throw Error("pshard coordinator: --servers must be in 1..65536");
  if (o.workers < 1 || o.workers > 65536) throw Error("pshard coordinator: --workers must be in 1..65536");

  Coordinator::Options opt =
      Coordinator::Options::from_config(cfg, static_cast<uint32_t>(o.servers), static_cast<uint32_t>(o.workers));
  opt.bind = o.bind;
  opt.job_token = NodeEnv::from_environment().job_token;
  if (opt.job_token.empty()) {
    PSHARD_LOG(kWarn) << "PSHARD_JOB_TOKEN is not set: only nodes without a token can join";
  }
  opt.curve = transport::job_curve_keys(cfg, transport::curve_key_dir(cfg, o.key_dir, o.run_dir));
  if (!o.run_dir.empty()) {
    opt.run_dir = o.run_dir;
    make_directories(opt.run_dir);  // an Error naming the path, e.g. when it is a file
  }

  Coordinator coord(opt);
  PSHARD_LOG(kInfo) << "listening on " << coord.endpoint();
  coord.start();
  const bool stop_at_checkpoint = cfg.get_string("checkpoint.on_sigterm") == "checkpoint";
  for (;;) {
    if (auto r = coord.wait_for(std::chrono::milliseconds(50))) return r->exit_code;
    const int sig = g_signal.exchange(0);
    if (sig == SIGTERM && stop_at_checkpoint) {
      // The workers got it too: they stop at the next step boundary and leave; the job then ends as usual.
      PSHARD_LOG(kInfo) << "SIGTERM: the workers stop at the next step boundary, which the servers checkpoint "
                           "(checkpoint.on_sigterm = checkpoint)";
    } else if (sig != 0) {
      coord.request_stop(std::string("received signal ") + (sig == SIGINT ? "SIGINT" : "SIGTERM"));
    }
  }
}

}  // namespace pshard
