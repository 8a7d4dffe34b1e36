// StepDeadlines: the slices whose open step waits for a grace to end, on one thread.
#include "server/kv/step_deadlines.h"

#include <algorithm>

#include "server/kv/slice_store.h"

namespace pshard {

void StepDeadlines::watch(Slice& slice) {
  if (!slice.requests.close_by()) return;
  if (std::find(watched_.begin(), watched_.end(), &slice) == watched_.end()) watched_.push_back(&slice);
}

std::chrono::milliseconds StepDeadlines::wait_for(Clock::time_point now, std::chrono::milliseconds cap) const {
  std::chrono::milliseconds wait = cap;
  for (const Slice* s : watched_) {
    const std::optional<Clock::time_point> by = s->requests.close_by();
    if (!by) continue;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*by - now);
    wait = std::min(wait, std::max(left, std::chrono::milliseconds(0)));
  }
  return wait;
}

std::vector<RequestPtr> StepDeadlines::close_due(Clock::time_point now, const SliceThread& thread) {
  std::vector<RequestPtr> finished;
  std::vector<Slice*> still;
  for (Slice* s : watched_) {
    for (RequestPtr& r : s->requests.on_clock(now, thread)) finished.push_back(std::move(r));
    if (s->requests.close_by()) still.push_back(s);  // not yet due, or a new step already has a quorum
  }
  watched_.swap(still);
  return finished;
}

}  // namespace pshard
