// The requests at one slice: what init, push, pull and join do to it, the reads it holds until its consistency
// policy lets them through, and what a dead worker or a stalled read changes. No sockets: requests in, the requests
// it finished out (the server replies to them).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/metrics/trace.h"
#include "server/consistency/consistency_policy.h"
#include "server/kv/request.h"
#include "server/kv/stall_watch.h"

namespace pshard {

class ShmHost;
class Slice;

// What the thread that owns a slice lends its requests.
struct SliceThread {
  const DeadWorkers& dead;      // the workers this thread knows dead
  std::vector<float>& scratch;  // this thread's buffer for payloads that arrive unaligned
  ShmHost* shm = nullptr;       // answers the reads in shared memory (null: the server shares none)
  Tracer* tracer = nullptr;     // trace.steps: one span per key of a traced request (null: off)
};

// Every Slice has one (Slice::requests), called only on the slice's owner thread. Each call returns the requests it
// finished, in the order they finished: a request finishes when its last key does, answered (the weights as the
// reader asked for them, in Request::replies or published to shared memory) or failed (Request::error).
//
//   SliceThread here{dead, scratch, shm, tracer};
//   for (RequestPtr& r : slice.requests.run(req, key, here)) reply(*r);  // init, push, pushPull, pull or join
//   for (RequestPtr& r : slice.requests.worker_dead(rank, here)) reply(*r);
//   for (RequestPtr& r : slice.requests.check_stalls(watch, now, dead)) reply(*r);
class SliceRequests {
 public:
  explicit SliceRequests(Slice& slice) : slice_(slice) {}
  SliceRequests(const SliceRequests&) = delete;
  SliceRequests& operator=(const SliceRequests&) = delete;

  // Key `key` of `req` (its slice is this one). A push is refused when its gradient holds a NaN or an infinity; a
  // read the policy does not let through yet waits here.
  std::vector<RequestPtr> run(const RequestPtr& req, size_t key, const SliceThread& thread);
  // Worker `rank` is dead (set in thread.dead): an open step may close without it, and the reads it held go through.
  std::vector<RequestPtr> worker_dead(uint32_t rank, const SliceThread& thread);
  // The waiting reads at `now`: reported to `watch` when they wait long, failed (`stalled`) when too long.
  std::vector<RequestPtr> check_stalls(StallWatch& watch, StallWatch::Clock::time_point now, const DeadWorkers& dead);
  size_t waiting() const { return waiting_.size(); }  // reads held
  // Backup workers (cluster.backup_workers): when the open step closes without the pushes still missing (none: it
  // waits for all), and the clock at `now`, which closes it once that time has passed.
  std::optional<PolicyClock::time_point> close_by() const;
  std::vector<RequestPtr> on_clock(PolicyClock::time_point now, const SliceThread& thread);

 private:
  bool ready(int64_t step, const DeadWorkers& dead) const;
  void answer(Request& req, size_t key, int64_t step, ShmHost* shm);  // a read at `step`
  bool push(const RequestPtr& req, size_t key, const SliceThread& thread, std::vector<RequestPtr>& finished);
  bool read(const RequestPtr& req, size_t key, int64_t step, const SliceThread& thread);
  void release_waiters(const SliceThread& thread, std::vector<RequestPtr>& finished);

  Slice& slice_;
  std::vector<Waiter> waiting_;  // reads the policy has not let through yet
};

}  // namespace pshard
