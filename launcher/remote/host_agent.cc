// `pshard host`: reads the plan from stdin, runs the host's processes, stops them at EOF (see host_agent.h).
#include "launcher/remote/host_agent.h"

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "common/control/coordinator.h"
#include "common/control/process_notice.h"
#include "common/error.h"
#include "common/metrics/metrics_writer.h"
#include "common/util/signals.h"
#include "launcher/gpu_assignment.h"
#include "launcher/local_job.h"
#include "launcher/remote/host_share.h"

namespace pshard::remote {
namespace {

constexpr size_t kMaxPlanBytes = 64 << 20;

// The first line of `fd` (without its newline), read a byte at a time so that nothing after it is taken from a
// pipe shared with later reads.
std::string read_plan_line(int fd) {
  std::string line;
  char c = 0;
  for (;;) {
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("pshard host: reading the plan from stdin failed: " + std::string(std::strerror(errno)));
    if (n == 0)
      throw Error("pshard host: stdin ended before the plan (is this host started by `pshard launch --hosts`?)");
    if (c == '\n') return line;
    line += c;
    if (line.size() > kMaxPlanBytes) throw Error("pshard host: the plan on stdin is over 64 MiB");
  }
}

bool same_keys(const transport::CurveKeys& a, const transport::CurveKeys& b) {
  return a.server_public == b.server_public && a.server_secret == b.server_secret &&
         a.client_public == b.client_public && a.client_secret == b.client_secret;
}

// The job's keys in share.key_dir, written unless the same keys are there already (a filesystem the hosts share).
void place_keys(const HostShare& share) {
  if (share.key_dir.empty()) return;
  if (std::filesystem::exists(transport::curve_key_file(share.key_dir))) {
    try {
      if (same_keys(transport::read_curve_keys(share.key_dir), share.keys)) return;
    } catch (const Error&) {
      // Unreadable or another job's: replaced below.
    }
  }
  transport::write_curve_keys(share.key_dir, share.keys);
}

// What the host's job's end says to the launcher, which names the likely cause of a failed job by the hosts' statuses
// as it does by its local children's:
// - a server of this host that died (not one that exited 1 because the coordinator aborted the job), or this host's
//   coordinator ending the job for a dead server: Coordinator::kExitServerDead, which under
//   cluster.server_failure_policy = restart restarts the job from its checkpoints;
// - another process of this host that died on its own (a signal: 128 + it; a status other than the abort's 1): its
//   status, so that this host is named before the hosts whose processes only followed the abort (status 1);
// - else the job's own status.
int host_exit_code(const LocalJob::Result& r) {
  for (const ChildExit& c : r.children) {
    const bool server_died = c.role == NodeRole::kServer && c.failed() && !(c.exited && c.exit_code == 1);
    const bool declared = c.role == NodeRole::kCoordinator && c.exited && c.exit_code == Coordinator::kExitServerDead;
    if (server_died || declared) return Coordinator::kExitServerDead;
  }
  for (const ChildExit& c : r.children) {
    if (!c.failed() || c.restarted || c.hung || !c.started) continue;
    if (!c.exited) return 128 + c.signal;
    if (c.exit_code != 1) return c.exit_code;
  }
  return r.exit_code;
}

}  // namespace

int run_host_agent(const std::string& name, int in_fd) {
  ::signal(SIGPIPE, SIG_IGN);  // ssh may go away while output is written: the EOF on stdin stops the job instead
  const HostShare share = HostShare::from_json(read_plan_line(in_fd));
  if (!share.run_dir.empty()) make_directories(share.run_dir);
  place_keys(share);
  std::vector<std::string> gpus;
  if (share.assign_gpus) gpus = host_gpus(std::getenv("CUDA_VISIBLE_DEVICES"), count_nvidia_gpus());

  LocalJob::Options opt;
  opt.handle_signals = true;
  opt.grace = std::chrono::milliseconds(share.grace_ms);
  opt.drops_workers = share.drops_workers;
  // A process of this host that dies is dead for the coordinator at once, as pshard launch tells it of its own
  // children: under failure_policy = continue the others go on without waiting for the heartbeat timeout.
  std::unique_ptr<ProcessNotifier> notices;
  if (!share.coordinator.empty() && !share.job_token.empty()) {
    notices = std::make_unique<ProcessNotifier>(share.coordinator, share.job_token, share.keys);
    opt.on_child_failed = [&notices](const ChildSpec& spec, const ChildExit& how) {
      if (!spec.rank || *spec.role == NodeRole::kCoordinator) return;
      notices->process_ended(*spec.role, static_cast<uint32_t>(*spec.rank), how.pid, how.ending());
    };
  }
  LocalJob job(opt);
  for (const RemoteProcess& p : share.processes) {
    const std::string gpu = p.local_rank >= 0 ? gpu_for_local_rank(gpus, p.local_rank) : "";
    ChildSpec c = p.spec;
    ChildSpec again = p.restart;
    if (!gpu.empty()) {
      c.env.push_back("CUDA_VISIBLE_DEVICES=" + gpu);
      again.env.push_back("CUDA_VISIBLE_DEVICES=" + gpu);
    }
    if (p.max_restarts > 0) {
      job.add_restartable(c, again, p.max_restarts);  // cluster.restart_workers: it rejoins on this host
    } else {
      job.add(c);
    }
  }
  job.start();
  // EOF on stdin: the launcher is gone or stopping the job. A line kSigtermLine: the launcher got SIGTERM under
  // checkpoint.on_sigterm = checkpoint and passes it on; so does this host, to its processes.
  std::atomic<bool> done{false};
  std::thread watcher = start_thread([&] {
    char buf[256];
    std::string line;
    while (!done.load()) {
      pollfd p{in_fd, POLLIN, 0};
      const int r = ::poll(&p, 1, 100);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) continue;
      const ssize_t n = r > 0 ? ::read(in_fd, buf, sizeof buf) : -1;
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        job.stop("the launcher's connection to " + name + " ended");
        return;
      }
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] != '\n') {
          if (line.size() < 64) line += buf[i];
          continue;
        }
        if (line + "\n" == kSigtermLine) {
          std::fprintf(stderr, "SIGTERM from the launcher: passed on to this host's processes\n");
          job.pass_on_sigterm();
        }
        line.clear();
      }
    }
  });
  const LocalJob::Result r = job.wait();
  done = true;
  watcher.join();
  if (r.exit_code != 0 && r.exit_code != kExitRecordsIncomplete && !r.failure.empty()) {
    std::fprintf(stderr, "error: %s\n", r.failure.c_str());
  }
  return host_exit_code(r);
}

}  // namespace pshard::remote
