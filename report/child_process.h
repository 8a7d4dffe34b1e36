// Runs another program (pshard train/launch, python3) to completion, with a time limit.
#pragma once

#include <string>
#include <vector>

namespace pshard::report {

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

// The path of the running executable (/proc/self/exe), for re-invoking pshard.
std::string self_executable();

}  // namespace pshard::report
