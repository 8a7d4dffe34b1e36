// PushSlot's handshake over a slot's busy word (push_slot.h).
#include "common/transport/push_slot.h"

#include <algorithm>

#include "common/transport/shm_futex.h"
#include "common/util/stream_copy.h"

namespace pshard::transport {

PushSlot::Wait PushSlot::wait_until(bool full, Clock::time_point deadline, const std::atomic<bool>* cancelled) const {
  std::atomic<uint32_t>& busy = head_->busy;
  for (;;) {
    uint32_t seen = busy.load(std::memory_order_acquire);
    if (((seen & kFull) != 0) == full) return Wait::kReady;
    if (cancelled != nullptr && cancelled->load()) return Wait::kCancelled;
    const auto now = Clock::now();
    if (now >= deadline) return Wait::kTimedOut;
    // Flag the wait before sleeping, so that the other side's exchange sees it; a change in between fails the
    // compare-exchange and is looked at again.
    if ((seen & kWaited) == 0) {
      if (!busy.compare_exchange_weak(seen, seen | kWaited, std::memory_order_acq_rel)) continue;
      seen |= kWaited;
    }
    wait_while_equal(&busy, seen, std::min(deadline, now + std::chrono::milliseconds(50)));
  }
}

PushSlot::Wait PushSlot::wait_free(Clock::time_point deadline, const std::atomic<bool>* cancelled) const {
  return wait_until(false, deadline, cancelled);
}

PushSlot::Wait PushSlot::wait_full(Clock::time_point deadline, const std::atomic<bool>* cancelled) const {
  return wait_until(true, deadline, cancelled);
}

bool PushSlot::full() const { return (head_->busy.load(std::memory_order_acquire) & kFull) != 0; }

void PushSlot::fill(const float* values, size_t n, uint64_t tag) {
  // Both stored before the release below, which publishes them with the values.
  head_->first_non_finite.store(copy_floats_past_cache(SlotTable::values(head_), values, n), std::memory_order_relaxed);
  head_->generation.store(tag, std::memory_order_relaxed);
  if ((head_->busy.exchange(kFull, std::memory_order_acq_rel) & kWaited) != 0) wake_all(&head_->busy);
}

void PushSlot::free() {
  if ((head_->busy.exchange(0, std::memory_order_acq_rel) & kWaited) != 0) wake_all(&head_->busy);
}

}  // namespace pshard::transport
