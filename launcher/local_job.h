// Runs the processes of a job on this machine: spawns them, prefixes their
// output with their names, stops them all on failure or Ctrl-C, reports who failed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/control/cluster_map.h"

namespace pshard {

// One process to run.
struct ChildSpec {
  std::string name;               // "worker 1": prefix of its output lines ("[worker 1] ...") and name in reports
  std::vector<std::string> argv;  // argv[0] is the executable's path
  std::vector<std::string> env;   // "KEY=VALUE" entries added to (or replacing) this process's environment
  bool may_fail = false;          // its failure is reported but does not stop the others
  bool ends_job = false;          // when it exits, the others get Options::grace to finish, then are stopped
  std::optional<NodeRole> role =
      std::nullopt;  // what it is in the job (launchers order failures by it); empty: a helper
  std::optional<int64_t> rank = std::nullopt;  // its rank within `role`, when it has one
  // Non-empty: written to the child's stdin, which then stays open until the child ends (an ssh child forwards it:
  // secrets that must not be on a command line, and an EOF that tells the far side its launcher is gone).
  // Empty: stdin is /dev/null. Starting such a child makes this process ignore SIGPIPE.
  std::string stdin_text = std::string();
  // Non-empty (with stdin_text): a SIGTERM passed on to the children (Options::forward_sigterm, pass_on_sigterm) is
  // written to its stdin as this line instead of signalled. An ssh child carries it to the far side, which the
  // signals of the ssh client do not reach (`pshard host` then passes SIGTERM on to its own processes).
  std::string sigterm_line = std::string();
};

// How one child ended.
struct ChildExit {
  std::string name;
  std::optional<NodeRole> role = std::nullopt;
  int64_t pid = 0;
  bool started = false;     // false: it could not be started (see start_error)
  std::string start_error;  // why it could not be started
  bool exited = false;      // exited normally (exit_code valid)
  int exit_code = 0;
  int signal = 0;        // killed by this signal (0: none)
  bool stopped = false;  // the job sent it SIGTERM/SIGKILL (stopping is not a failure)
  bool hung = false;     // it ignored SIGTERM for the grace period and needed SIGKILL: a failure
  std::string error;     // its first output line's text after "error: " (pshard's error lines), at most 400 bytes
  bool may_fail = false;
  bool restarted = false;  // it failed and was started again (restart_argv): the new run's exit counts
  // A may_fail child killed by a signal nobody in the job sent, in a job whose ends_job child exited 0: the
  // coordinator exits 0 only when every worker left the job successfully, so the kill came after this one had done
  // its part (e.g. while a Python interpreter exited). Not a failure; said in describe().
  bool after_success = false;
  // A may_fail worker of an elastic job (Options::drops_workers) that died, in a job whose ends_job child exited 0:
  // the job went on without it, as it was meant to. Not a failure; said in describe().
  bool dropped = false;
  // A run of a restartable child started again after a failure (add_restartable) that failed in a job whose ends_job
  // child exited 0: the coordinator exits 0 only when every worker rank finished its part, so this run was not
  // needed (typically it came after the job had ended, and the coordinator was gone). Not a failure.
  bool restart_run = false;
  bool unneeded = false;

  bool failed() const;  // could not start, non-zero exit, killed by a signal we did not send, or hung when stopped
  // "worker 1 (pid 4242) was killed by signal 9 (SIGKILL)"; a failure's first error line is appended:
  // "coordinator (pid 7) exited with status 1: aborting the job: worker 0 ... fewer than one global batch".
  std::string describe() const;
  std::string ending() const;  // describe() without the name: "was killed by signal 9 (SIGKILL)"
};

// Supervises the children of one job from a background thread (Boost.Asio:
// pipes, timers, signals). Children run in their own process groups and get
// SIGKILL if this process dies (PR_SET_PDEATHSIG), so nothing is orphaned.
//
//   LocalJob::Options opt;
//   opt.handle_signals = true;                 // Ctrl-C / SIGTERM stop the job
//   LocalJob job(opt);
//   job.add({"server 0", {exe, "server", "--coordinator", ep}, {"PSHARD_JOB_TOKEN=" + token}});
//   job.add({"worker 0", {exe, "worker", "--coordinator", ep}, {"PSHARD_JOB_TOKEN=" + token}});
//   LocalJob::Result r = job.run();            // start() + wait()
//   if (r.exit_code != 0) std::fprintf(stderr, "%s\n", r.failure.c_str());
class LocalJob {
 public:
  struct Options {
    std::chrono::milliseconds grace{5000};  // SIGTERM -> SIGKILL delay when stopping; also the ends_job delay
    std::chrono::milliseconds timeout{0};   // whole-job limit (0: none); expiry stops the job as failed
    bool handle_signals = false;            // SIGINT/SIGTERM sent to this process stop the job
    // With handle_signals: the first SIGTERM is passed on to every child instead, which decides what to do
    // (checkpoint.on_sigterm = checkpoint); the job ends when they do. SIGINT, or a second SIGTERM, stops it.
    bool forward_sigterm = false;
    // An elastic job (pshard launch --workers MIN:MAX): its coordinator exits 0 when the job ran to its end, also
    // after it dropped a dead worker, so a may_fail child that failed was dropped, not killed after it finished.
    bool drops_workers = false;
    int out_fd = 1;  // where children's stdout lines go (prefixed)
    int err_fd = 2;  // where children's stderr lines and the job's own messages go
    // When set, each prefixed child line (with its "\n") goes here instead of
    // being written to out_fd/err_fd (e.g. to redraw a progress line around
    // it). Called from the job's I/O thread.
    std::function<void(int fd, const std::string& text)> line_sink;
    // When set, called on the job's I/O thread as soon as a child that has a role fails while the job runs (not
    // one the job stopped), before any restart of it: e.g. to tell the coordinator at once.
    std::function<void(const ChildSpec& spec, const ChildExit& how)> on_child_failed;
  };

  struct Result {
    int exit_code = 0;    // 0: no child failed; 1: a child failed or timeout; 128+sig: interrupted by a signal;
                          // kExitRecordsIncomplete: none failed, but one could not write all its records
    std::string failure;  // the first failure ("worker 1 (pid 7) exited with status 3"); empty when ok
    std::vector<ChildExit> children;  // in add() order
  };

  explicit LocalJob(const Options& options);
  ~LocalJob();  // stops children still running and joins the supervisor thread
  LocalJob(const LocalJob&) = delete;
  LocalJob& operator=(const LocalJob&) = delete;

  void add(const ChildSpec& child);  // before start()
  // A may_fail child that, when it fails, is started again (same name and role) as `restart` says (its argv and
  // env), at most `max_restarts` times in all; each run is its own ChildExit in Result::children.
  void add_restartable(const ChildSpec& child, const ChildSpec& restart, int max_restarts);
  void start();   // spawns every child (returns once all were spawned)
  Result wait();  // until every child ended
  std::optional<Result> wait_for(std::chrono::milliseconds timeout);
  Result run();                          // start() + wait()
  void stop(const std::string& reason);  // any thread: SIGTERM all, SIGKILL after grace (not a failure)
  // Any thread: every running child gets SIGTERM (or its sigterm_line) and decides what to do, as with
  // Options::forward_sigterm; the job then ends as usual.
  void pass_on_sigterm();
  std::vector<int64_t> pids() const;  // children's pids (process group ids), in add() order; 0 = not started

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pshard
