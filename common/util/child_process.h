// Child processes of pshard: running a program to completion with a time limit, the path of this executable (to
// start pshard again), and free TCP ports for the processes of a local job. Used by the launcher, `pshard report`,
// `pshard sweep`, the benchmarks and the tests.
#pragma once

#include <string>
#include <vector>

namespace pshard {

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
