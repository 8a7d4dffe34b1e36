// Follows a job's metrics.jsonl while it runs and renders the progress line
// of `pshard launch` (epoch, step, loss, samples/s, ETA).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/util/json.h"

namespace pshard {

// Reads the lines appended to a file since the last poll (a line is returned
// only once it is complete). The file may not exist yet.
class MetricsFollower {
 public:
  explicit MetricsFollower(std::string path) : path_(std::move(path)) {}
  // New complete lines parsed as JSON; a malformed line is skipped (the
  // writer flushes whole lines, so it can only be a foreign file).
  std::vector<Json> poll();

 private:
  std::string path_;
  uint64_t offset_ = 0;
  std::string partial_;
};

// What the progress line knows; fed with every metrics event.
class ProgressState {
 public:
  void add(const Json& event);
  // "epoch 3/10  step 1200/4680  loss 0.4123  18,230 samples/s  ETA 0:42", followed by "waiting 10.0 s for
  // worker 3 (last heard 4.2 s ago)" while a server reports a stall; nullopt before the first step or stall.
  std::optional<std::string> line() const;
  const Json& summary() const { return summary_; }  // null until the job wrote it
  // The coordinator recorded a server's death (a `failure` event of a server) since this try's start line: what a
  // launcher of hosts reads when the hosts' own statuses came too late (it stopped them at the first failure).
  bool server_failed() const { return !server_failure_.empty(); }
  // That death in the coordinator's words: "server 1 (host h2, pid 7) is dead: no heartbeat for 5000 ms".
  const std::string& server_failure() const { return server_failure_; }

 private:
  int64_t epochs_ = 0, steps_per_epoch_ = 0, global_batch_ = 0;
  // Elastic jobs (`members` events): the run's length as the latest plan makes it (its epoch's steps for every epoch
  // left), and the samples of the steps before that plan, whose global batch was another.
  int64_t planned_total_ = 0, plan_step_ = 0, samples_before_plan_ = 0;
  int64_t epoch_ = 0, step_ = -1;
  double loss_ = 0, wall_s_ = 0;
  Json summary_;
  std::string server_failure_;  // the first server failure since this try's start line
  std::string stall_;           // the latest stall's note; cleared once the job moved past it
  int64_t stall_at_step_ = -1;  // step_ when it came

  static std::string stall_note(const Json& stall_event);
};

// The bottom line of a terminal that other lines scroll above: on a TTY the
// status is redrawn in place after every printed line; otherwise the status is
// printed as a plain line at most every `plain_every_s` seconds.
class TerminalStatus {
 public:
  TerminalStatus(int status_fd, bool is_tty, double plain_every_s = 10.0);
  // Prints one complete line (ending in "\n") to fd, above the status.
  void print(int fd, const std::string& text);
  void set(const std::string& status);
  // Removes the status line (before the final messages).
  void clear();

 private:
  std::mutex mu_;
  int fd_;
  bool tty_;
  double plain_every_s_;
  std::string status_;
  // When the last plain line was printed; empty until the first, which always prints (the steady
  // clock's epoch is the machine's boot, so a zero default would hide it on a young machine).
  std::optional<std::chrono::steady_clock::time_point> last_plain_;
};

}  // namespace pshard
