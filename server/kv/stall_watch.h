// Reads that wait too long: who they wait for, said while it lasts, and given up before the reader's own timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "server/consistency/consistency_policy.h"
#include "server/kv/request.h"

namespace pshard {

class Slice;

// One stall as the server tells it: its log line, and an event for the coordinator (docs/METRICS.md "stall").
struct StallReport {
  uint32_t server = 0;
  int64_t step = 0;               // the step (SSP: clock) the waiting reader needs
  double waited_s = 0;            // how long the oldest read of that step has waited
  std::vector<uint32_t> missing;  // the live workers whose pushes it waits for
  std::string slice;              // the slice it waits at, e.g. "fc1.weight[slice 0]"
  bool initial_weights = false;   // it waits for worker 0's initial weights, not for a push
};

// "worker 3", "workers 1, 3", or "no worker" (a read that nothing but the server's own state holds back).
std::string describe_workers(const std::vector<uint32_t>& ranks);

// A sync step (or SSP clock) that makes a read wait for `warn_after` is reported once, and again each further
// `warn_after` it lasts: which live workers have not pushed, so that "the job is slow" and "worker 3 hangs" can be
// told apart. A read that has waited `give_up_after` (a little less than the workers' cluster.request_timeout_ms) is
// answered with a `stalled` error naming those workers: the waiting worker then fails with the missing worker's
// name, not with a timeout that blames this server.
//
//   StallWatch watch(rank, 5s, 54s, [&](const StallReport& r) { cluster.report(to_json(r)); });
//   for (RequestPtr& r : watch.check(slice, Clock::now(), dead)) reply(*r);   // on the slice's thread
//
// check() runs on every thread that owns slices; the reports are serialised here.
class StallWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // warn_after 0: no reports (reads are still given up).
  StallWatch(uint32_t server_rank, std::chrono::milliseconds warn_after, std::chrono::milliseconds give_up_after,
             std::function<void(const StallReport&)> on_stall);

  // Looks at the reads waiting at `s` at `now` (on the slice's owner thread): reports a stall when one is due, fails
  // the reads that waited too long (removing them from s.waiting) and returns the requests that are finished by it.
  std::vector<RequestPtr> check(Slice& s, Clock::time_point now, const DeadWorkers& dead);

 private:
  void report(StallReport r, int64_t times_warned);

  const uint32_t server_;
  const std::chrono::milliseconds warn_after_, give_up_after_;
  const std::function<void(const StallReport&)> on_stall_;
  std::mutex mu_;
  int64_t reported_step_ = -1;  // the last reported step and how many warn_after periods it had lasted then
  int64_t reported_times_ = 0;
};

}  // namespace pshard
