// The open BSP steps of one server thread that close at a time of their own (cluster.backup_workers): when the thread
// must wake next, and closing those whose time came.
#pragma once

#include <chrono>
#include <vector>

#include "server/consistency/consistency_policy.h"
#include "server/kv/request.h"
#include "server/kv/slice_requests.h"

namespace pshard {

class Slice;

// Each thread that owns slices keeps one. After a key of a slice ran, watch(slice); the thread's wait for its next
// task is cut to wait_for(); after it, close_due() closes the steps whose grace has passed.
//
//   deadlines.watch(slice);
//   poll(deadlines.wait_for(Clock::now(), 100ms));
//   for (RequestPtr& r : deadlines.close_due(Clock::now(), here)) reply(*r);
class StepDeadlines {
 public:
  using Clock = PolicyClock;

  void watch(Slice& slice);  // its open step may now have a time to close at
  // `cap`, or less when a watched step closes sooner (rounded up to whole milliseconds, at least 1 then).
  std::chrono::milliseconds wait_for(Clock::time_point now, std::chrono::milliseconds cap) const;
  // Closes the watched steps whose time has come; the requests that finished by it.
  std::vector<RequestPtr> close_due(Clock::time_point now, const SliceThread& thread);

 private:
  std::vector<Slice*> watched_;  // each at most once
};

}  // namespace pshard
