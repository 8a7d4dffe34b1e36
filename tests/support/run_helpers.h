// Running pshard commands from tests and reading their run directories.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

#include "common/util/json.h"

namespace pshard::testing {

// Absolute path of the pshard executable under test (env PSHARD_BIN).
std::string pshard_bin();
// Absolute path of the source tree (env PSHARD_SOURCE_DIR).
std::string source_dir();
// A fresh, empty directory under /tmp for one test.
std::string fresh_dir(const std::string& name);
// Removes a test's directory when the test has passed so far; a failed
// test's directory stays for inspection (its path is in the failure output).
void remove_dir_if_passed(const std::string& dir);
// Runs `command` through /bin/sh with a wall-clock limit (coreutils timeout,
// SIGKILL 10 s after SIGTERM); output goes to `log_path`. Returns the exit
// status (124 = timed out).
int run_with_timeout(const std::string& command, int timeout_s, const std::string& log_path);
// The last line (the `summary` event) of RUN_DIR/metrics.jsonl.
Json read_summary(const std::string& run_dir);
// The whole file, for failure messages.
std::string read_file(const std::string& path);

// A shell command (`pshard launch ...`) running in the background in its own process group, output to
// `log`; destroying it SIGKILLs the whole group, so a failing test leaves no process behind.
class BackgroundJob {
 public:
  BackgroundJob(const std::string& command, const std::string& log);
  ~BackgroundJob();
  BackgroundJob(const BackgroundJob&) = delete;
  BackgroundJob& operator=(const BackgroundJob&) = delete;
  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }  // the command's process (the shell execs it)
  // Exit status (128 + signal when killed), or nullopt if still running after `timeout`.
  std::optional<int> wait(std::chrono::seconds timeout);

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
};

}  // namespace pshard::testing
