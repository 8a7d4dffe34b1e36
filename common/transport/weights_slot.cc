// WeightsSlot's seqlock and its readers' wait (weights_slot.h).
#include "common/transport/weights_slot.h"

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
  wake_if_waited(&head_->busy, word, kWaited);
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
  struct Want {
    const SlotHead* head;
    uint64_t generation;
  } want{head_, generation};
  // The word was read before the generation (see end_write).
  auto has = [](uint32_t, const void* arg) {
    const Want* w = static_cast<const Want*>(arg);
    return w->head->generation.load(std::memory_order_acquire) >= w->generation;
  };
  return wait_flagged(&head_->busy, kWaited, has, &want, deadline, cancelled);
}

}  // namespace pshard::transport
