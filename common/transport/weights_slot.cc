// WeightsSlot's seqlock and its readers' wait (weights_slot.h).
#include "common/transport/weights_slot.h"

#include <algorithm>
#include <thread>

#include "common/transport/shm_futex.h"
#include "common/util/stream_copy.h"

namespace pshard::transport {

void WeightsSlot::begin_write() {
  const uint64_t s = head_->seq.load(std::memory_order_relaxed);
  head_->seq.store(s + 1, std::memory_order_relaxed);  // odd: a write is under way
  std::atomic_thread_fence(std::memory_order_release);
}

void WeightsSlot::end_write(uint64_t generation) {
  head_->generation.store(generation, std::memory_order_relaxed);
  head_->seq.store(head_->seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  // After the generation: a reader that saw the old word and then the old generation sees this change.
  uint32_t word = head_->busy.load(std::memory_order_relaxed);
  while (!head_->busy.compare_exchange_weak(word, (word + kVersion) & ~kWaited, std::memory_order_acq_rel)) {
  }
  if ((word & kWaited) != 0) wake_all(&head_->busy);
}

void WeightsSlot::write(const float* values, size_t n, uint64_t generation) {
  begin_write();
  copy_past_cache(SlotTable::values(head_), values, n * sizeof(float));
  end_write(generation);
}

bool WeightsSlot::read(float* out, size_t n, int tries) const {
  for (int i = 0; i < tries; ++i) {
    const uint64_t before = head_->seq.load(std::memory_order_acquire);
    if (before & 1) {
      std::this_thread::yield();
      continue;
    }
    copy_past_cache(out, SlotTable::values(head_), n * sizeof(float));
    std::atomic_thread_fence(std::memory_order_acquire);
    if (head_->seq.load(std::memory_order_relaxed) == before) return true;
  }
  return false;
}

WeightsSlot::Wait WeightsSlot::wait_for(uint64_t generation, Clock::time_point deadline,
                                        const std::atomic<bool>* cancelled) const {
  std::atomic<uint32_t>& busy = head_->busy;
  for (;;) {
    uint32_t seen = busy.load(std::memory_order_acquire);  // before the generation: see end_write
    if (head_->generation.load(std::memory_order_acquire) >= generation) return Wait::kReady;
    if (cancelled != nullptr && cancelled->load()) return Wait::kCancelled;
    const auto now = Clock::now();
    if (now >= deadline) return Wait::kTimedOut;
    if ((seen & kWaited) == 0) {
      if (!busy.compare_exchange_weak(seen, seen | kWaited, std::memory_order_acq_rel)) continue;
      seen |= kWaited;
    }
    wait_while_equal(&busy, seen, std::min(deadline, now + std::chrono::milliseconds(50)));
  }
}

}  // namespace pshard::transport
