// PushSlot's handshake over a slot's busy word (push_slot.h).
#include "common/transport/push_slot.h"

#include "common/transport/shm_futex.h"
#include "common/util/stream_copy.h"

namespace pshard::transport {

PushSlot::Wait PushSlot::wait_until(bool full, Clock::time_point deadline, const std::atomic<bool>* cancelled) const {
  auto is_full = [](uint32_t value, const void*) { return (value & kFull) != 0; };
  auto is_free = [](uint32_t value, const void*) { return (value & kFull) == 0; };
  return wait_flagged(&head_->busy, kWaited, full ? +is_full : +is_free, nullptr, deadline, cancelled);
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
  wake_if_waited(&head_->busy, head_->busy.exchange(kFull, std::memory_order_acq_rel), kWaited);
}

void PushSlot::free() { wake_if_waited(&head_->busy, head_->busy.exchange(0, std::memory_order_acq_rel), kWaited); }

}  // namespace pshard::transport
