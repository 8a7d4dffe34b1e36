// Child processes of pshard: starting a program (its environment, output, process group), running one to
// completion with a time limit, the path of this executable (to start pshard again), and free TCP ports for the
// processes of a local job. Used by the launcher, `pshard report`, `pshard sweep`, the benchmarks and the tests.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pshard {

// Where a child's standard output and error go.
enum class ChildOutput {
  kInherit,  // this process's
  kLogFile,  // both appended to SpawnRequest::log_path (created 0644 when missing)
  kPipes,    // one pipe each, whose read ends SpawnedChild holds
};

// Where a child's standard input comes from.
enum class ChildInput {
  kInherit,  // this process's
  kNull,     // /dev/null
  kPipe,     // a pipe whose write end SpawnedChild holds: the child reads what is written, then EOF once it is closed
};

struct SpawnRequest {
  std::vector<std::string> argv;  // argv[0] is looked up in the child's PATH unless it holds a '/'
  std::vector<std::string> env;   // "KEY=VALUE", set over this process's environment
  ChildOutput output = ChildOutput::kInherit;
  std::string log_path;  // kLogFile
  ChildInput stdin = ChildInput::kInherit;
  bool own_process_group = false;  // a group of its own: kill(-pid, sig) reaches it and everything it starts,
                                   // and a Ctrl-C at the terminal does not
  bool die_with_parent = false;    // SIGKILL when this process ends, however it ends (PR_SET_PDEATHSIG)
};

struct SpawnedChild {
  pid_t pid = -1;
  int stdout_fd = -1, stderr_fd = -1;  // kPipes: the read ends (close-on-exec), the caller's to close
  int stdin_fd = -1;                   // ChildInput::kPipe: the write end (close-on-exec), the caller's to close
};

// Starts a child as `request` says and returns once it runs the program. A program that cannot be executed is an
// Error "cannot execute ARGV0: REASON" (the child is reaped); so is a log file that cannot be opened. Safe to call
// from a threaded process: everything the child needs is prepared before fork().
//
//   SpawnRequest r;
//   r.argv = {"python3", "train.py"};
//   r.output = ChildOutput::kPipes;
//   SpawnedChild c = spawn_child(r);   // read c.stdout_fd, c.stderr_fd; waitpid(c.pid, ...)
SpawnedChild spawn_child(const SpawnRequest& request);

struct ChildResult {
  int exit_code = 0;       // the program's exit status; 128 + signal when it was killed
  bool timed_out = false;  // killed because it ran longer than the limit
  double seconds = 0;      // wall time
};

// Starts argv (argv[0] is looked up in PATH unless it contains '/'), with
// stdout and stderr appended to `log_path` (empty: inherited), and waits at
// most `timeout_s` seconds; then it gets SIGTERM and, 10 s later, SIGKILL.
// The child stays in our process group, so Ctrl-C stops it too. A program
// that cannot be started is an Error naming it.
//
//   ChildResult r = run_child({"python3", "-c", "import matplotlib"}, "/tmp/py.log", 60);
//   if (r.exit_code != 0) ...
ChildResult run_child(const std::vector<std::string>& argv, const std::string& log_path, double timeout_s);

// The path of the running executable (/proc/self/exe), for starting pshard again (job processes, sweep runs).
std::string self_executable();

// A TCP port on `host` that was free a moment ago (bind to port 0, read it,
// close). Another process may take it before you bind: use it promptly.
int pick_free_port(const std::string& host = "127.0.0.1");
// `count` distinct such ports.
std::vector<int> pick_free_ports(int count, const std::string& host = "127.0.0.1");

}  // namespace pshard
