// Reads that wait too long and workers that stop pushing: who holds the job up, said while it lasts, judged stuck, and
// reads given up before the reader's own timeout.
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
  int64_t step = 0;               // the step (SSP: clock) the waiting reader needs; -1: async (no reader waits)
  double waited_s = 0;            // how long the oldest read of that step has waited (async: since the last push)
  std::vector<uint32_t> missing;  // the live workers whose pushes it waits for
  std::string slice;              // the slice it waits at, e.g. "fc1.weight[slice 0]"
  bool initial_weights = false;   // it waits for worker 0's initial weights, not for a push
  // The wait reached stuck_after: `missing` are stuck (the server tells the coordinator, which applies the failure
  // policy to them as to dead workers); else a warning. `why` is the account the coordinator quotes, e.g.
  // "fc1.weight[slice 0]: the read for step 12 waited 6.4 s for the push of worker 1, which did not come".
  bool stuck = false;
  std::string why;
};

// "worker 3", "workers 1, 3", or "no worker" (a read that nothing but the server's own state holds back).
std::string describe_workers(const std::vector<uint32_t>& ranks);

// A sync step (or SSP clock) that makes a read wait for `warn_after` is reported once, and again each further
// `warn_after` it lasts: which live workers have not pushed, so that "the job is slow" and "worker 3 hangs" can be
// told apart. When the read has waited `stuck_after`, those workers are reported stuck (once per step): alive or
// not, they hold the job up, and the coordinator removes them (failure policy continue: the step then closes without
// them and the read is answered) or ends the job naming them (abort). A read that has waited `give_up_after` (a
// little less than the workers' cluster.request_timeout_ms; reached only when no verdict came) is answered with a
// `stalled` error naming those workers: the waiting worker then fails with the missing worker's name, not with a
// timeout that blames this server.
//
// Where reads never wait (async mode), a worker that stops pushing holds up nobody but the job's end; the watch
// then keeps each worker's last push instead, and reports a live worker that pushed nothing for `stuck_after` as
// stuck (once, until it pushes again).
//
//   StallWatch watch(rank, 5s, 50s, 55s, [&](const StallReport& r) { r.stuck ? accuse(r) : warn(r); });
//   for (RequestPtr& r : watch.check(slice, waiting, Clock::now(), dead)) reply(*r);   // on the slice's thread
//   watch.pushed(rank, Clock::now()); watch.check_pushes(Clock::now(), dead);  // async: on the socket thread
//
// check() runs on every thread that owns slices; the reports are serialised here.
class StallWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // warn_after 0: no warnings; stuck_after 0: no verdicts (reads are still given up).
  StallWatch(uint32_t server_rank, std::chrono::milliseconds warn_after, std::chrono::milliseconds stuck_after,
             std::chrono::milliseconds give_up_after, std::function<void(const StallReport&)> on_stall);

  // Looks at the reads `waiting` at `s` at `now` (on the slice's owner thread, SliceRequests::check_stalls): reports
  // a stall or the stuck workers when due, fails the reads that waited too long (removing them from `waiting`) and
  // returns the requests that are finished by it.
  std::vector<RequestPtr> check(const Slice& s, std::vector<Waiter>& waiting, Clock::time_point now,
                                const DeadWorkers& dead);

  // Async mode, on the socket thread: worker `rank` pushed at `now`.
  void pushed(uint32_t rank, Clock::time_point now);
  // Async mode, on the socket thread: reports the live workers (of dead.size()) that pushed nothing for stuck_after
  // as stuck. The workers' clocks start at the first call (when the server has its slices).
  void check_pushes(Clock::time_point now, const DeadWorkers& dead);

 private:
  void report(StallReport r, int64_t times_warned);
  void report_stuck(StallReport r);

  const uint32_t server_;
  const std::chrono::milliseconds warn_after_, stuck_after_, give_up_after_;
  const std::function<void(const StallReport&)> on_stall_;
  std::mutex mu_;
  int64_t reported_step_ = -1;  // the last reported step and how many warn_after periods it had lasted then
  int64_t reported_times_ = 0;
  int64_t stuck_step_ = -1;  // the last step whose missing workers were reported stuck
  // Async mode (socket thread only): each worker's last push, and whether it was reported stuck since.
  std::vector<Clock::time_point> last_push_;
  std::vector<char> judged_;
};

// Every thread that owns slices looks at their waiting reads this often (StallWatch::check).
//
//   StallTick tick;
//   if (tick.due()) check_the_slices();
class StallTick {
 public:
  bool due() {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_) return false;
    next_ = now + std::chrono::milliseconds(100);
    return true;
  }

 private:
  std::chrono::steady_clock::time_point next_ = std::chrono::steady_clock::now();
};

}  // namespace pshard
